#include "textflag.h"

// The kernels of AddSquares and ScaleSiLU (rmssilu.go). Like those of
// kernels_amd64.s they compute what the portable loops compute, operation
// for operation and in the same order (no fused multiply-add), so the
// results are the portable ones bit for bit. The constants' offsets in
// *vecConsts and the RANGE4 and EXP4 macros are kernels_amd64.s's, repeated
// here (an assembly file's defines are its own).
#define C_LOG2E 0
#define C_R52 32
#define C_LN2HI 64
#define C_LN2LO 96
#define C_120 128
#define C_24 160
#define C_6 192
#define C_2 224
#define C_1 256
#define C_MIN 288
#define C_MAX 320
#define C_MASK 352
#define C_BIAS 384

// RANGE4(reg, out) jumps to out unless every lane of reg is in [-708, 709]
// (a NaN is not). Clobbers Y1, Y2, R8.
#define RANGE4(reg, out) \
	VCMPPD $0x1d, C_MIN(BX), reg, Y1 \
	VCMPPD $0x12, C_MAX(BX), reg, Y2 \
	VANDPD Y2, Y1, Y1 \
	VMOVMSKPD Y1, R8 \
	CMPL R8, $15 \
	JNE out

// EXP4 sets Y6 to e^Y0 for four float64 in [-708, 709], as expGo does.
// Clobbers Y3-Y5, Y8-Y11.
#define EXP4 \
	VMULPD C_LOG2E(BX), Y0, Y3 \
	VADDPD C_R52(BX), Y3, Y3 \
	VSUBPD C_R52(BX), Y3, Y4 \
	VMULPD C_LN2HI(BX), Y4, Y5 \
	VSUBPD Y5, Y0, Y5 \
	VMULPD C_LN2LO(BX), Y4, Y6 \
	VSUBPD Y6, Y5, Y5 \
	VMULPD C_120(BX), Y5, Y6 \
	VADDPD C_24(BX), Y6, Y6 \
	VMULPD Y6, Y5, Y6 \
	VADDPD C_6(BX), Y6, Y6 \
	VMULPD Y6, Y5, Y6 \
	VADDPD C_2(BX), Y6, Y6 \
	VMULPD Y6, Y5, Y6 \
	VADDPD C_1(BX), Y6, Y6 \
	VMULPD Y6, Y5, Y6 \
	VADDPD C_1(BX), Y6, Y6 \
	VPSUBQ C_R52(BX), Y3, Y8 \
	VPAND C_MASK(BX), Y8, Y9 \
	VPCMPEQQ Y10, Y10, Y10 \
	VGATHERQPD Y10, (DX)(Y9*8), Y11 \
	VPADDQ C_BIAS(BX), Y8, Y8 \
	VPSRLQ $6, Y8, Y8 \
	VPSLLQ $52, Y8, Y8 \
	VMULPD Y11, Y6, Y6 \
	VMULPD Y8, Y6, Y6

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

// func scaleSiLUAVX2(o, x *float32, n int, b float32, s *float64, gain float64, k *vecConsts, tbl *[64]float64) int
//
// For i < n (a multiple of 4), four at a time: f = float64(x[i] + b)·s[i]·g,
// e = exp(−f), o[i] = float32(f / (1 + e)). It stops before the first
// group whose −f is outside [-708, 709] or a NaN, and returns how many it
// did.
TEXT ·scaleSiLUAVX2(SB), NOSPLIT, $0-72
	MOVQ o+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS b+24(FP), X13
	MOVQ s+32(FP), R9
	VBROADCASTSD gain+40(FP), Y14
	MOVQ k+48(FP), BX
	MOVQ tbl+56(FP), DX
	VXORPD Y15, Y15, Y15
	XORQ AX, AX

ssloop:
	CMPQ AX, CX
	JAE  ssdone
	VADDPS (SI)(AX*4), X13, X12
	VCVTPS2PD X12, Y12
	VMULPD (R9)(AX*8), Y12, Y12
	VMULPD Y14, Y12, Y12
	VSUBPD Y12, Y15, Y0
	RANGE4(Y0, ssdone)
	EXP4
	VADDPD C_1(BX), Y6, Y6
	VDIVPD Y6, Y12, Y6
	VCVTPD2PSY Y6, X6
	VMOVUPS X6, (DI)(AX*4)
	ADDQ $4, AX
	JMP  ssloop

ssdone:
	VZEROUPPER
	MOVQ AX, ret+64(FP)
	RET
