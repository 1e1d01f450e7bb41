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
