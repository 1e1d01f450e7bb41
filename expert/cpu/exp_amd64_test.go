package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestExpVectorMatchesGo holds the AVX2 kernel to expGo bit for bit: on
// random values across the range, and with a value it must leave to
// math.Exp (NaN, ±Inf, beyond −708 or 709) at every position of slices of
// every length up to 13, so the hand-over of a group and of the tail are
// both exercised.
func TestExpVectorMatchesGo(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 on this CPU: expInPlace is expGo")
	}
	r := rand.New(rand.NewPCG(7, 8))
	check := func(xs []float64) {
		t.Helper()
		got, want := slices.Clone(xs), slices.Clone(xs)
		expInPlace(got)
		expGo(want)
		for i := range xs {
			if math.Float64bits(got[i]) != math.Float64bits(want[i]) && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) {
				t.Fatalf("exp(%v) at %d of %d: vector %v (%#x), portable %v (%#x)",
					xs[i], i, len(xs), got[i], math.Float64bits(got[i]), want[i], math.Float64bits(want[i]))
			}
		}
	}
	xs := make([]float64, 1<<16)
	for i := range xs {
		xs[i] = (r.Float64()*2 - 1) * 708
	}
	check(xs)
	for i := range xs {
		xs[i] = -r.ExpFloat64() * 3 // softmax's range
	}
	check(xs)
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -708.5, -745.1, 709.5, 1e300} {
		for n := 1; n <= 13; n++ {
			for at := range n {
				v := make([]float64, n)
				for i := range v {
					v[i] = r.NormFloat64() * 5
				}
				v[at] = bad
				check(v)
			}
		}
	}
}

// BenchmarkExp compares the AVX2 kernel with expGo on 64-value blocks of
// softmax's range, the block length softmaxRows and geluInPlace use.
func BenchmarkExp(b *testing.B) {
	r := rand.New(rand.NewPCG(9, 10))
	src := make([]float64, blockLen)
	for i := range src {
		src[i] = -r.ExpFloat64() * 3
	}
	u := make([]float64, blockLen)
	for _, k := range []struct {
		name string
		f    func([]float64)
	}{{"portable", expGo}, {"inplace", expInPlace}} {
		b.Run(k.name, func(b *testing.B) {
			for b.Loop() {
				copy(u, src)
				k.f(u)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*blockLen), "ns/value")
		})
	}
}
