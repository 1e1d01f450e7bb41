package kernels

//go:noescape
func addSquaresAVX2(s *float64, x *float32, n int, b float32)

//go:noescape
func scaleSiLUAVX2(o, x *float32, n int, b float32, s *float64, gain float64, k *vecConsts, tbl *[64]float64) int

// addSquaresVector does AddSquares for the leading multiple of four of x
// and returns how many it did. s is at least as long as x.
func addSquaresVector(s []float64, x []float32, b float32) int {
	n := len(x) &^ 3
	if !hasAVX2 || n == 0 {
		return 0
	}
	_ = s[n-1]
	addSquaresAVX2(&s[0], &x[0], n, b)
	return n
}

// scaleSiLUVector does ScaleSiLU (with SiLU) for the leading multiple of
// four of x, four at a time, handing the groups of four whose exponent −f
// is outside [-708, 709] or a NaN to scaleSiLUGo, and returns how many it
// did. o and s are at least as long as x.
func scaleSiLUVector(o, x []float32, b float32, s []float64, g float64) int {
	done := 0
	for hasAVX2 && len(x) >= 4 {
		n := len(x) &^ 3
		_, _ = o[n-1], s[n-1]
		k := scaleSiLUAVX2(&o[0], &x[0], n, b, &s[0], g, &vk, &exp2Frac)
		o, x, s, done = o[k:], x[k:], s[k:], done+k
		if len(x) < 4 {
			break
		}
		scaleSiLUGo(o[:4], x[:4], b, s[:4], g)
		o, x, s, done = o[4:], x[4:], s[4:], done+4
	}
	return done
}
