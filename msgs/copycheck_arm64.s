#include "textflag.h"

// The NEON (Advanced SIMD) receive kernels of the neonKernels set
// (copycheck_arm64.go). Every ARMv8-A core has Advanced SIMD and the
// half <-> single conversions FCVTL/FCVTN, so there is no feature test.
// linux/arm64 is little-endian: a vector register loaded with VLD1 holds
// the bytes in memory order whatever the arrangement, so the byte-wise
// copies and the lane-wise checks may use the same registers.
//
// The non-finite check: AND each lane with the exponent mask E (0x7f800000
// for float32, 0x7c00 for binary16) and keep the unsigned lane-wise
// maximum in two accumulators. A masked lane is at most E and equals E
// exactly when its exponent bits are all ones (NaN or ±Inf), so the
// maximum of all lanes equals E exactly when one value is non-finite;
// that is tested once, at the end, with VCMEQ. Two instructions per 16
// bytes of source.
//
// The conversions are FCVTL/FCVTL2 (binary16 -> float32; exact for every
// value, subnormals and infinities included, a signalling NaN comes out
// quiet) and FCVTN/FCVTN2 (float32 -> binary16, rounded as FPCR.RMode
// says). Go never writes FPCR and its own compiled float conversions rely
// on the state Linux starts a thread with (round to nearest even, no
// flush to zero, IEEE half precision rather than the alternative format),
// so these are exact in the same state. With the overflow trap disabled
// (that state too), a finite float32 beyond the binary16 range becomes an
// infinity, as a cast does. The Go assembler has no mnemonic for either
// instruction: they are written as WORDs (encodings below, checked with
// go tool objdump and by the tests under qemu).
//
// No non-temporal stores (STNP): the nt argument of the conversions is
// ignored and neonKernels has no copyCheck*NT.

// FCVTL Vd.4S, Vn.4H: the low four binary16 lanes of Vn to float32.
#define FCVTL(n, d) WORD $(0x0e217800 | (n)<<5 | (d))
// FCVTL2 Vd.4S, Vn.8H: the high four binary16 lanes of Vn to float32.
#define FCVTL2(n, d) WORD $(0x4e217800 | (n)<<5 | (d))
// FCVTN Vd.4H, Vn.4S: four float32 to the low binary16 lanes of Vd (the
// high half is zeroed).
#define FCVTN(n, d) WORD $(0x0e216800 | (n)<<5 | (d))
// FCVTN2 Vd.8H, Vn.4S: four float32 to the high binary16 lanes of Vd
// (the low half is kept).
#define FCVTN2(n, d) WORD $(0x4e216800 | (n)<<5 | (d))

// The check of four registers V0-V3 against the mask in V16 into the
// accumulators V17 and V18, with lanes of arrangement A (S4 or H8).
#define CHECK4(A) \
	VAND  V16.B16, V0.B16, V0.B16; \
	VAND  V16.B16, V1.B16, V1.B16; \
	VAND  V16.B16, V2.B16, V2.B16; \
	VAND  V16.B16, V3.B16, V3.B16; \
	VUMAX V1.A, V0.A, V0.A; \
	VUMAX V3.A, V2.A, V2.A; \
	VUMAX V0.A, V17.A, V17.A; \
	VUMAX V2.A, V18.A, V18.A

// The end of every kernel: R4 = 1 when a lane of max(V17, V18) equals
// the mask in V16, else 0.
#define RESULT(A) \
	VUMAX V18.A, V17.A, V17.A; \
	VCMEQ V16.A, V17.A, V17.A; \
	VMOV  V17.D[0], R4; \
	VMOV  V17.D[1], R5; \
	ORR   R4, R5, R4; \
	CMP   $0, R4; \
	CSET  NE, R4

// func copyCheck32(dst, src *byte, n int) bool
//
// Copies n bytes from src to dst, 64 at a time (a remainder of n under
// 64 is neither copied nor checked; callers pass a multiple of 64), and
// reports whether any little-endian float32 among them has an all-ones
// exponent. Neither pointer needs any alignment.
TEXT ·copyCheck32(SB), NOSPLIT, $0-25
	MOVD  dst+0(FP), R0
	MOVD  src+8(FP), R1
	MOVD  n+16(FP), R2
	AND   $~63, R2, R2
	ADD   R1, R2, R3 // the end of src
	MOVW  $0x7f800000, R4
	VDUP  R4, V16.S4
	VEOR  V17.B16, V17.B16, V17.B16
	VEOR  V18.B16, V18.B16, V18.B16
	CMP   R1, R3
	BEQ   done32

loop32:
	VLD1.P 64(R1), [V0.B16, V1.B16, V2.B16, V3.B16]
	VST1.P [V0.B16, V1.B16, V2.B16, V3.B16], 64(R0)
	CHECK4(S4)
	CMP    R1, R3
	BNE    loop32

done32:
	RESULT(S4)
	MOVB R4, ret+24(FP)
	RET

// func copyCheck16(dst, src *byte, n int) bool
//
// copyCheck32 for little-endian binary16 values (exponent bits 0x7c00).
TEXT ·copyCheck16(SB), NOSPLIT, $0-25
	MOVD  dst+0(FP), R0
	MOVD  src+8(FP), R1
	MOVD  n+16(FP), R2
	AND   $~63, R2, R2
	ADD   R1, R2, R3
	MOVW  $0x7c00, R4
	VDUP  R4, V16.H8
	VEOR  V17.B16, V17.B16, V17.B16
	VEOR  V18.B16, V18.B16, V18.B16
	CMP   R1, R3
	BEQ   done16

loop16:
	VLD1.P 64(R1), [V0.B16, V1.B16, V2.B16, V3.B16]
	VST1.P [V0.B16, V1.B16, V2.B16, V3.B16], 64(R0)
	CHECK4(H8)
	CMP    R1, R3
	BNE    loop16

done16:
	RESULT(H8)
	MOVB R4, ret+24(FP)
	RET

// func f16ToF32NEON(dst *float32, src *byte, n int, nt bool) bool
//
// Converts n little-endian binary16 values at src to float32 at dst, 32
// at a time (a remainder of n under 32 is left alone; callers pass a
// multiple of 64), exactly, and reports whether one of them is infinite
// or NaN. nt is ignored. Neither pointer needs any alignment.
TEXT ·f16ToF32NEON(SB), NOSPLIT, $0-33
	MOVD  dst+0(FP), R0
	MOVD  src+8(FP), R1
	MOVD  n+16(FP), R2
	AND   $~31, R2, R2
	ADD   R2<<1, R1, R3 // the end of src: two bytes a value
	MOVW  $0x7c00, R4
	VDUP  R4, V16.H8
	VEOR  V17.B16, V17.B16, V17.B16
	VEOR  V18.B16, V18.B16, V18.B16
	CMP   R1, R3
	BEQ   doneh

looph:
	VLD1.P 64(R1), [V0.H8, V1.H8, V2.H8, V3.H8]
	FCVTL(0, 4)   // FCVTL  V4.4S, V0.4H
	FCVTL2(0, 5)  // FCVTL2 V5.4S, V0.8H
	FCVTL(1, 6)   // FCVTL  V6.4S, V1.4H
	FCVTL2(1, 7)  // FCVTL2 V7.4S, V1.8H
	FCVTL(2, 8)   // FCVTL  V8.4S, V2.4H
	FCVTL2(2, 9)  // FCVTL2 V9.4S, V2.8H
	FCVTL(3, 10)  // FCVTL  V10.4S, V3.4H
	FCVTL2(3, 11) // FCVTL2 V11.4S, V3.8H
	VST1.P [V4.S4, V5.S4, V6.S4, V7.S4], 64(R0)
	VST1.P [V8.S4, V9.S4, V10.S4, V11.S4], 64(R0)
	CHECK4(H8)
	CMP    R1, R3
	BNE    looph

doneh:
	RESULT(H8)
	MOVB R4, ret+32(FP)
	RET

// func f32ToF16NEON(dst *uint16, src *byte, n int, nt bool) bool
//
// Converts n little-endian float32 values at src to binary16 at dst, 32
// at a time (a remainder of n under 32 is left alone; callers pass a
// multiple of 64), rounding to nearest even, and reports whether one of
// the float32 values is infinite or NaN. nt is ignored. Neither pointer
// needs any alignment.
TEXT ·f32ToF16NEON(SB), NOSPLIT, $0-33
	MOVD  dst+0(FP), R0
	MOVD  src+8(FP), R1
	MOVD  n+16(FP), R2
	AND   $~31, R2, R2
	ADD   R2<<2, R1, R3 // the end of src: four bytes a value
	MOVW  $0x7f800000, R4
	VDUP  R4, V16.S4
	VEOR  V17.B16, V17.B16, V17.B16
	VEOR  V18.B16, V18.B16, V18.B16
	CMP   R1, R3
	BEQ   donef

loopf:
	VLD1.P 64(R1), [V0.S4, V1.S4, V2.S4, V3.S4]
	VLD1.P 64(R1), [V4.S4, V5.S4, V6.S4, V7.S4]
	FCVTN(0, 8)   // FCVTN  V8.4H, V0.4S
	FCVTN2(1, 8)  // FCVTN2 V8.8H, V1.4S
	FCVTN(2, 9)   // FCVTN  V9.4H, V2.4S
	FCVTN2(3, 9)  // FCVTN2 V9.8H, V3.4S
	FCVTN(4, 10)  // FCVTN  V10.4H, V4.4S
	FCVTN2(5, 10) // FCVTN2 V10.8H, V5.4S
	FCVTN(6, 11)  // FCVTN  V11.4H, V6.4S
	FCVTN2(7, 11) // FCVTN2 V11.8H, V7.4S
	VST1.P [V8.H8, V9.H8, V10.H8, V11.H8], 64(R0)
	VAND  V16.B16, V0.B16, V0.B16
	VAND  V16.B16, V1.B16, V1.B16
	VAND  V16.B16, V2.B16, V2.B16
	VAND  V16.B16, V3.B16, V3.B16
	VAND  V16.B16, V4.B16, V4.B16
	VAND  V16.B16, V5.B16, V5.B16
	VAND  V16.B16, V6.B16, V6.B16
	VAND  V16.B16, V7.B16, V7.B16
	VUMAX V1.S4, V0.S4, V0.S4
	VUMAX V3.S4, V2.S4, V2.S4
	VUMAX V5.S4, V4.S4, V4.S4
	VUMAX V7.S4, V6.S4, V6.S4
	VUMAX V2.S4, V0.S4, V0.S4
	VUMAX V6.S4, V4.S4, V4.S4
	VUMAX V0.S4, V17.S4, V17.S4
	VUMAX V4.S4, V18.S4, V18.S4
	CMP    R1, R3
	BNE    loopf

donef:
	RESULT(S4)
	MOVB R4, ret+32(FP)
	RET
