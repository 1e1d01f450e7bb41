#include "textflag.h"

// func expAVX2(u *float64, n int, k *expConsts, tbl *[64]float64) int
//
// Replaces u[i] by e^u[i] for i < n (n a multiple of 4), four at a time,
// with exactly the operations of expInPlace's loop (no fused multiply-add,
// so every result is bit for bit the portable one). It stops before the
// first group of four holding a value outside [-708, 709] or a NaN, which
// the caller computes with math.Exp, and returns how many it replaced.
TEXT ·expAVX2(SB), NOSPLIT, $0-40
	MOVQ u+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ k+16(FP), BX
	MOVQ tbl+24(FP), DX
	XORQ AX, AX
	VBROADCASTSD 0(BX), Y12   // 64·log2(e)
	VBROADCASTSD 8(BX), Y13   // 1.5·2^52
	VBROADCASTSD 16(BX), Y14  // ln2Hi/64
	VBROADCASTSD 24(BX), Y15  // ln2Lo/64

loop:
	CMPQ AX, CX
	JAE  done
	VMOVUPD (SI)(AX*8), Y0            // x
	VBROADCASTSD 80(BX), Y1
	VCMPPD $0x1d, Y1, Y0, Y1          // x >= -708 (false for NaN)
	VBROADCASTSD 88(BX), Y2
	VCMPPD $0x12, Y2, Y0, Y2          // x <= 709
	VANDPD Y2, Y1, Y1
	VMOVMSKPD Y1, DI
	CMPL DI, $15
	JNE  done

	VMULPD Y12, Y0, Y3                // x·64log2e
	VADDPD Y13, Y3, Y3                // t = x·64log2e + round52
	VSUBPD Y13, Y3, Y4                // k = t − round52
	VMULPD Y14, Y4, Y5
	VSUBPD Y5, Y0, Y5                 // x − k·ln2Hi/64
	VMULPD Y15, Y4, Y6
	VSUBPD Y6, Y5, Y5                 // r = … − k·ln2Lo/64

	VBROADCASTSD 32(BX), Y6           // 1/120
	VMULPD Y6, Y5, Y6
	VBROADCASTSD 40(BX), Y7           // 1/24
	VADDPD Y7, Y6, Y6
	VMULPD Y6, Y5, Y6
	VBROADCASTSD 48(BX), Y7           // 1/6
	VADDPD Y7, Y6, Y6
	VMULPD Y6, Y5, Y6
	VBROADCASTSD 56(BX), Y7           // 1/2
	VADDPD Y7, Y6, Y6
	VMULPD Y6, Y5, Y6
	VBROADCASTSD 64(BX), Y7           // 1
	VADDPD Y7, Y6, Y6
	VMULPD Y6, Y5, Y6
	VADDPD Y7, Y6, Y6                 // p

	VPSUBQ Y13, Y3, Y8                // k as int64 (bits of t minus bits of round52)
	VPBROADCASTQ 96(BX), Y9           // 63
	VPAND  Y9, Y8, Y9                 // k & 63
	VPCMPEQQ Y10, Y10, Y10            // gather mask: all lanes
	VGATHERQPD Y10, (DX)(Y9*8), Y11   // 2^((k&63)/64)
	VPBROADCASTQ 104(BX), Y10         // 1023·64
	VPADDQ Y10, Y8, Y8
	VPSRLQ $6, Y8, Y8                 // (k>>6) + 1023, k >= -65472 here
	VPSLLQ $52, Y8, Y8                // 2^(k>>6)
	VMULPD Y11, Y6, Y6
	VMULPD Y8, Y6, Y6
	VMOVUPD Y6, (SI)(AX*8)
	ADDQ $4, AX
	JMP  loop

done:
	VZEROUPPER
	MOVQ AX, ret+32(FP)
	RET
