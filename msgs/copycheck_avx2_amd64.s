#include "textflag.h"

// The AVX2 and F16C receive kernels. They are called only when
// golang.org/x/sys/cpu reports AVX2 and F16C (and the OS's support for
// the YMM state), through the avx2Kernels table in copycheck_amd64.go.
//
// The non-temporal variants store with VMOVNTDQ, which faults on an
// address that is not aligned to the store's width: their callers pass a
// destination aligned to 32 bytes, and they issue one SFENCE before they
// return so that the weakly ordered stores are visible to whatever runs
// next on any core. Every kernel ends with VZEROUPPER.

// The exponent test of eight 32-bit lanes: r becomes all ones in the
// lanes whose exponent bits (mask in Y8) are all ones.
#define EXP32(r) VPAND Y8, r, r; VPCMPEQD Y8, r, r
#define EXP16(r) VPAND Y8, r, r; VPCMPEQW Y8, r, r

// Eight 32-byte registers Y0-Y7 from the 256 bytes at SI.
#define LOAD256 \
	VMOVDQU 0(SI), Y0; \
	VMOVDQU 32(SI), Y1; \
	VMOVDQU 64(SI), Y2; \
	VMOVDQU 96(SI), Y3; \
	VMOVDQU 128(SI), Y4; \
	VMOVDQU 160(SI), Y5; \
	VMOVDQU 192(SI), Y6; \
	VMOVDQU 224(SI), Y7

// The exponent tests of Y0-Y7 (EXP is EXP32 or EXP16), ORed into Y9.
#define TEST256(EXP) \
	EXP(Y0); \
	EXP(Y1); \
	EXP(Y2); \
	EXP(Y3); \
	EXP(Y4); \
	EXP(Y5); \
	EXP(Y6); \
	EXP(Y7); \
	VPOR Y0, Y1, Y1; \
	VPOR Y2, Y3, Y3; \
	VPOR Y4, Y5, Y5; \
	VPOR Y6, Y7, Y7; \
	VPOR Y1, Y3, Y3; \
	VPOR Y5, Y7, Y7; \
	VPOR Y3, Y9, Y9; \
	VPOR Y7, Y9, Y9

// One iteration of the non-temporal copies: 256 bytes from SI to DI,
// the source prefetched 0x1C0 and 0x280 bytes ahead (as the runtime's
// memmove does for large moves), the exponents tested with EXP.
#define COPYNT256(EXP) \
	PREFETCHNTA 0x1C0(SI); \
	PREFETCHNTA 0x280(SI); \
	LOAD256; \
	VMOVNTDQ Y0, 0(DI); \
	VMOVNTDQ Y1, 32(DI); \
	VMOVNTDQ Y2, 64(DI); \
	VMOVNTDQ Y3, 96(DI); \
	VMOVNTDQ Y4, 128(DI); \
	VMOVNTDQ Y5, 160(DI); \
	VMOVNTDQ Y6, 192(DI); \
	VMOVNTDQ Y7, 224(DI); \
	TEST256(EXP); \
	ADDQ $256, SI; \
	ADDQ $256, DI; \
	SUBQ $256, CX

// func copyCheck32NT(dst, src *byte, n int) bool
//
// Copies n bytes (a multiple of 256) from src to dst (32-byte aligned)
// with non-temporal stores and reports whether any little-endian float32
// among them has an all-ones exponent (NaN or ±Inf).
TEXT ·copyCheck32NT(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL $0x7f800000, AX
	MOVQ AX, X8
	VPBROADCASTD X8, Y8
	VPXOR Y9, Y9, Y9

loop32:
	CMPQ CX, $256
	JB   done32
	COPYNT256(EXP32)
	JMP  loop32

done32:
	SFENCE
	VPTEST Y9, Y9
	SETNE  ret+24(FP)
	VZEROUPPER
	RET

// func copyCheck16NT(dst, src *byte, n int) bool
//
// copyCheck32NT for little-endian binary16 values (exponent bits 0x7c00).
TEXT ·copyCheck16NT(SB), NOSPLIT, $0-25
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVL $0x7c00, AX
	MOVQ AX, X8
	VPBROADCASTW X8, Y8
	VPXOR Y9, Y9, Y9

loop16:
	CMPQ CX, $256
	JB   done16
	COPYNT256(EXP16)
	JMP  loop16

done16:
	SFENCE
	VPTEST Y9, Y9
	SETNE  ret+24(FP)
	VZEROUPPER
	RET

// One iteration of f16ToF32F16C: 64 binary16 values (128 bytes at SI)
// to 64 float32 (256 bytes at DI), stored with ST; the source's exponents
// are tested from Y0-Y3 into the accumulator Y9. VCVTPH2PS is exact for
// every binary16 value (a NaN is quieted; the caller reports NaNs from
// the source).
#define F16F32(ST) \
	VMOVDQU 0(SI), Y0; \
	VMOVDQU 32(SI), Y1; \
	VMOVDQU 64(SI), Y2; \
	VMOVDQU 96(SI), Y3; \
	VCVTPH2PS 0(SI), Y4; \
	VCVTPH2PS 16(SI), Y5; \
	VCVTPH2PS 32(SI), Y6; \
	VCVTPH2PS 48(SI), Y7; \
	ST Y4, 0(DI); \
	ST Y5, 32(DI); \
	ST Y6, 64(DI); \
	ST Y7, 96(DI); \
	VCVTPH2PS 64(SI), Y4; \
	VCVTPH2PS 80(SI), Y5; \
	VCVTPH2PS 96(SI), Y6; \
	VCVTPH2PS 112(SI), Y7; \
	ST Y4, 128(DI); \
	ST Y5, 160(DI); \
	ST Y6, 192(DI); \
	ST Y7, 224(DI); \
	EXP16(Y0); \
	EXP16(Y1); \
	EXP16(Y2); \
	EXP16(Y3); \
	VPOR Y0, Y1, Y1; \
	VPOR Y2, Y3, Y3; \
	VPOR Y1, Y9, Y9; \
	VPOR Y3, Y9, Y9; \
	ADDQ $128, SI; \
	ADDQ $256, DI; \
	SUBQ $64, CX

// func f16ToF32F16C(dst *float32, src *byte, n int, nt bool) bool
//
// Converts n little-endian binary16 values (a multiple of 64) at src to
// float32 at dst and reports whether one of them is infinite or NaN. With
// nt the stores are non-temporal and dst must be 32-byte aligned.
TEXT ·f16ToF32F16C(SB), NOSPLIT, $0-33
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVBLZX nt+24(FP), DX
	MOVL $0x7c00, AX
	MOVQ AX, X8
	VPBROADCASTW X8, Y8
	VPXOR Y9, Y9, Y9
	TESTL DX, DX
	JNZ   loophnt

looph:
	CMPQ CX, $64
	JB   doneh
	F16F32(VMOVDQU)
	JMP  looph

loophnt:
	CMPQ CX, $64
	JB   donehnt
	PREFETCHNTA 0x1C0(SI)
	PREFETCHNTA 0x200(SI)
	F16F32(VMOVNTDQ)
	JMP  loophnt

donehnt:
	SFENCE

doneh:
	VPTEST Y9, Y9
	SETNE  ret+32(FP)
	VZEROUPPER
	RET

// One conversion of f32ToF16F16C: eight float32 in r to eight binary16
// stored with ST at off(DI). Immediate 0: round to nearest even whatever
// MXCSR says; with the overflow exception masked (Go's setting), a finite
// value beyond the binary16 range becomes an infinity.
#define PS2PH(ST, r, x, off) VCVTPS2PH $0, r, x; ST x, off(DI)

// One iteration of f32ToF16F16C: 64 float32 (256 bytes at SI) to 64
// binary16 (128 bytes at DI); the source's exponents are tested into Y9.
#define F32F16(ST) \
	LOAD256; \
	PS2PH(ST, Y0, X10, 0); \
	PS2PH(ST, Y1, X11, 16); \
	PS2PH(ST, Y2, X12, 32); \
	PS2PH(ST, Y3, X13, 48); \
	PS2PH(ST, Y4, X10, 64); \
	PS2PH(ST, Y5, X11, 80); \
	PS2PH(ST, Y6, X12, 96); \
	PS2PH(ST, Y7, X13, 112); \
	TEST256(EXP32); \
	ADDQ $256, SI; \
	ADDQ $128, DI; \
	SUBQ $64, CX

// func f32ToF16F16C(dst *uint16, src *byte, n int, nt bool) bool
//
// Converts n little-endian float32 values (a multiple of 64) at src to
// binary16 at dst, rounding to nearest even, and reports whether one of
// the float32 values is infinite or NaN. With nt the stores are
// non-temporal and dst must be 32-byte aligned.
TEXT ·f32ToF16F16C(SB), NOSPLIT, $0-33
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVBLZX nt+24(FP), DX
	MOVL $0x7f800000, AX
	MOVQ AX, X8
	VPBROADCASTD X8, Y8
	VPXOR Y9, Y9, Y9
	TESTL DX, DX
	JNZ   loopfnt

loopf:
	CMPQ CX, $64
	JB   donef
	F32F16(VMOVDQU)
	JMP  loopf

loopfnt:
	CMPQ CX, $64
	JB   donefnt
	PREFETCHNTA 0x1C0(SI)
	PREFETCHNTA 0x280(SI)
	F32F16(VMOVNTDQ)
	JMP  loopfnt

donefnt:
	SFENCE

donef:
	VPTEST Y9, Y9
	SETNE  ret+32(FP)
	VZEROUPPER
	RET
