#include "textflag.h"

// The kernels of AddSquares and ScaleSiLU (rmssilu.go). Like those of
// kernels_amd64.s they compute what the portable loops compute, operation
// for operation and in the same order (no fused multiply-add), so the
// results are the portable ones bit for bit.

// func addSquaresAVX2(s *float64, x *float32, n int, b float32)
//
// For i < n (a multiple of 4): f = float64(x[i] + b), s[i] += f·f.
TEXT ·addSquaresAVX2(SB), NOSPLIT, $0-28
	MOVQ s+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS b+24(FP), X2
	XORQ AX, AX
	MOVQ CX, DX
	ANDQ $-8, DX

sq8loop:
	CMPQ AX, DX
	JAE  sq4
	VADDPS (SI)(AX*4), X2, X0
	VADDPS 16(SI)(AX*4), X2, X1
	VCVTPS2PD X0, Y0
	VCVTPS2PD X1, Y1
	VMULPD Y0, Y0, Y0
	VMULPD Y1, Y1, Y1
	VADDPD (DI)(AX*8), Y0, Y0
	VADDPD 32(DI)(AX*8), Y1, Y1
	VMOVUPD Y0, (DI)(AX*8)
	VMOVUPD Y1, 32(DI)(AX*8)
	ADDQ $8, AX
	JMP  sq8loop

sq4:
	CMPQ AX, CX
	JAE  sqdone
	VADDPS (SI)(AX*4), X2, X0
	VCVTPS2PD X0, Y0
	VMULPD Y0, Y0, Y0
	VADDPD (DI)(AX*8), Y0, Y0
	VMOVUPD Y0, (DI)(AX*8)

sqdone:
	VZEROUPPER
	RET

// The offsets of siluConsts (rmssilu_amd64.go), each eight lanes.
#define F_LOG2E 0
#define F_ROUND 32
#define F_LN2HI 64
#define F_LN2LO 96
#define F_P0 128
#define F_P1 160
#define F_P2 192
#define F_P3 224
#define F_P4 256
#define F_P5 288
#define F_1 320
#define F_MIN 352
#define F_MAX 384
#define F_RBITS 416
#define F_BIAS 448

// func scaleSiLUAVX2(o, x *float32, n int, b float32, s *float32, gain float32, k *siluConsts) int
//
// For i < n (a multiple of 8), eight at a time, in float32:
// f = (x[i] + b)·s[i]·gain, o[i] = f / (1 + expf32(−f)), expf32's
// operations in its order. It stops before the first group whose −f is
// outside [−87, 88] or a NaN, and returns how many it did.
TEXT ·scaleSiLUAVX2(SB), NOSPLIT, $0-64
	MOVQ o+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS b+24(FP), Y13
	MOVQ s+32(FP), R9
	VBROADCASTSS gain+40(FP), Y14
	MOVQ k+48(FP), BX
	VXORPS Y15, Y15, Y15
	XORQ AX, AX

ssloop:
	CMPQ AX, CX
	JAE  ssdone
	VADDPS (SI)(AX*4), Y13, Y12
	VMULPS (R9)(AX*4), Y12, Y12
	VMULPS Y14, Y12, Y12
	VSUBPS Y12, Y15, Y0
	VCMPPS $0x1d, F_MIN(BX), Y0, Y1
	VCMPPS $0x12, F_MAX(BX), Y0, Y2
	VANDPS Y2, Y1, Y1
	VMOVMSKPS Y1, R8
	CMPL R8, $0xff
	JNE  ssdone
	VMULPS F_LOG2E(BX), Y0, Y3
	VADDPS F_ROUND(BX), Y3, Y3
	VSUBPS F_ROUND(BX), Y3, Y4
	VMULPS F_LN2HI(BX), Y4, Y5
	VSUBPS Y5, Y0, Y5
	VMULPS F_LN2LO(BX), Y4, Y6
	VSUBPS Y6, Y5, Y5
	VMULPS Y5, Y5, Y7
	VMULPS F_P0(BX), Y5, Y6
	VADDPS F_P1(BX), Y6, Y6
	VMULPS Y5, Y6, Y6
	VADDPS F_P2(BX), Y6, Y6
	VMULPS Y5, Y6, Y6
	VADDPS F_P3(BX), Y6, Y6
	VMULPS Y5, Y6, Y6
	VADDPS F_P4(BX), Y6, Y6
	VMULPS Y5, Y6, Y6
	VADDPS F_P5(BX), Y6, Y6
	VMULPS Y7, Y6, Y6
	VADDPS Y5, Y6, Y6
	VADDPS F_1(BX), Y6, Y6
	VPSUBD F_RBITS(BX), Y3, Y8
	VPADDD F_BIAS(BX), Y8, Y8
	VPSLLD $23, Y8, Y8
	VMULPS Y8, Y6, Y6
	VADDPS F_1(BX), Y6, Y6
	VDIVPS Y6, Y12, Y6
	VMOVUPS Y6, (DI)(AX*4)
	ADDQ $8, AX
	JMP  ssloop

ssdone:
	VZEROUPPER
	MOVQ AX, ret+56(FP)
	RET
