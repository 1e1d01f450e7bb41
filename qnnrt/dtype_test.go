package qnnrt

import (
	"math"
	"strings"
	"testing"
	"unsafe"
)

// Golden float16 and bfloat16 bit patterns from numpy (astype(np.float16))
// and torch (.to(torch.bfloat16)), both round to nearest even.
var halfGolden = []struct {
	f      float32
	f16    uint16
	bf16   uint16
	reason string
}{
	{0.0, 0x0000, 0x0000, "zero"},
	{float32(math.Copysign(0, -1)), 0x8000, 0x8000, "negative zero"},
	{1.0, 0x3c00, 0x3f80, "one"},
	{-1.0, 0xbc00, 0xbf80, ""},
	{0.10000000149011612, 0x2e66, 0x3dcd, ""},
	{0.3333333432674408, 0x3555, 0x3eab, ""},
	{65504.0, 0x7bff, 0x4780, "largest half"},
	{65519.98828125, 0x7bff, 0x4780, "just below the overflow midpoint"},
	{65520.0, 0x7c00, 0x4780, "overflow midpoint rounds to Inf"},
	{1000000.0, 0x7c00, 0x4974, ""},
	{-1000000.0, 0xfc00, 0xc974, ""},
	{6.0999998822808266e-05, 0x03ff, 0x3880, "rounds to the largest subnormal"},
	{5.960000137861243e-08, 0x0001, 0x3380, "smallest subnormal"},
	{2.9800000689306216e-08, 0x0000, 0x3300, "below half the smallest subnormal"},
	{2.9802322387695312e-08, 0x0000, 0x3300, "exactly half the smallest subnormal: tie to even 0"},
	{2.9900000697580253e-08, 0x0001, 0x3300, "above half the smallest subnormal"},
	{9.99999993922529e-09, 0x0000, 0x322c, ""},
	{2.9999999242136255e-05, 0x01f7, 0x37fc, "subnormal"},
	{1.00048828125, 0x3c00, 0x3f80, "tie to even (down)"},
	{1.50146484375, 0x3e02, 0x3fc0, "tie to even (up)"},
	{2049.0, 0x6800, 0x4500, ""},
	{2051.0, 0x6802, 0x4500, ""},
	{4097.0, 0x6c00, 0x4580, ""},
	{-3.141590118408203, 0xc248, 0xc049, ""},
	{1.401298464324817e-45, 0x0000, 0x0000, "float32 subnormal"},
	{123.45600128173828, 0x57b7, 0x42f7, ""},
	{float32(math.Inf(1)), 0x7c00, 0x7f80, "+Inf"},
	{float32(math.Inf(-1)), 0xfc00, 0xff80, "-Inf"},
}

func TestHalfConversionsGolden(t *testing.T) {
	for _, g := range halfGolden {
		if got := f32ToF16(g.f); got != g.f16 {
			t.Errorf("f32ToF16(%g) = %#04x, want %#04x (%s)", g.f, got, g.f16, g.reason)
		}
		if got := f32ToBF16(g.f); got != g.bf16 {
			t.Errorf("f32ToBF16(%g) = %#04x, want %#04x (%s)", g.f, got, g.bf16, g.reason)
		}
	}
	nan := float32(math.NaN())
	if h := f32ToF16(nan); h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
		t.Errorf("f32ToF16(NaN) = %#04x, not a NaN", h)
	}
	if b := f32ToBF16(nan); b&0x7f80 != 0x7f80 || b&0x7f == 0 {
		t.Errorf("f32ToBF16(NaN) = %#04x, not a NaN", b)
	}
}

// TestHalfRoundTripAndTies checks every float16 value: decoding then
// encoding gives it back, and the float32 midpoint between it and its
// successor rounds to the one with the even mantissa.
func TestHalfRoundTripAndTies(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		x := f16ToF32(uint16(h))
		if x != x {
			if got := f32ToF16(x); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
				t.Fatalf("NaN %#04x re-encoded as %#04x", h, got)
			}
			continue
		}
		if got := f32ToF16(x); got != uint16(h) {
			t.Fatalf("f32ToF16(f16ToF32(%#04x) = %g) = %#04x", h, x, got)
		}
		next := uint16(h) + 1
		if h&0x7fff >= 0x7bff { // the successor of the largest finite is Inf; stop at sign changes
			continue
		}
		y := f16ToF32(next)
		mid := float32((float64(x) + float64(y)) / 2)
		want := uint16(h)
		if h&1 == 1 {
			want = next
		}
		if got := f32ToF16(mid); got != want {
			t.Fatalf("midpoint %g of %#04x and %#04x encodes as %#04x, want %#04x", mid, h, next, got, want)
		}
	}
}

func TestBF16Decode(t *testing.T) {
	for _, g := range halfGolden {
		want := math.Float32frombits(uint32(g.bf16) << 16)
		var out [1]float32
		src := g.bf16
		codec{dt: BFloat16}.decode(out[:], unsafe.Pointer(&src))
		if out[0] != want && !(math.IsNaN(float64(out[0])) && math.IsNaN(float64(want))) {
			t.Errorf("decode bf16 %#04x = %g, want %g", g.bf16, out[0], want)
		}
	}
}

func TestCodecRoundTrips(t *testing.T) {
	src := []float32{-2.5, -1, -0.1, 0, 0.1, 0.5, 1, 3.75, 100}
	for _, tc := range []struct {
		info TensorInfo
		tol  float64
	}{
		{TensorInfo{Name: "f32", DataType: Float32}, 0},
		{TensorInfo{Name: "f16", DataType: Float16}, 1e-3 * 100},
		{TensorInfo{Name: "bf16", DataType: BFloat16}, 1e-2 * 100},
		{TensorInfo{Name: "u8", DataType: UFixedPoint8, Quant: Quantization{Defined: true, Scale: 0.5, Offset: -10}}, 0.25},
		{TensorInfo{Name: "u16", DataType: UFixedPoint16, Quant: Quantization{Defined: true, Scale: 1.0 / 256, Offset: -32768}}, 1.0 / 512},
	} {
		c, err := newCodec(tc.info)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(src)*tc.info.DataType.Size())
		c.encode(unsafe.Pointer(&buf[0]), src)
		got := make([]float32, len(src))
		c.decode(got, unsafe.Pointer(&buf[0]))
		for i := range src {
			want := src[i]
			if tc.info.Name == "u8" { // range of the code: (0-10)*0.5 .. (255-10)*0.5
				want = float32(math.Max(-5, math.Min(122.5, float64(want))))
			}
			if d := math.Abs(float64(got[i] - want)); d > tc.tol {
				t.Errorf("%s: %g -> %g (diff %g > %g)", tc.info.Name, src[i], got[i], d, tc.tol)
			}
		}
	}
}

func TestUFixedQuantizeExact(t *testing.T) {
	c, err := newCodec(TensorInfo{Name: "q", DataType: UFixedPoint8, Quant: Quantization{Defined: true, Encoding: encodingScaleOffset, Scale: 0.5, Offset: -10}})
	if err != nil {
		t.Fatal(err)
	}
	// q = clamp(round(x/0.5) + 10, 0, 255); round half away from zero.
	src := []float32{0, 0.25, -0.25, 1, -5, -6, 200, float32(math.NaN())}
	want := []uint8{10, 11, 9, 12, 0, 0, 255, 10}
	got := make([]uint8, len(src))
	c.encode(unsafe.Pointer(&got[0]), src)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("quantize(%g) = %d, want %d", src[i], got[i], want[i])
		}
	}
	dec := make([]float32, 3)
	c.decode(dec, unsafe.Pointer(&[]uint8{0, 10, 255}[0]))
	if dec[0] != -5 || dec[1] != 0 || dec[2] != 122.5 {
		t.Errorf("dequantize(0, 10, 255) = %v, want [-5 0 122.5]", dec)
	}
}

func TestNewCodecRefusals(t *testing.T) {
	for _, tc := range []struct {
		info TensorInfo
		want string
	}{
		{TensorInfo{Name: "i32", DataType: Int32}, `tensor "i32" has data type INT_32`},
		{TensorInfo{Name: "noq", DataType: UFixedPoint8}, `"noq" is UFIXED_POINT_8 without quantization parameters`},
		{TensorInfo{Name: "axis", DataType: UFixedPoint16, Quant: Quantization{Defined: true, Encoding: 1, Scale: 1}}, "encoding 1"},
		{TensorInfo{Name: "zero", DataType: UFixedPoint8, Quant: Quantization{Defined: true, Scale: 0}}, "scale 0"},
	} {
		_, err := newCodec(tc.info)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("newCodec(%s): error %v, want one containing %q", tc.info.Name, err, tc.want)
		}
	}
}

func TestDataTypeNamesAndSizes(t *testing.T) {
	for dt, want := range map[DataType]struct {
		name string
		size int
	}{
		Float32: {"FLOAT_32", 4}, Float16: {"FLOAT_16", 2}, BFloat16: {"BFLOAT_16", 2}, UFixedPoint8: {"UFIXED_POINT_8", 1},
		UFixedPoint16: {"UFIXED_POINT_16", 2}, Bool8: {"BOOL_8", 1}, Int64: {"INT_64", 8}, UFixedPoint4: {"UFIXED_POINT_4", 0},
		DataType(0x999): {"DATATYPE_0x999", 0},
	} {
		if dt.String() != want.name || dt.Size() != want.size {
			t.Errorf("%#x: %s/%d, want %s/%d", uint32(dt), dt, dt.Size(), want.name, want.size)
		}
	}
}

func TestPerfModeParse(t *testing.T) {
	for _, s := range []string{"burst", "high_performance", "balanced", "power_saver", "default"} {
		m, err := ParsePerfMode(s)
		if err != nil || m.String() != s {
			t.Errorf("ParsePerfMode(%q) = %v, %v", s, m, err)
		}
	}
	if m, err := ParsePerfMode("High-Performance"); err != nil || m != PerfHighPerformance {
		t.Errorf("ParsePerfMode(High-Performance) = %v, %v", m, err)
	}
	if m, err := ParsePerfMode(""); err != nil || m != PerfDefault {
		t.Errorf("ParsePerfMode(\"\") = %v, %v", m, err)
	}
	if _, err := ParsePerfMode("turbo"); err == nil || !strings.Contains(err.Error(), "burst, high_performance, balanced, power_saver") {
		t.Errorf("ParsePerfMode(turbo) error %v", err)
	}
}
