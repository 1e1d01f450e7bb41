package kernels

import "golang.org/x/sys/cpu"

// splat is one constant repeated over the four lanes of a vector register.
type splat [4]float64

// splatInt is one integer constant over four lanes.
type splatInt [4]int64

// vecConsts are the constants of the kernels in kernels_amd64.s, in the
// order of the offsets that file defines; the float64 ones are the values
// the portable loops use (Go rounds each constant expression once).
type vecConsts struct {
	log2e64, round52, ln2Hi64, ln2Lo64 splat
	c120, c24, c6, c2, one             splat
	lo, hi                             splat // the range exp computes without math.Exp
	mask, bias                         splatInt
	geluA, geluC                       splat
}

func splatOf(v float64) splat     { return splat{v, v, v, v} }
func splatIntOf(v int64) splatInt { return splatInt{v, v, v, v} }

// vk holds the kernels' constants. It is set once and only read.
var vk = vecConsts{
	log2e64: splatOf(64 * expLog2e), round52: splatOf(expRound52),
	ln2Hi64: splatOf(expLn2Hi / 64), ln2Lo64: splatOf(expLn2Lo / 64),
	c120: splatOf(1.0 / 120), c24: splatOf(1.0 / 24), c6: splatOf(1.0 / 6), c2: splatOf(1.0 / 2), one: splatOf(1),
	lo: splatOf(-708), hi: splatOf(709),
	mask: splatIntOf(63), bias: splatIntOf(1023 * 64),
	geluA: splatOf(geluCubic), geluC: splatOf(geluScale),
}

// hasAVX2 reports whether the vector kernels may run; fixed at start-up,
// only read.
var hasAVX2 = cpu.X86.HasAVX2

// The kernels of kernels_amd64.s; each comment there says what it does.

//go:noescape
func expAVX2(u *float64, n int, k *vecConsts, tbl *[64]float64) int

//go:noescape
func softmaxExpAVX2(row *float32, n int, mx float32, s *float64, k *vecConsts, tbl *[64]float64) int

//go:noescape
func geluAVX2(x *float32, n int, k *vecConsts, tbl *[64]float64) int

//go:noescape
func laneSumsAVX2(x *float32, n int, mu float64, out *[4]float64, square bool)

//go:noescape
func normAffineAVX2(o, x *float32, n int, mu, inv float64, a, c *float32, addOne bool)

//go:noescape
func mulScaleAVX2(x *float32, n int, s float32, gain *float32)

// expVector computes e^x in place for the leading values of u four at a
// time, hands the groups of four that hold a value outside [-708, 709] or
// a NaN to expGo, and returns the tail (fewer than four values) it left.
func expVector(u []float64) []float64 {
	for hasAVX2 && len(u) >= 4 {
		n := expAVX2(&u[0], len(u)&^3, &vk, &exp2Frac)
		u = u[n:]
		if len(u) < 4 {
			break
		}
		expGo(u[:4])
		u = u[4:]
	}
	return u
}

// softmaxExpVector does SoftmaxRows' exponentials for the leading values of
// row (e = exp(float64(v−mx)) into row, added to *s in order) and returns
// how many it did: up to the first group of four that needs math.Exp.
func softmaxExpVector(row []float32, mx float32, s *float64) int {
	if !hasAVX2 || len(row) < 4 {
		return 0
	}
	return softmaxExpAVX2(&row[0], len(row)&^3, mx, s, &vk, &exp2Frac)
}

// geluVector applies GELU to the leading values of x, hands the groups of
// four whose exponent needs math.Exp to geluGo, and returns the tail
// (fewer than four values) it left.
func geluVector(x []float32) []float32 {
	for hasAVX2 && len(x) >= 4 {
		n := geluAVX2(&x[0], len(x)&^3, &vk, &exp2Frac)
		x = x[n:]
		if len(x) < 4 {
			break
		}
		geluGo(x[:4])
		x = x[4:]
	}
	return x
}

// laneSumsVector adds float64(x[i])−mu (or its square) into lane i%4 of
// out for the leading multiple of four of x, and returns how many it took.
func laneSumsVector(x []float32, mu float64, out *[4]float64, square bool) int {
	n := len(x) &^ 3
	if !hasAVX2 || n == 0 {
		return 0
	}
	laneSumsAVX2(&x[0], n, mu, out, square)
	return n
}

// normAffineVector writes o[i] = float32((float64(x[i])−mu)·inv)·a'[i] +
// c[i] (a' = 1+a[i] when addOne) for the leading multiple of four of x,
// and returns how many it wrote. o, a and c are at least as long as x.
func normAffineVector(o, x []float32, mu, inv float64, a, c []float32, addOne bool) int {
	n := len(x) &^ 3
	if !hasAVX2 || n == 0 {
		return 0
	}
	_, _, _ = o[n-1], a[n-1], c[n-1]
	normAffineAVX2(&o[0], &x[0], n, mu, inv, &a[0], &c[0], addOne)
	return n
}

// mulScaleVector sets x[i] = x[i]·s·g[i] for the leading multiple of four
// of x and returns how many it did. g is at least as long as x.
func mulScaleVector(x []float32, s float32, g []float32) int {
	n := len(x) &^ 3
	if !hasAVX2 || n == 0 {
		return 0
	}
	_ = g[n-1]
	mulScaleAVX2(&x[0], n, s, &g[0])
	return n
}

//go:noescape
func ropeAVX2(row *float32, heads, dh int, cs, sn *float64)

// ropeVector rotates the heads dh-wide blocks of row by the position's
// tables cs and sn (dh/2 each) and reports whether it did: only when the
// CPU has AVX2 and dh is a multiple of 4.
func ropeVector(row []float32, heads, dh int, cs, sn []float64) bool {
	if !hasAVX2 || dh%4 != 0 || heads <= 0 {
		return false
	}
	_, _, _ = row[heads*dh-1], cs[dh/2-1], sn[dh/2-1]
	ropeAVX2(&row[0], heads, dh, &cs[0], &sn[0])
	return true
}
