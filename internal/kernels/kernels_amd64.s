#include "textflag.h"

// The kernels of this file compute exactly what the portable loops of
// kernels.go compute, operation for operation and in the same order (no
// fused multiply-add), so their results are the portable ones bit for bit.
// They read their constants from a *vecConsts (BX), each splatted over 32
// bytes, at these offsets:
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
#define C_GELUA 416
#define C_GELUC 448

// RANGE4(reg, out) jumps to out unless every lane of reg is in [-708, 709]
// (a NaN is not). Clobbers Y1, Y2, R8.
#define RANGE4(reg, out) \
	VCMPPD $0x1d, C_MIN(BX), reg, Y1 \
	VCMPPD $0x12, C_MAX(BX), reg, Y2 \
	VANDPD Y2, Y1, Y1 \
	VMOVMSKPD Y1, R8 \
	CMPL R8, $15 \
	JNE out

// EXP4 sets Y6 to e^Y0 for four float64 in [-708, 709], as expGo does:
// k = round(x·64/ln2), r = x − k·ln2Hi/64 − k·ln2Lo/64, a degree-5 Taylor
// polynomial p(r), times 2^((k&63)/64) from the table at DX, times 2^(k>>6).
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

// func expAVX2(u *float64, n int, k *vecConsts, tbl *[64]float64) int
//
// Replaces u[i] by e^u[i] for i < n (n a multiple of 4), four at a time.
// It stops before the first group of four holding a value outside
// [-708, 709] or a NaN, and returns how many it replaced.
TEXT ·expAVX2(SB), NOSPLIT, $0-40
	MOVQ u+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ k+16(FP), BX
	MOVQ tbl+24(FP), DX
	XORQ AX, AX

exploop:
	CMPQ AX, CX
	JAE  expdone
	VMOVUPD (SI)(AX*8), Y0
	RANGE4(Y0, expdone)
	EXP4
	VMOVUPD Y6, (SI)(AX*8)
	ADDQ $4, AX
	JMP  exploop

expdone:
	VZEROUPPER
	MOVQ AX, ret+32(FP)
	RET

// func softmaxExpAVX2(row *float32, n int, mx float32, s *float64, k *vecConsts, tbl *[64]float64) int
//
// For i < n (a multiple of 4), four at a time: e = exp(float64(row[i] −
// mx)), *s += e in the order of i, row[i] = float32(e). It stops before
// the first group whose difference is outside [-708, 709] or a NaN, and
// returns how many it did.
TEXT ·softmaxExpAVX2(SB), NOSPLIT, $0-56
	MOVQ row+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS mx+16(FP), X15
	MOVQ s+24(FP), DI
	MOVQ k+32(FP), BX
	MOVQ tbl+40(FP), DX
	VMOVSD (DI), X14
	XORQ AX, AX

smloop:
	CMPQ AX, CX
	JAE  smdone
	VMOVUPS (SI)(AX*4), X0
	VSUBPS X15, X0, X0
	VCVTPS2PD X0, Y0
	RANGE4(Y0, smdone)
	EXP4
	VADDSD X6, X14, X14
	VPERMILPD $1, X6, X7
	VADDSD X7, X14, X14
	VEXTRACTF128 $1, Y6, X7
	VADDSD X7, X14, X14
	VPERMILPD $1, X7, X7
	VADDSD X7, X14, X14
	VCVTPD2PSY Y6, X6
	VMOVUPS X6, (SI)(AX*4)
	ADDQ $4, AX
	JMP  smloop

smdone:
	VMOVSD X14, (DI)
	VZEROUPPER
	MOVQ AX, ret+48(FP)
	RET

// func geluAVX2(x *float32, n int, k *vecConsts, tbl *[64]float64) int
//
// For i < n (a multiple of 4), four at a time: v = float64(x[i]),
// e = exp(c·(v + 0.044715·v·v·v)), x[i] = float32(v / (1 + e)). It stops
// before the first group whose exponent is outside [-708, 709] or a NaN,
// and returns how many it did.
TEXT ·geluAVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ k+16(FP), BX
	MOVQ tbl+24(FP), DX
	XORQ AX, AX

geloop:
	CMPQ AX, CX
	JAE  gedone
	VCVTPS2PD (SI)(AX*4), Y12
	VMULPD C_GELUA(BX), Y12, Y0
	VMULPD Y12, Y0, Y0
	VMULPD Y12, Y0, Y0
	VADDPD Y0, Y12, Y0
	VMULPD C_GELUC(BX), Y0, Y0
	RANGE4(Y0, gedone)
	EXP4
	VADDPD C_1(BX), Y6, Y6
	VDIVPD Y6, Y12, Y6
	VCVTPD2PSY Y6, X6
	VMOVUPS X6, (SI)(AX*4)
	ADDQ $4, AX
	JMP  geloop

gedone:
	VZEROUPPER
	MOVQ AX, ret+32(FP)
	RET

// func laneSumsAVX2(x *float32, n int, mu float64, out *[4]float64, square bool)
//
// For i < n (a multiple of 4), adds float64(x[i]) − mu, or its square when
// square is set, into lane i%4 of out, in the order of i: the four partial
// sums of meanInvStd and rmsNormStrided.
TEXT ·laneSumsAVX2(SB), NOSPLIT, $0-33
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSD mu+16(FP), Y2
	MOVQ out+24(FP), DI
	MOVB square+32(FP), DX
	VMOVUPD (DI), Y0
	XORQ AX, AX
	TESTB DX, DX
	JNZ  sqloop

sumloop:
	CMPQ AX, CX
	JAE  sumdone
	VCVTPS2PD (SI)(AX*4), Y1
	VSUBPD Y2, Y1, Y1
	VADDPD Y1, Y0, Y0
	ADDQ $4, AX
	JMP  sumloop

sqloop:
	CMPQ AX, CX
	JAE  sumdone
	VCVTPS2PD (SI)(AX*4), Y1
	VSUBPD Y2, Y1, Y1
	VMULPD Y1, Y1, Y1
	VADDPD Y1, Y0, Y0
	ADDQ $4, AX
	JMP  sqloop

sumdone:
	VMOVUPD Y0, (DI)
	VZEROUPPER
	RET

// func normAffineAVX2(o, x *float32, n int, mu, inv float64, a, c *float32, addOne bool)
//
// For i < n (a multiple of 4): v = float32((float64(x[i]) − mu)·inv), then
// o[i] = v·a'[i] + c[i] in float32, where a' = 1 + a[i] when addOne is set
// (adaLN modulation) and a[i] otherwise (an affine LayerNorm).
TEXT ·normAffineAVX2(SB), NOSPLIT, $0-57
	MOVQ o+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSD mu+24(FP), Y2
	VBROADCASTSD inv+32(FP), Y3
	MOVQ a+40(FP), R9
	MOVQ c+48(FP), R10
	MOVB addOne+56(FP), DX
	MOVL $0x3f800000, R8
	MOVQ R8, X4
	VBROADCASTSS X4, X4
	XORQ AX, AX

naloop:
	CMPQ AX, CX
	JAE  nadone
	VCVTPS2PD (SI)(AX*4), Y1
	VSUBPD Y2, Y1, Y1
	VMULPD Y3, Y1, Y1
	VCVTPD2PSY Y1, X1
	VMOVUPS (R9)(AX*4), X5
	TESTB DX, DX
	JZ   naplain
	VADDPS X5, X4, X5
naplain:
	VMULPS X5, X1, X1
	VADDPS (R10)(AX*4), X1, X1
	VMOVUPS X1, (DI)(AX*4)
	ADDQ $4, AX
	JMP  naloop

nadone:
	VZEROUPPER
	RET

// func mulScaleAVX2(x *float32, n int, s float32, gain *float32)
//
// For i < n (a multiple of 4): x[i] = x[i]·s·gain[i] in float32.
TEXT ·mulScaleAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS s+16(FP), X2
	MOVQ gain+24(FP), R9
	XORQ AX, AX

msloop:
	CMPQ AX, CX
	JAE  msdone
	VMOVUPS (SI)(AX*4), X1
	VMULPS X2, X1, X1
	VMULPS (R9)(AX*4), X1, X1
	VMOVUPS X1, (SI)(AX*4)
	ADDQ $4, AX
	JMP  msloop

msdone:
	VZEROUPPER
	RET

// func ropeAVX2(row *float32, heads, dh int, cs, sn *float64)
//
// Rotates each of the heads dh-wide blocks of row (dh a multiple of 4)
// pair by pair: (x0, x1) at (2j, 2j+1) becomes (x0·cs[j] − x1·sn[j],
// x0·sn[j] + x1·cs[j]), in float64, rounded to float32; two pairs at a
// time, the odd lane's sum as t2 + t1 and the even lane's difference as
// t1 − t2, the order the portable loop computes them in.
TEXT ·ropeAVX2(SB), NOSPLIT, $0-40
	MOVQ row+0(FP), SI
	MOVQ heads+8(FP), CX
	MOVQ dh+16(FP), DX
	MOVQ cs+24(FP), R9
	MOVQ sn+32(FP), R10

rhead:
	TESTQ CX, CX
	JZ   rdone
	XORQ AX, AX               // element index within the head

rpair:
	CMPQ AX, DX
	JAE  rnext
	VCVTPS2PD (SI)(AX*4), Y0  // x0a x1a x0b x1b
	MOVQ AX, R8
	SHRQ $1, R8               // pair index j
	VMOVUPD (R9)(R8*8), X1
	VPERMPD $0x50, Y1, Y1     // cs[j] cs[j] cs[j+1] cs[j+1]
	VMOVUPD (R10)(R8*8), X2
	VPERMPD $0x50, Y2, Y2     // sn
	VPERMILPD $0x5, Y0, Y3    // x1a x0a x1b x0b
	VMULPD Y1, Y0, Y4         // t1 = x·cs
	VMULPD Y2, Y3, Y5         // t2 = swapped x·sn
	VADDSUBPD Y5, Y4, Y4      // t1 − t2, t1 + t2, …
	VCVTPD2PSY Y4, X4
	VMOVUPS X4, (SI)(AX*4)
	ADDQ $4, AX
	JMP  rpair

rnext:
	LEAQ (SI)(DX*4), SI
	DECQ CX
	JMP  rhead

rdone:
	VZEROUPPER
	RET
