package qnnfake

import (
	"math"
	"testing"
)

// Golden values in this file come from an independent reference written in
// Python (not kept in the repository): numpy's float64 -> float16 cast,
// torch's float32 -> bfloat16 cast, exact rational (fractions.Fraction)
// rounding for float64 -> bfloat16 outputs, round-half-away-from-zero for
// the fixed-point and int32 outputs, and the contract's formula evaluated
// in float64:
//
//	s_m = sum_i x_m[i]*(1 + 0.25*(i mod 7)) / n_m
//	y_j[i] = x_0[i mod n_0]*(1 + 0.5*j) + 0.01*sum_m (m+1)*s_m + 0.125*j

func TestFloat64ToHalfGolden(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want uint16
	}{
		{1.0 / 3, 0x3555},
		{65519.99, 0x7bff},      // largest finite
		{65520, 0x7c00},         // the halfway point rounds to even: +inf
		{0x1p-25, 0x0000},       // half the smallest subnormal ties to even: 0
		{3 * 0x1p-25, 0x0002},   // 1.5 subnormal steps ties to even: 2
		{1 + 0x1p-11, 0x3c00},   // tie, even is down
		{1 + 3*0x1p-11, 0x3c02}, // tie, even is up
		{math.Copysign(0, -1), 0x8000},
		{6.1e-5, 0x03ff}, // just below the smallest normal
		{-1234.5678, 0xe4d3},
		{1e-8, 0x0000},
	} {
		if got := float64ToHalf(c.v); got != c.want {
			t.Errorf("float64ToHalf(%v) = %#04x, want %#04x", c.v, got, c.want)
		}
		if c.want&0x7c00 != 0x7c00 {
			if back := float64ToHalf(halfToFloat64(c.want)); back != c.want {
				t.Errorf("half %#04x does not round-trip: %#04x", c.want, back)
			}
		}
	}
}

func TestFloat64ToBF16Golden(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want uint16
	}{
		{1 + 0x1p-8, 0x3f80},   // tie, even is down
		{1 + 3*0x1p-8, 0x3f82}, // tie, even is up
		{1.0 / 3, 0x3eab},
		{3.0e38, 0x7f62},
		{0x1.ffp127, 0x7f80}, // the halfway point to 2^128 rounds to +inf
		{-1e-40, 0x8001},     // subnormal
		{1e-45, 0x0000},
		{0.1, 0x3dcd},
	} {
		if got := float64ToBF16(c.v); got != c.want {
			t.Errorf("float64ToBF16(%v) = %#04x, want %#04x", c.v, got, c.want)
		}
	}
}

// goldenGraph is the graph of the Python reference: four inputs of four
// types, six outputs of six types (fixed-point ones clamp).
func goldenGraph() Graph {
	return Graph{
		Name: "golden",
		Inputs: []Tensor{
			{ID: 1, Name: "x_f32", DataType: DataTypeFloat32, Dims: []uint32{3}},
			{ID: 2, Name: "x_f16", DataType: DataTypeFloat16, Dims: []uint32{2}},
			{ID: 3, Name: "x_u8", DataType: DataTypeUFixed8, Dims: []uint32{4}, Quant: &ScaleOffset{Scale: 0.1, Offset: -10}},
			{ID: 4, Name: "x_bf16", DataType: DataTypeBF16, Dims: []uint32{2}},
		},
		Outputs: []Tensor{
			{ID: 10, Name: "y_f32", DataType: DataTypeFloat32, Dims: []uint32{5}},
			{ID: 11, Name: "y_f16", DataType: DataTypeFloat16, Dims: []uint32{3}},
			{ID: 12, Name: "y_u16", DataType: DataTypeUFixed16, Dims: []uint32{2}, Quant: &ScaleOffset{Scale: 0.001, Offset: -1000}},
			{ID: 13, Name: "y_bf16", DataType: DataTypeBF16, Dims: []uint32{4}},
			{ID: 14, Name: "y_i32", DataType: DataTypeInt32, Dims: []uint32{2}},
			{ID: 15, Name: "y_bool", DataType: DataTypeBool8, Dims: []uint32{2}},
		},
	}
}

func goldenInputs() [][]float32 {
	return [][]float32{
		{0.5, -1.25, 2},
		{0.1, 3.3},
		{0, 0.26, -1, 30},
		{1.00390625, -2.5},
	}
}

func TestExpectedGolden(t *testing.T) {
	want := [][]uint32{
		{0x3f51c074, 0xbf6e3f8c, 0x4014701d, 0x3f51c074, 0xbf6e3f8c},
		{0x3f98e000, 0xbfb72000, 0x405c8000},
		{0x3fc8d4ff, 0xbf800000}, // the second clamps at q = 0
		{0x3ff90000, 0xc01c0000, 0x40b60000, 0x3ff90000},
		{0x40000000, 0xc0400000},
		{0x3f800000, 0x3f800000},
	}
	got := Expected(goldenGraph(), goldenInputs())
	if len(got) != len(want) {
		t.Fatalf("%d outputs, want %d", len(got), len(want))
	}
	for j := range want {
		for i, w := range want[j] {
			if i >= len(got[j]) || math.Float32bits(got[j][i]) != w {
				t.Errorf("output %d: got %v, want bits %#x", j, got[j], want[j])
				break
			}
		}
	}
}

// TestExpectedGoldenInLibrary runs the golden graph through the C library.
func TestExpectedGoldenInLibrary(t *testing.T) {
	l := New(t, Variant{})
	a := newABI(t, l).open()
	g := goldenGraph()
	s := a.load(Binary{Graphs: []Graph{g}})
	got, code := a.execute(a.graph(s, g.Name), g, goldenInputs(), 0)
	if code != 0 {
		t.Fatalf("execute: %d: %s", code, l.LastError())
	}
	sameBits(t, "golden graph", got, Expected(g, goldenInputs()))
	a.free(s)
}

func TestExpectedRefusesWhatTheLibraryRefuses(t *testing.T) {
	g := goldenGraph()
	in := goldenInputs()
	if Expected(g, in[:3]) != nil {
		t.Error("Expected accepted 3 inputs for a 4-input graph")
	}
	short := goldenInputs()
	short[0] = short[0][:2]
	if Expected(g, short) != nil {
		t.Error("Expected accepted an input of the wrong length")
	}
	g.Outputs[2].Quant = nil
	if Expected(g, in) != nil {
		t.Error("Expected accepted a fixed-point output without quantization")
	}
	g = goldenGraph()
	g.Inputs[0].DataType = 0x008 // INT_8: not computed by the double
	if Expected(g, in) != nil {
		t.Error("Expected accepted an INT_8 input")
	}
}
