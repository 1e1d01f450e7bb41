package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"
)

// portable runs f with the vector kernels switched off, so a test can
// compare them with the portable loops on this CPU. Tests that call it
// must not run in parallel with others of this package.
func portable(t *testing.T, f func()) {
	t.Helper()
	if !hasAVX2 {
		t.Skip("no AVX2 on this CPU: only the portable loops run")
	}
	hasAVX2 = false
	defer func() { hasAVX2 = true }()
	f()
}

// sameBits32 fails t unless got and want hold the same float32 bits (any
// NaN matching any NaN).
func sameBits32(t *testing.T, what string, in, got, want []float32) {
	t.Helper()
	for i := range want {
		g, w := got[i], want[i]
		if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
			t.Fatalf("%s: element %d of %d (input %v): vector %v (%#x), portable %v (%#x)",
				what, i, len(want), in[i], g, math.Float32bits(g), w, math.Float32bits(w))
		}
	}
}

// TestExpVectorMatchesGo holds the AVX2 exponential to expGo bit for bit:
// on random values across the range, and with a value it must leave to
// math.Exp (NaN, ±Inf, beyond −708 or 709) at every position of slices of
// every length up to 13, so the hand-over of a group and of the tail are
// both exercised.
func TestExpVectorMatchesGo(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 on this CPU: Exp is expGo")
	}
	r := rand.New(rand.NewPCG(7, 8))
	check := func(xs []float64) {
		t.Helper()
		got, want := slices.Clone(xs), slices.Clone(xs)
		Exp(got)
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

// specials32 are the float32 values the row kernels must treat exactly as
// the portable loops do.
var specials32 = []float32{0, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
	math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 1e-40, 1e30, -1e30, 2000, -2000, 400, -400}

// kernelInputs returns rows of every length up to 70 (the vector part,
// its hand-over to the portable tail, and a tail alone) with random values
// and, in some, a special value at a random position.
func kernelInputs(r *rand.Rand, scale float64) [][]float32 {
	var rows [][]float32
	for n := 1; n <= 70; n++ {
		for rep := range 6 {
			row := make([]float32, n)
			for i := range row {
				row[i] = float32(r.NormFloat64() * scale)
			}
			if rep > 1 {
				row[r.IntN(n)] = specials32[r.IntN(len(specials32))]
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// TestRowKernelsMatchPortable holds softmax, GELU, both LayerNorms and
// RMSNorm with their vector kernels to the portable loops bit for bit, on
// rows of every length up to 70 with normal values, values large enough
// for GELU's exponent to leave the vector range, and special values.
func TestRowKernelsMatchPortable(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	kernels := []struct {
		name string
		f    func(out, x, a, c []float32)
	}{
		{"softmax", func(out, x, _, _ []float32) { copy(out, x); SoftmaxRows(out, 1, len(out)) }},
		{"gelu", func(out, x, _, _ []float32) { copy(out, x); GELU(out) }},
		{"LayerNormModulate", func(out, x, a, c []float32) { LayerNormModulate(out, x, len(x), a, c, 1e-6) }},
		{"LayerNormAffine", func(out, x, a, c []float32) { LayerNormAffine(out, x, len(x), a, c, 1e-6) }},
		{"rmsNorm", func(out, x, a, _ []float32) { copy(out, x); RMSNormRows(out, len(out), a, 1e-6) }},
	}
	for _, scale := range []float64{1, 30} {
		for _, x := range kernelInputs(r, scale) {
			a, c := make([]float32, len(x)), make([]float32, len(x))
			for i := range a {
				a[i], c[i] = float32(r.NormFloat64()*0.2), float32(r.NormFloat64()*0.2)
			}
			for _, k := range kernels {
				got, want := make([]float32, len(x)), make([]float32, len(x))
				k.f(got, x, a, c)
				portable(t, func() { k.f(want, x, a, c) })
				sameBits32(t, k.name, x, got, want)
			}
		}
	}
}

// BenchmarkRowKernels times each row kernel on the step's shapes with the
// vector kernels and with the portable loops, in the same run: softmax on
// a 32x130 self-attention score block, GELU on a 32x4096 FFN block, the
// LayerNorms on 32x1024 rows, RMSNorm and RoPE on q's 32x3072 block of
// q,k,v.
func BenchmarkRowKernels(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	fill := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64() * scale)
		}
		return v
	}
	x, out, a, c := fill(32*1024, 1), make([]float32, 32*1024), fill(1024, 0.2), fill(1024, 0.2)
	qkv, g := fill(32*9216, 1), fill(3072, 0.2)
	scores, ff := fill(32*130, 3), fill(32*4096, 1)
	cs, sn := RopeTables(32, 128)
	kernels := []struct {
		name   string
		values int
		f      func()
	}{
		{"softmax", len(scores), func() { SoftmaxRows(scores, 32, 130) }},
		{"gelu", len(ff), func() { GELU(ff) }},
		{"LayerNormModulate", len(x), func() { LayerNormModulate(out, x, 1024, a, c, 1e-6) }},
		{"LayerNormAffine", len(x), func() { LayerNormAffine(out, x, 1024, a, c, 1e-6) }},
		{"RMSNormStrided", 32 * 3072, func() { RMSNormStrided(qkv, 32, 3072, 9216, 0, g, 1e-6) }},
		{"rope", 32 * 3072, func() {
			for s := range 32 {
				Rope(qkv[s*9216:s*9216+3072], 24, 128, cs[s*64:(s+1)*64], sn[s*64:(s+1)*64])
			}
		}},
	}
	for _, k := range kernels {
		for _, vec := range []bool{true, false} {
			name := k.name + "/vector"
			if !vec {
				name = k.name + "/portable"
			}
			b.Run(name, func(b *testing.B) {
				if !hasAVX2 {
					b.Skip("no AVX2")
				}
				hasAVX2 = vec
				defer func() { hasAVX2 = true }()
				for b.Loop() {
					k.f()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*k.values), "ns/value")
			})
		}
	}
}

// TestRopeMatchesPortable holds the AVX2 rotation to the portable loop bit
// for bit for several head widths and counts, rows at positions 0..40
// (row stride wider than the rotated block, at an offset), with special
// values among normal ones.
func TestRopeMatchesPortable(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, dh := range []int{4, 8, 16, 128} {
		for heads := 1; heads <= 3; heads++ {
			A, ld, off := heads*dh, 3*heads*dh, heads*dh
			cs, sn := RopeTables(41, dh)
			rope := func(m []float32) {
				for s := range 41 {
					Rope(m[s*ld+off:s*ld+off+heads*dh], heads, dh, cs[s*dh/2:(s+1)*dh/2], sn[s*dh/2:(s+1)*dh/2])
				}
			}
			m := make([]float32, 41*ld)
			for i := range m {
				m[i] = float32(r.NormFloat64() * 3)
				if r.IntN(50) == 0 {
					m[i] = specials32[r.IntN(len(specials32))]
				}
			}
			got, want := slices.Clone(m), slices.Clone(m)
			rope(got)
			portable(t, func() { rope(want) })
			sameBits32(t, fmt.Sprintf("rope dh %d heads %d (A %d)", dh, heads, A), m, got, want)
			if slices.Equal(got, m) {
				t.Fatalf("rope dh %d heads %d: nothing rotated", dh, heads)
			}
		}
	}
}

// TestVecConstsLayout checks vecConsts against the offsets kernels_amd64.s
// reads its constants at (C_LOG2E … C_GELUC): a field moved or added in
// one and not the other would feed a kernel the wrong constant.
func TestVecConstsLayout(t *testing.T) {
	var k vecConsts
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"log2e64", unsafe.Offsetof(k.log2e64), 0}, {"round52", unsafe.Offsetof(k.round52), 32},
		{"ln2Hi64", unsafe.Offsetof(k.ln2Hi64), 64}, {"ln2Lo64", unsafe.Offsetof(k.ln2Lo64), 96},
		{"c120", unsafe.Offsetof(k.c120), 128}, {"c24", unsafe.Offsetof(k.c24), 160},
		{"c6", unsafe.Offsetof(k.c6), 192}, {"c2", unsafe.Offsetof(k.c2), 224},
		{"one", unsafe.Offsetof(k.one), 256}, {"lo", unsafe.Offsetof(k.lo), 288},
		{"hi", unsafe.Offsetof(k.hi), 320}, {"mask", unsafe.Offsetof(k.mask), 352},
		{"bias", unsafe.Offsetof(k.bias), 384}, {"geluA", unsafe.Offsetof(k.geluA), 416},
		{"geluC", unsafe.Offsetof(k.geluC), 448},
	} {
		if c.got != c.want {
			t.Errorf("vecConsts.%s at byte %d, kernels_amd64.s reads it at %d", c.name, c.got, c.want)
		}
	}
	if unsafe.Sizeof(k) != 480 {
		t.Errorf("vecConsts is %d bytes, want 480 (15 constants of 32)", unsafe.Sizeof(k))
	}
}
