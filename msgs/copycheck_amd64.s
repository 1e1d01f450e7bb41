#include "textflag.h"

// func copyCheck32(dst, src *byte, n int) bool
//
// Copies n bytes (a multiple of 64) from src to dst and reports whether
// any little-endian float32 among them has an all-ones exponent (NaN or
// ±Inf): each 16-byte lane group is masked with the exponent bits and
// compared with them, and the comparisons are ORed together. SSE2 only,
// the amd64 baseline.
TEXT ·copyCheck32(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ $0x7f8000007f800000, AX
	MOVQ AX, X8
	PUNPCKLQDQ X8, X8
	PXOR X9, X9

loop32:
	CMPQ CX, $64
	JB   done32
	MOVOU 0(SI), X0
	MOVOU 16(SI), X1
	MOVOU 32(SI), X2
	MOVOU 48(SI), X3
	MOVOU X0, 0(DI)
	MOVOU X1, 16(DI)
	MOVOU X2, 32(DI)
	MOVOU X3, 48(DI)
	PAND  X8, X0
	PAND  X8, X1
	PAND  X8, X2
	PAND  X8, X3
	PCMPEQL X8, X0
	PCMPEQL X8, X1
	PCMPEQL X8, X2
	PCMPEQL X8, X3
	POR   X0, X9
	POR   X1, X9
	POR   X2, X9
	POR   X3, X9
	ADDQ  $64, SI
	ADDQ  $64, DI
	SUBQ  $64, CX
	JMP   loop32

done32:
	PMOVMSKB X9, AX
	TESTL AX, AX
	SETNE ret+24(FP)
	RET

// func copyCheck16(dst, src *byte, n int) bool
//
// copyCheck32 for little-endian binary16 values (exponent bits 0x7c00).
TEXT ·copyCheck16(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ $0x7c007c007c007c00, AX
	MOVQ AX, X8
	PUNPCKLQDQ X8, X8
	PXOR X9, X9

loop16:
	CMPQ CX, $64
	JB   done16
	MOVOU 0(SI), X0
	MOVOU 16(SI), X1
	MOVOU 32(SI), X2
	MOVOU 48(SI), X3
	MOVOU X0, 0(DI)
	MOVOU X1, 16(DI)
	MOVOU X2, 32(DI)
	MOVOU X3, 48(DI)
	PAND  X8, X0
	PAND  X8, X1
	PAND  X8, X2
	PAND  X8, X3
	PCMPEQW X8, X0
	PCMPEQW X8, X1
	PCMPEQW X8, X2
	PCMPEQW X8, X3
	POR   X0, X9
	POR   X1, X9
	POR   X2, X9
	POR   X3, X9
	ADDQ  $64, SI
	ADDQ  $64, DI
	SUBQ  $64, CX
	JMP   loop16

done16:
	PMOVMSKB X9, AX
	TESTL AX, AX
	SETNE ret+24(FP)
	RET

// func f16ToF32Normal(dst *float32, src *uint16, n int) bool
//
// Converts n binary16 values (a multiple of 8) to float32 assuming every
// one is normal: sign<<16 | ((h & 0x7fff) << 13) + (112 << 23). It reports
// true when some value is not (zero, subnormal, infinite or NaN): the
// caller then converts that block again the general way, which also finds
// the non-finite ones.
TEXT ·f16ToF32Normal(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ $0x7c007c007c007c00, AX
	MOVQ AX, X8
	PUNPCKLQDQ X8, X8
	MOVQ $0x00007fff00007fff, AX
	MOVQ AX, X6
	PUNPCKLQDQ X6, X6
	MOVQ $0x3800000038000000, AX
	MOVQ AX, X5
	PUNPCKLQDQ X5, X5
	MOVQ $0x0000800000008000, AX
	MOVQ AX, X11
	PUNPCKLQDQ X11, X11
	PXOR X7, X7
	PXOR X9, X9

loopcv:
	CMPQ CX, $8
	JB   donecv
	MOVOU 0(SI), X0
	MOVOU X0, X1
	PAND  X8, X1
	MOVOU X1, X2
	PCMPEQW X7, X2
	PCMPEQW X8, X1
	POR   X2, X1
	POR   X1, X9
	MOVOU X0, X3
	PUNPCKLWL X7, X3
	MOVOU X0, X4
	PUNPCKHWL X7, X4
	MOVOU X3, X10
	PAND  X6, X10
	PSLLL $13, X10
	PADDL X5, X10
	PAND  X11, X3
	PSLLL $16, X3
	POR   X10, X3
	MOVOU X4, X10
	PAND  X6, X10
	PSLLL $13, X10
	PADDL X5, X10
	PAND  X11, X4
	PSLLL $16, X4
	POR   X10, X4
	MOVOU X3, 0(DI)
	MOVOU X4, 16(DI)
	ADDQ  $16, SI
	ADDQ  $32, DI
	SUBQ  $8, CX
	JMP   loopcv

donecv:
	PMOVMSKB X9, AX
	TESTL AX, AX
	SETNE ret+24(FP)
	RET

// func f32ToF16Normal(dst *uint16, src *uint32, n int) bool
//
// Converts n float32 values (a multiple of 8) to binary16, rounding to
// nearest even, assuming every one's result is normal or overflows to an
// infinity (2^-14 <= |v| < 2^16): rebias the exponent, add 0xfff plus the
// lowest kept bit, shift out 13 bits. It reports true when some value is
// outside that range (zero, tiny, huge, infinite or NaN): the caller then
// converts that block again the general way, which also finds the
// non-finite ones.
TEXT ·f32ToF16Normal(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ $0x7fffffff7fffffff, AX
	MOVQ AX, X15
	PUNPCKLQDQ X15, X15  // abs mask
	MOVQ $0x387fffff387fffff, AX
	MOVQ AX, X14
	PUNPCKLQDQ X14, X14  // abs > this: at least 2^-14
	MOVQ $0x477fffff477fffff, AX
	MOVQ AX, X13
	PUNPCKLQDQ X13, X13  // abs > this: 2^16 or more
	MOVQ $0x3800000038000000, AX
	MOVQ AX, X12
	PUNPCKLQDQ X12, X12  // exponent rebias
	MOVQ $0x00000fff00000fff, AX
	MOVQ AX, X11
	PUNPCKLQDQ X11, X11
	MOVQ $0x0000000100000001, AX
	MOVQ AX, X10
	PUNPCKLQDQ X10, X10
	MOVQ $0x8000800080008000, AX
	MOVQ AX, X8
	PUNPCKLQDQ X8, X8    // sign bit of each 16-bit lane
	PXOR X9, X9          // special lanes

loopfh:
	CMPQ CX, $8
	JB   donefh
	MOVOU 0(SI), X0      // v[0:4]
	MOVOU 16(SI), X1     // v[4:8]

	// Range check on |v|: special when !(|v| > 0x387fffff) or |v| > 0x477fffff.
	MOVOU X0, X2
	PAND  X15, X2        // |v0|
	MOVOU X1, X3
	PAND  X15, X3        // |v1|
	MOVOU X2, X4
	PCMPGTL X14, X4      // |v0| >= 2^-14
	MOVOU X3, X5
	PCMPGTL X14, X5
	PAND  X5, X4         // both halves in the low range: all ones
	PCMPEQL X5, X5       // all ones
	PXOR  X5, X4         // lanes below 2^-14
	POR   X4, X9
	MOVOU X2, X4
	PCMPGTL X13, X4
	POR   X4, X9
	MOVOU X3, X4
	PCMPGTL X13, X4
	POR   X4, X9

	// Rounded magnitude: (abs - rebias + 0xfff + ((abs >> 13) & 1)) >> 13.
	MOVOU X2, X4
	PSRLL $13, X4
	PAND  X10, X4
	PSUBL X12, X2
	PADDL X11, X2
	PADDL X4, X2
	PSRLL $13, X2
	MOVOU X3, X4
	PSRLL $13, X4
	PAND  X10, X4
	PSUBL X12, X3
	PADDL X11, X3
	PADDL X4, X3
	PSRLL $13, X3
	PACKSSLW X3, X2      // eight magnitudes, at most 0x7c00

	// Signs: arithmetic shifts give 0 or -1, packed to 16 bits.
	PSRAL $31, X0
	PSRAL $31, X1
	PACKSSLW X1, X0
	PAND  X8, X0
	POR   X0, X2
	MOVOU X2, 0(DI)
	ADDQ  $32, SI
	ADDQ  $16, DI
	SUBQ  $8, CX
	JMP   loopfh

donefh:
	PMOVMSKB X9, AX
	TESTL AX, AX
	SETNE ret+24(FP)
	RET
