package cpu

import "golang.org/x/sys/cpu"

// expConsts are the constants of expInPlace's loop, laid out as
// exp_amd64.s reads them (byte offsets in the comments).
type expConsts struct {
	log2e64, round52, ln2Hi64, ln2Lo64 float64 // 0, 8, 16, 24
	c120, c24, c6, c2, one, _          float64 // 32 … 72: the polynomial's coefficients
	lo, hi                             float64 // 80, 88: the range computed without math.Exp
	mask, bias                         int64   // 96, 104: 63 and 1023·64
}

// expK holds the constants expGo's loop uses, as the same float64 values
// (Go rounds each constant expression once). Only read.
var expK = expConsts{
	log2e64: 64 * expLog2e,
	round52: expRound52,
	ln2Hi64: expLn2Hi / 64,
	ln2Lo64: expLn2Lo / 64,
	c120:    1.0 / 120, c24: 1.0 / 24, c6: 1.0 / 6, c2: 1.0 / 2, one: 1,
	lo: -708, hi: 709,
	mask: 63, bias: 1023 * 64,
}

// hasAVX2 reports whether expVector may use the AVX2 kernel; fixed at
// start-up, only read.
var hasAVX2 = cpu.X86.HasAVX2

// expAVX2 is in exp_amd64.s.
//
//go:noescape
func expAVX2(u *float64, n int, k *expConsts, tbl *[64]float64) int

// expVector computes e^x in place for the leading values of u four at a
// time with AVX2, hands the groups of four that hold a value outside
// [-708, 709] or a NaN to expGo, and returns the tail (fewer than four
// values) it left.
func expVector(u []float64) []float64 {
	for hasAVX2 && len(u) >= 4 {
		n := expAVX2(&u[0], len(u)&^3, &expK, &exp2Frac)
		u = u[n:]
		if len(u) < 4 {
			break
		}
		expGo(u[:4])
		u = u[4:]
	}
	return u
}
