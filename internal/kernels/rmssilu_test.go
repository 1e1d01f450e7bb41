package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// rmsSiLUInputs makes n values of x and of the per-pixel factors s: the
// ranges of the VAE's RMSc (factors near 1, values of a few units).
func rmsSiLUInputs(r *rand.Rand, n int) (x []float32, s []float32) {
	x, s = make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * 3)
		s[i] = float32(0.2 + r.Float64())
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
			x, s32 := rmsSiLUInputs(r, n+off)
			x = x[off:]
			s0 := make([]float64, n)
			for i := range s0 {
				s0[i] = float64(s32[off+i]) * 10
			}
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

// siluF64 is SiLU of f = (x+b)·s·g in float64 throughout (math.Exp),
// rounded once: the reference ScaleSiLU is held to.
func siluF64(o, x []float32, b float32, s []float32, g float32) {
	for i, v := range x {
		f := (float64(v) + float64(b)) * float64(s[i]) * float64(g)
		o[i] = float32(f / (1 + math.Exp(-f)))
	}
}

// TestExpf32Accuracy holds expf32 within 2 float32 ulp of math.Exp over its
// polynomial's range [−87, 88] (every 1/4096 and random values), and to
// float32(math.Exp) outside it.
func TestExpf32Accuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(10, 26))
	worst := 0.0
	check := func(y float32) {
		got, want := expf32(y), math.Exp(float64(y))
		if y < expfMin || y > expfMax {
			if got != float32(want) {
				t.Fatalf("expf32(%v) = %v outside its range, want float32(math.Exp) = %v", y, got, float32(want))
			}
			return
		}
		d := math.Abs(float64(got)-want) / float64(ulp32(float32(want)))
		worst = max(worst, d)
		if d > 2 {
			t.Fatalf("expf32(%v) = %v, math.Exp %v: %.2f float32 ulp apart, want at most 2", y, got, want, d)
		}
	}
	for y := float32(-88); y <= 89; y += 1.0 / 4096 {
		check(y)
	}
	for range 1 << 16 {
		check(float32(r.Float64()*176 - 88))
	}
	for _, y := range []float32{0, float32(math.Copysign(0, -1)), expfMin, expfMax, -103, 89, 200, -200} {
		check(y)
	}
	if v := expf32(float32(math.NaN())); v == v {
		t.Fatalf("expf32(NaN) = %v, want NaN", v)
	}
	t.Logf("worst error %.2f float32 ulp", worst)
}

// TestScaleSiLUVectorMatchesGo holds ScaleSiLU to scaleSiLUGo bit for bit
// on every length 0..40 at every offset 0..3 (the vector loop's tails and
// unaligned starts), with and without a value the vector kernel must hand
// back (|f| beyond its range, infinities, NaN) at the start, middle or end,
// and to the float64 SiLU within 4 + 2|f| float32 ulp (f's roundings
// grown by SiLU's condition number; or 1e-37 for results that underflow).
func TestScaleSiLUVectorMatchesGo(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 26))
	special := []float32{0, 87.5, 95, -95, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	worst := 0.0
	for n := range 41 {
		for off := range 4 {
			for sp := range special {
				for _, at := range []int{-1, 0, n / 2, n - 1} {
					if at >= n || (sp > 0 && at < 0) || (sp == 0 && at >= 0) {
						continue
					}
					x, s := rmsSiLUInputs(r, n+off)
					x, s = x[off:], s[off:]
					b, g := float32(r.NormFloat64()*0.1), float32(1+0.2*r.NormFloat64())
					if at >= 0 {
						x[at], s[at], g = special[sp], 1, 1
						b = 0
					}
					got, want, ref := make([]float32, n), make([]float32, n), make([]float32, n)
					ScaleSiLU(got, x, b, s, g, true)
					scaleSiLUGo(want, x, b, s, g)
					siluF64(ref, x, b, s, g)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
							t.Fatalf("n %d offset %d: element %d (x %v): ScaleSiLU %v (%#x), portable %v (%#x)", n, off, i, x[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
						if i == at && special[sp] != 87.5 && special[sp] != 95 && special[sp] != -95 {
							continue // infinities and NaN: the two paths agree (above), the limits are not the point
						}
						// f's three float32 roundings (1.5 ulp) grow by SiLU's
						// condition number, about 1 + |f| where f < 0.
						f := math.Abs(float64(x[i]+b) * float64(s[i]) * float64(g))
						d := math.Abs(float64(got[i])-float64(ref[i])) / ulp32(ref[i])
						if d > 4+2*f && math.Abs(float64(got[i]-ref[i])) > 1e-37 {
							t.Fatalf("n %d offset %d: element %d (x %v, f %v): ScaleSiLU %v, float64 SiLU %v: %.1f ulp apart, want at most 4 + 2|f|", n, off, i, x[i], f, got[i], ref[i], d)
						}
						if math.Abs(float64(got[i]-ref[i])) > 1e-37 {
							worst = max(worst, d/(4+2*f))
						}
					}
				}
			}
		}
	}
	t.Logf("worst error against the float64 SiLU: %.2f of the bound 4 + 2|f| ulp", worst)
}

// TestScaleWithoutSiLU checks ScaleSiLU with silu false: (x+b)·s·g.
func TestScaleWithoutSiLU(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 26))
	x, s := rmsSiLUInputs(r, 37)
	got := make([]float32, len(x))
	ScaleSiLU(got, x, 0.5, s, 1.25, false)
	for i, v := range x {
		if want := (v + 0.5) * s[i] * 1.25; got[i] != want {
			t.Fatalf("element %d: %v, want %v", i, got[i], want)
		}
	}
}

// BenchmarkScaleSiLU is ScaleSiLU on one VAE row (224 values) against
// the float64 row the encoder computed before it (siluRowF64), in the same
// run: "x-baseline" is that row's best time over ScaleSiLU's.
// BenchmarkScaleSiLUPortable is the same against scaleSiLUGo.
func BenchmarkScaleSiLU(b *testing.B) {
	x, s := rmsSiLUInputs(rand.New(rand.NewPCG(8, 26)), 224)
	s64 := make([]float64, len(s))
	for i, v := range s {
		s64[i] = float64(v)
	}
	o := make([]float32, len(x))
	benchAgainstPortable(b, len(x),
		func() { ScaleSiLU(o, x, 0.1, s, 1.1, true) },
		func() { siluRowF64(o, x, 0.1, s64, 1.1) })
}

// siluRowF64 is the VAE encoder's RMSc + SiLU row before ScaleSiLU
// (b491b8c's rmscSiluRow): f = float64(x+b)·s·g, SiLU in float64 with
// the exponentials in blocks of 256 through Exp, rounded once.
func siluRowF64(o, x []float32, b float32, s []float64, g float64) {
	const block = 256
	var f, ex [block]float64
	for b0 := 0; b0 < len(x); b0 += block {
		r, ob := x[b0:min(b0+block, len(x))], o[b0:min(b0+block, len(x))]
		sb, fb, eb := s[b0:b0+len(r)], f[:len(r)], ex[:len(r)]
		for i, v := range r {
			fb[i] = float64(v+b) * sb[i] * g
			eb[i] = -fb[i]
		}
		Exp(eb)
		for i, v := range fb {
			ob[i] = float32(v / (1 + eb[i]))
		}
	}
}

func BenchmarkScaleSiLUPortable(b *testing.B) {
	x, s := rmsSiLUInputs(rand.New(rand.NewPCG(8, 26)), 224)
	o := make([]float32, len(x))
	benchAgainstPortable(b, len(x),
		func() { ScaleSiLU(o, x, 0.1, s, 1.1, true) },
		func() { scaleSiLUGo(o, x, 0.1, s, 1.1) })
}

// BenchmarkAddSquares is AddSquares on one VAE row against its portable
// loop, as BenchmarkScaleSiLU.
func BenchmarkAddSquares(b *testing.B) {
	x, _ := rmsSiLUInputs(rand.New(rand.NewPCG(9, 26)), 224)
	s := make([]float64, len(x))
	benchAgainstPortable(b, len(x),
		func() { AddSquares(s, x, 0.1) },
		func() { addSquaresGo(s, x, 0.1) })
}

// benchAgainstPortable times vec in b.Loop, one call of the baseline port
// before each (outside the timer, timed by itself), and reports the best
// ns per value of both and the ratio of their best times ("x-baseline").
func benchAgainstPortable(b *testing.B, n int, vec, port func()) {
	bestVec, bestPort := time.Duration(1<<62), time.Duration(1<<62)
	for b.Loop() {
		b.StopTimer()
		t0 := time.Now()
		port()
		bestPort = min(bestPort, time.Since(t0))
		b.StartTimer()
		t0 = time.Now()
		vec()
		bestVec = min(bestVec, time.Since(t0))
	}
	b.ReportMetric(float64(bestVec.Nanoseconds())/float64(n), "best-ns/value")
	b.ReportMetric(float64(bestPort.Nanoseconds())/float64(n), "baseline-best-ns/value")
	b.ReportMetric(bestPort.Seconds()/bestVec.Seconds(), "x-baseline")
}
