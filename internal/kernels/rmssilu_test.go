package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// rmsSiLUInputs makes n values of x, of the per-pixel factors s and a
// bias: the ranges of the VAE's RMSc (factors near 1/rms, values of a
// few units), with a few large enough to take SiLU's exponent beyond −708.
func rmsSiLUInputs(r *rand.Rand, n int) (x []float32, s []float64) {
	x, s = make([]float32, n), make([]float64, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 3)
		s[i] = 0.2 + r.Float64()
	}
	return x, s
}

// TestAddSquaresVectorMatchesGo holds AddSquares to addSquaresGo bit for
// bit on every length 0..40 at every offset 0..3 (the tails and the
// unaligned starts of the vector loop).
func TestAddSquaresVectorMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 26))
	for n := range 41 {
		for off := range 4 {
			x, s0 := rmsSiLUInputs(r, n+off)
			x, s0 = x[off:], s0[off:]
			b := float32(r.NormFloat64())
			got, want := append([]float64(nil), s0...), append([]float64(nil), s0...)
			AddSquares(got, x, b)
			addSquaresGo(want, x, b)
			for i := range want {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
					t.Fatalf("n %d offset %d: element %d (x %v, b %v): AddSquares %v, portable %v", n, off, i, x[i], b, got[i], want[i])
				}
				f := float64(x[i] + b)
				if d := got[i] - s0[i] - f*f; math.Abs(d) > 1e-12*(s0[i]+f*f) {
					t.Fatalf("n %d offset %d: element %d: added %v, want (x+b)² = %v", n, off, i, got[i]-s0[i], f*f)
				}
			}
		}
	}
}

// TestScaleSiLUVectorMatchesGo holds ScaleSiLU to scaleSiLUGo bit
// for bit on every length 0..40 at every offset 0..3, with and without
// values SiLU's vector exponential must hand to math.Exp (|f| > 708,
// infinities, NaN) at every position, and checks it against
// f/(1 + math.Exp(−f)) within 1 float32 ulp.
func TestScaleSiLUVectorMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 26))
	special := []float32{0, 800, -800, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for n := range 41 {
		for off := range 4 {
			for sp := range special {
				for _, at := range []int{-1, 0, n / 2, n - 1} {
					if at >= n || (sp > 0 && at < 0) || (sp == 0 && at >= 0) {
						continue
					}
					x, s := rmsSiLUInputs(r, n+off)
					x, s = x[off:], s[off:]
					if at >= 0 {
						x[at] = special[sp]
						s[at] = 1
					}
					b, g := float32(r.NormFloat64()*0.1), 1+0.2*r.NormFloat64()
					got, want := make([]float32, n), make([]float32, n)
					ScaleSiLU(got, x, b, s, g, true)
					scaleSiLUGo(want, x, b, s, g)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
							t.Fatalf("n %d offset %d: element %d (x %v): ScaleSiLU %v (%#x), portable %v (%#x)", n, off, i, x[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
					for i, v := range x {
						f := float64(v+b) * s[i] * g
						ref := f / (1 + math.Exp(-f))
						if math.IsInf(f, -1) {
							ref = math.Copysign(0, -1) // −∞/∞ is NaN; SiLU's limit is −0
						}
						if i == at && (math.IsInf(f, 0) || math.IsNaN(f)) {
							continue // the portable and vector paths agree (above); the limit is not the point
						}
						if d := math.Abs(float64(got[i]) - ref); d > ulp32(float32(ref)) {
							t.Fatalf("n %d offset %d: element %d (x %v): ScaleSiLU %v, f/(1+e^−f) = %v", n, off, i, v, got[i], ref)
						}
					}
				}
			}
		}
	}
}

// TestScaleWithoutSiLU checks ScaleSiLU with silu false: float32(f).
func TestScaleWithoutSiLU(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 26))
	x, s := rmsSiLUInputs(r, 37)
	got := make([]float32, len(x))
	ScaleSiLU(got, x, 0.5, s, 1.25, false)
	for i, v := range x {
		if want := float32(float64(v+0.5) * s[i] * 1.25); got[i] != want {
			t.Fatalf("element %d: %v, want %v", i, got[i], want)
		}
	}
}
