package kernels

// The two passes of the VAE's channel RMS normalisation with SiLU
// (world-model.md §4.1): AddSquares accumulates each pixel's sum of squares
// over the channels, ScaleSiLU writes one channel's row normalised, scaled
// and through SiLU. Both compute in float64, as the encoder's goldens were
// made, and on AVX2 CPUs run four values at a time (rmssilu_amd64.s) with
// the portable loops' operations in the same order: the same bits.

// AddSquares adds float64(x[i]+b)², the sum x[i]+b in float32, to s[i] for
// every i < len(x). s must be at least as long as x.
func AddSquares(s []float64, x []float32, b float32) {
	s = s[:len(x)]
	k := addSquaresVector(s, x, b)
	addSquaresGo(s[k:], x[k:], b)
}

// addSquaresGo is AddSquares one value at a time.
func addSquaresGo(s []float64, x []float32, b float32) {
	s = s[:len(x)]
	for i, v := range x {
		f := float64(v + b)
		s[i] += f * f
	}
}

// ScaleSiLU writes o[i] = float32(f/(1+e^−f)) (SiLU) with
// f = float64(x[i]+b)·s[i]·g, the sum x[i]+b in float32 and the products
// in that order, for every i < len(x); when silu is false it writes
// float32(f). The exponential is Exp's. o and s must be at least as long
// as x.
func ScaleSiLU(o, x []float32, b float32, s []float64, g float64, silu bool) {
	o, s = o[:len(x)], s[:len(x)]
	if !silu {
		scaleGo(o, x, b, s, g)
		return
	}
	k := scaleSiLUVector(o, x, b, s, g)
	scaleSiLUGo(o[k:], x[k:], b, s[k:], g)
}

// scaleGo is ScaleSiLU without SiLU.
func scaleGo(o, x []float32, b float32, s []float64, g float64) {
	o, s = o[:len(x)], s[:len(x)]
	for i, v := range x {
		o[i] = float32(float64(v+b) * s[i] * g)
	}
}

// scaleSiLUGo is ScaleSiLU (with SiLU) without vector kernels: the
// exponentials go in blocks through Exp.
func scaleSiLUGo(o, x []float32, b float32, s []float64, g float64) {
	o, s = o[:len(x)], s[:len(x)]
	var f, e [blockLen]float64
	for lo := 0; lo < len(x); lo += blockLen {
		hi := min(lo+blockLen, len(x))
		xb, ob, sb := x[lo:hi], o[lo:hi], s[lo:hi]
		fb, eb := f[:len(xb)], e[:len(xb)]
		for i, v := range xb {
			fb[i] = float64(v+b) * sb[i] * g
			eb[i] = -fb[i]
		}
		Exp(eb)
		for i, v := range fb {
			ob[i] = float32(v / (1 + eb[i]))
		}
	}
}
