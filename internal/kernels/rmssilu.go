package kernels

import "math"

// The two passes of the VAE's channel RMS normalisation with SiLU
// (world-model.md §4.1): AddSquares accumulates each pixel's sum of squares
// over the channels in float64, ScaleSiLU writes one channel's row
// normalised, scaled and through SiLU in float32. On AVX2 CPUs they run
// four and eight values at a time (rmssilu_amd64.s) with the portable
// loops' operations in the same order: the same bits.

// AddSquares adds float64(x[i]+b)², the sum x[i]+b in float32, to s[i] for
// every i < len(x). s must be at least as long as x.
func AddSquares(s []float64, x []float32, b float32) {
	s = s[:len(x)]
	k := addSquaresVector(s, x, b)
	addSquaresGo(s[k:], x[k:], b)
}

// addSquaresGo is AddSquares one value at a time. The conversion keeps
// the square rounded before the sum (no fused multiply-add on arm64), as
// the vector kernel does.
func addSquaresGo(s []float64, x []float32, b float32) {
	s = s[:len(x)]
	for i, v := range x {
		f := float64(v + b)
		s[i] += float64(f * f)
	}
}

// ScaleSiLU writes o[i] = f/(1+e^−f) (SiLU) with f = (x[i]+b)·s[i]·g, all
// in float32, for every i < len(x); when silu is false it writes f. The
// exponential is expf32's: within 2 float32 ulp of e^−f for −f in
// [−87, 88], math.Exp's beyond. o and s must be at least as long as x.
func ScaleSiLU(o, x []float32, b float32, s []float32, g float32, silu bool) {
	o, s = o[:len(x)], s[:len(x)]
	if !silu {
		for i, v := range x {
			o[i] = float32((v+b)*s[i]) * g
		}
		return
	}
	k := scaleSiLUVector(o, x, b, s, g)
	scaleSiLUGo(o[k:], x[k:], b, s[k:], g)
}

// scaleSiLUGo is ScaleSiLU (with SiLU) one value at a time. The explicit
// conversions keep every product rounded before its sum (no fused
// multiply-add, which the compiler may otherwise emit on arm64), as the
// vector kernel does.
func scaleSiLUGo(o, x []float32, b float32, s []float32, g float32) {
	o, s = o[:len(x)], s[:len(x)]
	for i, v := range x {
		f := float32((v+b)*s[i]) * g
		o[i] = f / (1 + expf32(-f))
	}
}

// The constants of expf32 (and of its vector kernel): Cephes' expf.
const (
	expfMin    float32 = -87 // expf32's polynomial range; math.Exp outside
	expfMax    float32 = 88
	expfLog2e  float32 = 1.44269504088896341
	expfRound  float32 = 0x1.8p23 // adding and subtracting it rounds to an integer (|v| < 2^22)
	expfLn2Hi  float32 = 0.693359375
	expfLn2Lo  float32 = -2.12194440e-4
	expfP0     float32 = 1.9875691500e-4
	expfP1     float32 = 1.3981999507e-3
	expfP2     float32 = 8.3334519073e-3
	expfP3     float32 = 4.1665795894e-2
	expfP4     float32 = 1.6666665459e-1
	expfP5     float32 = 5.0000001201e-1
	expfRoundB         = 0x4b400000 // the bits of expfRound
)

// expf32 is e^y in float32: for y in [−87, 88], y = n·ln2 + r with
// |r| <= ln2/2 and e^y = 2^n·p(r), p Cephes' degree-7 polynomial
// (1 + r + r²·(degree 5)), each operation rounded to float32 in order;
// outside, and for NaN, float32(math.Exp(y)).
func expf32(y float32) float32 {
	if !(y >= expfMin && y <= expfMax) {
		return float32(math.Exp(float64(y)))
	}
	t := float32(y*expfLog2e) + expfRound
	n := t - expfRound
	r := y - float32(n*expfLn2Hi)
	r -= float32(n * expfLn2Lo)
	z := r * r
	p := float32(expfP0*r) + expfP1
	p = float32(p*r) + expfP2
	p = float32(p*r) + expfP3
	p = float32(p*r) + expfP4
	p = float32(p*r) + expfP5
	p = float32(p*z) + r
	p++
	pow := math.Float32frombits((math.Float32bits(t) - expfRoundB + 127) << 23)
	return p * pow
}
