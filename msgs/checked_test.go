package msgs

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
)

// tensorOf builds a one-dimensional tensor of dtype holding x (float16
// values are given as bit patterns in h when dtype is float16).
func tensorF32(x []float32) Tensor {
	t := Tensor{Shape: []uint32{uint32(len(x))}, DType: DTypeFloat32, Data: make([]byte, 4*len(x))}
	for i, v := range x {
		binary.LittleEndian.PutUint32(t.Data[4*i:], math.Float32bits(v))
	}
	return t
}

func tensorF16(h []uint16) Tensor {
	t := Tensor{Shape: []uint32{uint32(len(h))}, DType: DTypeFloat16, Data: make([]byte, 2*len(h))}
	for i, v := range h {
		binary.LittleEndian.PutUint16(t.Data[2*i:], v)
	}
	return t
}

// TestDecodeCheckedFindsFirstNonFinite places NaN and infinities at the
// edges of the checker's words, blocks and tail, in both wire types and
// both destination types, and checks that the first one is reported with
// its value, and that finite extremes (the largest float32 and float16,
// subnormals, negative zero) are not.
func TestDecodeCheckedFindsFirstNonFinite(t *testing.T) {
	n := 3*checkBlock/4 + 13 // f32: three blocks and a ragged tail; f16: more
	positions := []int{0, 1, 7, 8, 15, 16, 17, checkBlock/4 - 1, checkBlock / 4, checkBlock/2 + 3, n - 13, n - 2, n - 1}
	bads := []struct {
		name string
		f32  float32
		f16  uint16
	}{
		{"NaN", float32(math.NaN()), 0x7e00},
		{"+Inf", float32(math.Inf(1)), 0x7c00},
		{"-Inf", float32(math.Inf(-1)), 0xfc00},
		{"signalling NaN", math.Float32frombits(0xff800001), 0xfc01},
	}
	base32 := make([]float32, n)
	base16 := make([]uint16, n)
	extremes32 := []float32{math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1)), 65504, -1.5}
	extremes16 := []uint16{0x7bff, 0xfbff, 0x0001, 0x8000, 0x03ff, 0x3c00}
	for i := range base32 {
		base32[i] = extremes32[i%len(extremes32)]
		base16[i] = extremes16[i%len(extremes16)]
	}
	check := func(t *testing.T, what string, tn Tensor, wantIdx int, wantNaN bool, wantSign float64) {
		t.Helper()
		d32 := make([]float32, n)
		i, v, err := tn.DecodeF32Checked(d32)
		if err != nil || i != wantIdx {
			t.Fatalf("%s: DecodeF32Checked = %d, %v, %v; want index %d", what, i, v, err, wantIdx)
		}
		d16 := make([]uint16, n)
		j, w, err := tn.DecodeF16Checked(d16)
		if err != nil || j != wantIdx {
			t.Fatalf("%s: DecodeF16Checked = %d, %v, %v; want index %d", what, j, w, err, wantIdx)
		}
		if wantIdx < 0 {
			return
		}
		for _, got := range []float32{v, w} {
			if wantNaN != math.IsNaN(float64(got)) || !wantNaN && !math.IsInf(float64(got), int(wantSign)) {
				t.Fatalf("%s: reported value %v", what, got)
			}
		}
	}
	check(t, "finite f32", tensorF32(base32), -1, false, 0)
	check(t, "finite f16", tensorF16(base16), -1, false, 0)
	for _, b := range bads {
		nan := math.IsNaN(float64(b.f32))
		sign := 1.0
		if b.f32 < 0 {
			sign = -1
		}
		for _, p := range positions {
			x := append([]float32(nil), base32...)
			h := append([]uint16(nil), base16...)
			x[p], h[p] = b.f32, b.f16
			if p+5 < n { // a second one later must not win
				x[p+5], h[p+5] = float32(math.NaN()), 0x7e00
			}
			check(t, b.name+" f32 at "+itoa(p), tensorF32(x), p, nan, sign)
			check(t, b.name+" f16 at "+itoa(p), tensorF16(h), p, nan, sign)
		}
	}
}

func itoa(i int) string { return string(appendInt(nil, i)) }

func appendInt(b []byte, i int) []byte {
	if i >= 10 {
		b = appendInt(b, i/10)
	}
	return append(b, byte('0'+i%10))
}

// TestDecodeCheckedValues checks the decoded values: float32 and float16
// on the wire into float32 and float16 destinations, aligned and not
// (the word-at-a-time check needs 8-byte alignment, the in-place float16
// view 2-byte alignment; both fall back).
func TestDecodeCheckedValues(t *testing.T) {
	halves := []uint16{0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x3555, 0x2e66, 0x03ff, 0x0400}
	want32 := []float32{1, -2, 65504, 0x1p-24, float32(math.Copysign(0, -1)), 0.333251953125, 0.0999755859375, 0x3ffp-24, 0x1p-14}
	for k := range 5 {
		h := make([]uint16, 0, 40)
		w := make([]float32, 0, 40)
		for range 4 {
			h, w = append(h, halves...), append(w, want32...)
		}
		t16 := tensorF16(h)
		// Shift the payload within a larger buffer to misalign it.
		buf := make([]byte, len(t16.Data)+8)
		t16.Data = append(buf[:k:k], t16.Data...)[k:]
		dst := make([]float32, len(w)+1)[k%2:][:len(w)]
		if i, _, err := t16.DecodeF32Checked(dst); err != nil || i >= 0 {
			t.Fatalf("offset %d: %d, %v", k, i, err)
		}
		for i := range w {
			if math.Float32bits(dst[i]) != math.Float32bits(w[i]) {
				t.Fatalf("offset %d: f16 %#04x decoded to %v, want %v", k, h[i], dst[i], w[i])
			}
		}
		d16 := make([]uint16, len(h)+1)[k%2:][:len(h)]
		if i, _, err := t16.DecodeF16Checked(d16); err != nil || i >= 0 {
			t.Fatalf("offset %d: %d, %v", k, i, err)
		}
		t32 := tensorF32(w)
		t32.Data = append(buf[:k:k], t32.Data...)[k:]
		d32 := make([]float32, len(w)+1)[k%2:][:len(w)]
		if i, _, err := t32.DecodeF32Checked(d32); err != nil || i >= 0 {
			t.Fatalf("offset %d: %d, %v", k, i, err)
		}
		e16 := make([]uint16, len(h))
		if i, _, err := t32.DecodeF16Checked(e16); err != nil || i >= 0 {
			t.Fatalf("offset %d: %d, %v", k, i, err)
		}
		for i := range w {
			if d16[i] != h[i] || e16[i] != h[i] || math.Float32bits(d32[i]) != math.Float32bits(w[i]) {
				t.Fatalf("offset %d element %d: f16->f16 %#04x, f32->f16 %#04x, f32->f32 %v; want %#04x and %v",
					k, i, d16[i], e16[i], d32[i], h[i], w[i])
			}
		}
	}
}

// TestDecodeCheckedErrors: a destination of the wrong length and a tensor
// whose payload disagrees with its shape are errors, not indexes.
func TestDecodeCheckedErrors(t *testing.T) {
	tn := tensorF32([]float32{1, 2, 3})
	if _, _, err := tn.DecodeF32Checked(make([]float32, 2)); err == nil {
		t.Error("short float32 destination accepted")
	}
	if _, _, err := tn.DecodeF16Checked(make([]uint16, 4)); err == nil {
		t.Error("long float16 destination accepted")
	}
	tn.Data = tn.Data[:8]
	if _, _, err := tn.DecodeF32Checked(make([]float32, 3)); err == nil {
		t.Error("truncated payload accepted")
	}
}

// TestF32ToF16 checks the rounding conversion against binary16 values
// worked out by hand from IEEE 754 (round to nearest, ties to even), and
// that every finite half survives a round trip.
func TestF32ToF16(t *testing.T) {
	for _, tc := range []struct {
		in   float32
		want uint16
	}{
		{1, 0x3c00}, {-2, 0xc000}, {0.5, 0x3800}, {65504, 0x7bff},
		{65519.99, 0x7bff}, {65520, 0x7c00}, {1e6, 0x7c00}, {-1e6, 0xfc00},
		{0x1p-24, 0x0001}, {0x1p-25, 0x0000}, {0x1.8p-24, 0x0002}, {0x1p-26, 0x0000},
		{0x1p-14, 0x0400}, {0x1.ffcp-15, 0x0400}, // rounds up out of the subnormals
		{1.0 / 3, 0x3555}, {0.1, 0x2e66}, {1 + 0x1p-11, 0x3c00}, {1 + 0x3p-11, 0x3c02},
		{float32(math.Inf(1)), 0x7c00}, {float32(math.Inf(-1)), 0xfc00},
		{float32(math.Copysign(0, -1)), 0x8000},
	} {
		if got := f32ToF16(tc.in); got != tc.want {
			t.Errorf("f32ToF16(%v) = %#04x, want %#04x", tc.in, got, tc.want)
		}
		if got := f32BitsToF16(math.Float32bits(tc.in)); got != tc.want {
			t.Errorf("f32BitsToF16(%v) = %#04x, want %#04x", tc.in, got, tc.want)
		}
	}
	if got := f32ToF16(float32(math.NaN())); got&0x7c00 != 0x7c00 || got&0x3ff == 0 {
		t.Errorf("NaN converted to %#04x, not a NaN", got)
	}
	for h := range 1 << 16 {
		if uint16(h)&0x7c00 == 0x7c00 {
			continue
		}
		if got := f32ToF16(f16ToF32(uint16(h))); got != uint16(h) {
			t.Fatalf("round trip of %#04x gave %#04x", h, got)
		}
	}
	// The fast path agrees with the general conversion on every float32
	// whose top 19 bits vary (all exponents, the mantissa bits that decide
	// the rounding: the kept ones' lowest, the half and the sticky bits).
	for hi := range uint32(1 << 19) {
		for _, lo := range []uint32{0, 1, 0xfff, 0x1000, 0x1001, 0x1fff} {
			b := hi<<13 | lo
			if b&0x7f800000 == 0x7f800000 {
				continue
			}
			if got, want := f32BitsToF16(b), f32ToF16(math.Float32frombits(b)); got != want {
				t.Fatalf("f32BitsToF16(%#08x) = %#04x, f32ToF16 gives %#04x", b, got, want)
			}
		}
	}
}

// TestDecodeCheckedAllocatesNothing: the fused decode does not allocate
// for an aligned payload.
func TestDecodeCheckedAllocatesNothing(t *testing.T) {
	x := make([]float32, 4096)
	for i := range x {
		x[i] = float32(i)
	}
	t32 := tensorF32(x)
	d32, d16 := make([]float32, len(x)), make([]uint16, len(x))
	t16 := tensorF16(d16)
	if a := testing.AllocsPerRun(20, func() {
		t32.DecodeF32Checked(d32)
		t32.DecodeF16Checked(d16)
		t16.DecodeF32Checked(d32)
		t16.DecodeF16Checked(d16)
	}); a != 0 {
		t.Errorf("%v allocations per four decodes", a)
	}
}

// TestCopyCheck checks the copy-and-check kernels (assembly on amd64) and
// their portable versions against each other and against the definition:
// the copy is exact, and a block is flagged exactly when one of its values,
// at any position, has an all-ones exponent.
func TestCopyCheck(t *testing.T) {
	kernels := []struct {
		name  string
		fn    func(dst, src *byte, n int) bool
		width int
		bad   []uint32 // non-finite patterns
		good  []uint32 // finite extremes
	}{
		{"copyCheck32", copyCheck32, 4, []uint32{0x7f800000, 0xff800000, 0x7fc00000, 0xffffffff, 0x7f800001}, []uint32{0x7f7fffff, 0xff7fffff, 0x80000000, 0x00000001, 0x3f800000, 0x007fffff}},
		{"copyCheckGo32", copyCheckGo32, 4, []uint32{0x7f800000, 0xff800000, 0x7fc00000, 0xffffffff, 0x7f800001}, []uint32{0x7f7fffff, 0xff7fffff, 0x80000000, 0x00000001, 0x3f800000, 0x007fffff}},
		{"copyCheck16", copyCheck16, 2, []uint32{0x7c00, 0xfc00, 0x7e00, 0xffff, 0x7c01}, []uint32{0x7bff, 0xfbff, 0x8000, 0x0001, 0x3c00, 0x03ff}},
		{"copyCheckGo16", copyCheckGo16, 2, []uint32{0x7c00, 0xfc00, 0x7e00, 0xffff, 0x7c01}, []uint32{0x7bff, 0xfbff, 0x8000, 0x0001, 0x3c00, 0x03ff}},
	}
	put := func(b []byte, i, w int, v uint32) {
		if w == 4 {
			binary.LittleEndian.PutUint32(b[4*i:], v)
		} else {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
		}
	}
	for _, k := range kernels {
		for _, n := range []int{64, 192} {
			src := make([]byte, n+8)[8:] // 8-byte aligned
			for i := range n / k.width {
				put(src, i, k.width, k.good[i%len(k.good)])
			}
			dst := make([]byte, n)
			if k.fn(&dst[0], &src[0], n) {
				t.Errorf("%s: finite block of %d bytes flagged", k.name, n)
			}
			if string(dst) != string(src) {
				t.Fatalf("%s: copy differs", k.name)
			}
			for i := range n / k.width {
				for _, b := range k.bad {
					s := append([]byte(nil), src...)
					put(s, i, k.width, b)
					clear(dst)
					if !k.fn(&dst[0], &s[0], n) {
						t.Fatalf("%s: %#x at element %d of %d bytes not flagged", k.name, b, i, n)
					}
					if string(dst) != string(s) {
						t.Fatalf("%s: copy differs", k.name)
					}
				}
			}
		}
	}
}

// TestUnmarshalCDRReuse: decoding in place gives what UnmarshalCDR gives,
// for a message of another layout too (shorter shape, no mask, another
// frame id), and decoding the same layout again allocates nothing.
func TestUnmarshalCDRReuse(t *testing.T) {
	mk := func(frame string, shape []uint32, mask []bool) []byte {
		n := 1
		for _, d := range shape {
			n *= int(d)
		}
		m := TextContext{Header: Header{FrameID: frame}, Seq: 3, Instruction: "go",
			Context: NewTensorF32(shape, make([]float32, n)), AttentionMask: mask}
		b, err := m.MarshalCDR()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	a := mk("camera", []uint32{1, 2, 3}, []bool{true, false})
	b := mk("cam", []uint32{4}, nil)
	var m TextContext
	for _, data := range [][]byte{a, b, a} {
		var want TextContext
		if err := want.UnmarshalCDR(data); err != nil {
			t.Fatal(err)
		}
		if err := m.UnmarshalCDRReuse(data); err != nil {
			t.Fatal(err)
		}
		if m.Header != want.Header || m.Instruction != want.Instruction || m.Seq != want.Seq ||
			!slices.Equal(m.Context.Shape, want.Context.Shape) || string(m.Context.Data) != string(want.Context.Data) ||
			!slices.Equal(m.AttentionMask, want.AttentionMask) || (m.AttentionMask == nil) != (want.AttentionMask == nil) {
			t.Fatalf("reused decode %+v, want %+v", m, want)
		}
	}
	var kv VideoKVCache
	shape := []uint32{2, 1, 3, 4}
	kvb, err := (&VideoKVCache{Header: Header{FrameID: "camera"}, Keys: NewTensorF32(shape, make([]float32, 24)),
		Values: NewTensorF32(shape, make([]float32, 24))}).MarshalCDR()
	if err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(10, func() {
		if err := m.UnmarshalCDRReuse(a); err != nil {
			t.Fatal(err)
		}
		if err := kv.UnmarshalCDRReuse(kvb); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("%v allocations per reused decode", a)
	}
	if err := m.UnmarshalCDRReuse(a[:len(a)-3]); err == nil {
		t.Error("truncated message decoded")
	}
}

// TestF16ToF32Normal runs the branch-free conversion (assembly on amd64)
// and its portable version over every binary16 value, eight at a time: a
// block is flagged exactly when it holds a zero, subnormal, infinity or
// NaN, and an unflagged block converts exactly.
func TestF16ToF32Normal(t *testing.T) {
	for _, k := range []struct {
		name string
		fn   func(dst *float32, src *uint16, n int) bool
	}{{"f16ToF32Normal", f16ToF32Normal}, {"f16ToF32NormalGo", f16ToF32NormalGo}} {
		src := make([]uint16, 8)
		dst := make([]float32, 8)
		for base := 0; base < 1<<16; base += 8 {
			special := false
			for i := range src {
				src[i] = uint16(base + i)
				if e := src[i] & 0x7c00; e == 0 || e == 0x7c00 {
					special = true
				}
			}
			if got := k.fn(&dst[0], &src[0], 8); got != special {
				t.Fatalf("%s: block at %#04x flagged %v, want %v", k.name, base, got, special)
			}
			if special {
				continue
			}
			for i, h := range src {
				if math.Float32bits(dst[i]) != math.Float32bits(f16ToF32(h)) {
					t.Fatalf("%s: %#04x converted to %v, want %v", k.name, h, dst[i], f16ToF32(h))
				}
			}
		}
		// One special value among normal ones flags the block wherever it is.
		for pos := range 8 {
			for _, h := range []uint16{0, 0x8000, 0x0001, 0x7c00, 0xfe00} {
				for i := range src {
					src[i] = 0x3c00
				}
				src[pos] = h
				if !k.fn(&dst[0], &src[0], 8) {
					t.Fatalf("%s: %#04x at %d not flagged", k.name, h, pos)
				}
			}
		}
	}
}

// TestF32ToF16Normal runs the branch-free conversion (assembly on amd64)
// and its portable version over every float32 exponent with the mantissa
// bits that decide the rounding, eight at a time: a block is flagged
// exactly when a value lies outside [2^-14, 2^16) in magnitude, and an
// unflagged block converts as f32ToF16 does.
func TestF32ToF16Normal(t *testing.T) {
	for _, k := range []struct {
		name string
		fn   func(dst *uint16, src *uint32, n int) bool
	}{{"f32ToF16Normal", f32ToF16Normal}, {"f32ToF16NormalGo", f32ToF16NormalGo}} {
		src := make([]uint32, 8)
		dst := make([]uint16, 8)
		los := []uint32{0, 1, 0xfff, 0x1000, 0x1001, 0x1fff, 0x2000, 0x3000}
		for hi := uint32(0); hi < 1<<19; hi++ {
			special := false
			for i := range src {
				src[i] = hi<<13 | los[i]
				abs := src[i] & 0x7fffffff
				if abs < 0x38800000 || abs >= 0x47800000 {
					special = true
				}
			}
			if got := k.fn(&dst[0], &src[0], 8); got != special {
				t.Fatalf("%s: block %#08x.. flagged %v, want %v", k.name, src[0], got, special)
			}
			if special {
				continue
			}
			for i, b := range src {
				if want := f32ToF16(math.Float32frombits(b)); dst[i] != want {
					t.Fatalf("%s: %#08x converted to %#04x, want %#04x", k.name, b, dst[i], want)
				}
			}
		}
		for pos := range 8 {
			for _, b := range []uint32{0, 0x80000000, 0x38000000, 0x47800000, 0x7f800000, 0xffc00000} {
				for i := range src {
					src[i] = 0x3f800000
				}
				src[pos] = b
				if !k.fn(&dst[0], &src[0], 8) {
					t.Fatalf("%s: %#08x at %d not flagged", k.name, b, pos)
				}
			}
		}
	}
}
