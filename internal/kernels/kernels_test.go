package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// ulp32 is the spacing of float32 values at v.
func ulp32(v float32) float64 {
	a := math.Abs(float64(v))
	if a < math.SmallestNonzeroFloat32 {
		return math.SmallestNonzeroFloat32
	}
	f := float32(a)
	return float64(math.Nextafter32(f, float32(math.Inf(1))) - f)
}

// TestExpAccuracy holds Exp to math.Exp: within 3 float64 ulp over
// the whole range where it computes itself, and equal to it (NaN included)
// outside that range.
func TestExpAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var xs []float64
	for i := -708000; i <= 709000; i += 7 {
		xs = append(xs, float64(i)/1000)
	}
	for range 200000 {
		xs = append(xs, r.NormFloat64()*10, r.Float64()*1e-6, -r.Float64()*1e-300)
	}
	xs = append(xs, 0, math.Copysign(0, -1), -708, 709, math.Ln2/128, -math.Ln2/128, 0.5*math.Ln2, 100*math.Ln2)
	edges := []float64{-1e300, -745.2, -745, -709, -708.0000001, 709.0000001, 709.7, 710, 1e300,
		math.Inf(1), math.Inf(-1), math.NaN()}
	xs = append(xs, edges...)
	got := slices.Clone(xs)
	Exp(got)
	worst, at := 0.0, 0.0
	for i, x := range xs {
		want := math.Exp(x)
		switch {
		case math.IsNaN(want):
			if !math.IsNaN(got[i]) {
				t.Errorf("exp(%v) = %v, want NaN", x, got[i])
			}
		case !(x >= -708 && x <= 709):
			if got[i] != want {
				t.Errorf("exp(%v) = %v, want math.Exp's %v outside [-708, 709]", x, got[i], want)
			}
		default:
			if rel := math.Abs(got[i]-want) / want; rel > worst {
				worst, at = rel, x
			}
		}
	}
	t.Logf("largest relative difference to math.Exp %.3g at x = %v", worst, at)
	if worst > 6e-16 {
		t.Errorf("exp differs from math.Exp by %.3g (relative) at x = %v, want at most 6e-16", worst, at)
	}
}

// TestGeluMatchesTanhForm compares GELU with the tanh form of the
// specification (§3.3) evaluated in float64 with math.Tanh: within one
// float32 ulp where that form has no cancellation worth a float32 ulp
// (x >= -5), and a tiny non-positive value below. Special values follow
// the tanh form: gelu(+Inf) = +Inf, gelu(-Inf) = NaN, gelu(NaN) = NaN.
func TestGeluMatchesTanhForm(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	var xs []float32
	for i := -20000; i <= 20000; i++ {
		xs = append(xs, float32(i)/1000)
	}
	for range 100000 {
		xs = append(xs, float32(r.NormFloat64()*3), float32(r.NormFloat64()*1e-4), float32(r.NormFloat64()*100))
	}
	xs = append(xs, 0, float32(math.Copysign(0, -1)), math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32)
	got := slices.Clone(xs)
	GELU(got)
	const c = 0.7978845608028654
	for i, v := range xs {
		u := float64(v)
		want := float32(0.5 * u * (1 + math.Tanh(c*(u+0.044715*u*u*u))))
		if v >= -5 {
			if d := math.Abs(float64(got[i] - want)); d > ulp32(want) {
				t.Fatalf("gelu(%v) = %v, tanh form %v: %.3g apart, more than one float32 ulp", v, got[i], want, d)
			}
		} else if !(got[i] <= 0 && float64(got[i]) >= 1e-6*u) {
			t.Fatalf("gelu(%v) = %v, want a non-positive value of magnitude below 1e-6·|x|", v, got[i])
		}
	}
	special := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	GELU(special)
	if !math.IsInf(float64(special[0]), 1) || !math.IsNaN(float64(special[1])) || !math.IsNaN(float64(special[2])) {
		t.Errorf("gelu(+Inf, -Inf, NaN) = %v, want [+Inf NaN NaN]", special)
	}
}

// TestSoftmaxRows compares SoftmaxRows with softmax written directly in
// float64 with math.Exp, within four float32 ulp, on rows with a wide and
// a narrow spread, -Inf entries (masked keys, weight 0), rows longer than
// one conversion block, and a NaN (which makes its row NaN, only its row).
func TestSoftmaxRows(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const rows, ld = 6, 3*blockLen + 5
	m := make([]float32, rows*ld)
	for i := range m {
		m[i] = float32(r.NormFloat64() * []float64{1, 30, 1e-3, 5, 5, 2}[i/ld])
	}
	m[3*ld+7], m[3*ld+100] = float32(math.Inf(-1)), float32(math.Inf(-1))
	m[5*ld+9] = float32(math.NaN())
	in := slices.Clone(m)
	SoftmaxRows(m, rows, ld)
	for rw := range rows {
		row, got := in[rw*ld:(rw+1)*ld], m[rw*ld:(rw+1)*ld]
		if rw == 5 {
			for i, v := range got {
				if !math.IsNaN(float64(v)) {
					t.Fatalf("row with a NaN: weight %d is %v, want NaN", i, v)
				}
			}
			continue
		}
		// x − max is a float32 subtraction, as in PyTorch's float32
		// softmax; the rest is float64.
		mx := float32(math.Inf(-1))
		for _, v := range row {
			mx = max(mx, v)
		}
		var s float64
		for _, v := range row {
			s += math.Exp(float64(v - mx))
		}
		for i, v := range row {
			want := float32(math.Exp(float64(v-mx)) / s)
			// Four ulp: the float32 v − max and the two float32
			// roundings of the weight (e, then e·(1/s)).
			if d := math.Abs(float64(got[i] - want)); d > 4*ulp32(want) {
				t.Fatalf("row %d weight %d: %v, want %v (%.3g apart)", rw, i, got[i], want, d)
			}
		}
	}
	if m[3*ld+7] != 0 || m[3*ld+100] != 0 {
		t.Errorf("a -Inf score got weight %v, %v, want 0", m[3*ld+7], m[3*ld+100])
	}
}
