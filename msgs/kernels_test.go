package msgs

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"testing"
	"unsafe"

	"github.com/x448/float16"
)

// The receive kernels, every set this machine can run (testKernelSets, per
// architecture), against a portable reference written for the tests: the
// values as sent, bit by bit, with x448/float16 for the rounding
// conversion.

// Finite bit patterns that are easy to get wrong: the largest finite
// values, zeros, subnormals, the smallest normals and, for float32 to
// binary16, the values on either side of a rounding to infinity, to the
// largest finite half, to a subnormal half and to zero.
var (
	finite32Patterns = []uint32{
		0x7f7fffff, 0xff7fffff, // ±max float32 (binary16: ±Inf)
		0x00000000, 0x80000000, // ±0
		0x00000001, 0x807fffff, // float32 subnormals
		0x00800000, 0x3f800000, 0xbfc00000, // min normal, 1, -1.5
		0x477fe000, 0x477fefff, // 65504 and just below the tie: 65504
		0x477ff000, 0xc77ff001, // 65520 (tie: +Inf), -65520.000something
		0x47800000,             // 65536: +Inf
		0x38800000, 0x387fffff, // 2^-14 (min normal half), just below it
		0x387fc000, 0x387fe000, // the largest subnormal half, the tie above it
		0x33800000, 0x33000000, // 2^-24 (min subnormal half), 2^-25 (tie: 0)
		0x33000001, 0xb37fffff, // just above the tie (rounds to 1), -just below 2^-24
		0x32ffffff, 0x33c00000, // below half of 2^-24 (0), 1.5 x 2^-24 (a tie between subnormals: 2)
		0x3a001000, 0x3a003000, // ties between normal halves (to even: down, up)
	}
	bad32Patterns    = []uint32{0x7f800000, 0xff800000, 0x7fc00000, 0x7f800001, 0xffffffff}
	finite16Patterns = []uint32{
		0x7bff, 0xfbff, 0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x83ff,
		0x0400, 0x3c00, 0xc000, 0x3555, 0x0200,
	}
	bad16Patterns = []uint32{0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xffff}
)

// refDecode is the reference for one decode: the output bits of every
// element (binary16 in the low half when out16) and the index and value
// bits of the first non-finite value as sent, or -1.
func refDecode(wire uint8, out16 bool, vals []uint32) (out []uint32, idx int, val uint32) {
	idx = -1
	out = make([]uint32, len(vals))
	for i, v := range vals {
		var nonFinite bool
		var value uint32
		switch wire {
		case DTypeFloat32:
			nonFinite, value = v&0x7f800000 == 0x7f800000, v
			if out16 {
				out[i] = uint32(float16.Fromfloat32(math.Float32frombits(v)).Bits())
			} else {
				out[i] = v
			}
		case DTypeFloat16:
			nonFinite, value = v&0x7c00 == 0x7c00, math.Float32bits(f16ToF32(uint16(v)))
			if out16 {
				out[i] = v
			} else {
				out[i] = math.Float32bits(f16ToF32(uint16(v)))
			}
		}
		if nonFinite && idx < 0 {
			idx, val = i, value
		}
	}
	return out, idx, val
}

// guard is the bit pattern around every destination: it must survive.
const guard = 0x5a5a5a5a

// decodeInto runs one decode of vals (wire type wire) with set k into a
// destination whose first element lies dstOff bytes after a 32-byte
// boundary, from a payload src starting srcOff bytes after a 32-byte
// boundary, and checks the result against refDecode: the index and the
// value as sent, every output element before the index (all of them when
// there is none) bit for bit, and the guard elements on either side.
func decodeInto(t *testing.T, k *kernels, wire uint8, out16 bool, vals []uint32, dstOff, srcOff int) {
	t.Helper()
	size := 4
	if wire == DTypeFloat16 {
		size = 2
	}
	n := len(vals)
	raw := make([]byte, size*n+64)
	base := int(-uintptr(unsafe.Pointer(&raw[0])) & 31)
	data := raw[base+srcOff : base+srcOff+size*n]
	for i, v := range vals {
		if size == 4 {
			binary.LittleEndian.PutUint32(data[4*i:], v)
		} else {
			binary.LittleEndian.PutUint16(data[2*i:], uint16(v))
		}
	}
	tn := Tensor{Shape: []uint32{uint32(n)}, DType: wire, Data: data}
	want, wantIdx, wantVal := refDecode(wire, out16, vals)
	const guards = 16
	var (
		out, outside []byte // the destination's bytes; the guard bytes around it
		outSize      = 4
		idx          int
		v            float32
		err          error
	)
	if out16 {
		outSize = 2
		whole := make([]uint16, n+2*guards+32)
		for i := range whole {
			whole[i] = guard & 0xffff
		}
		lo := guards + int(-uintptr(unsafe.Pointer(&whole[guards]))&31)/2 + dstOff/2
		dst := whole[lo : lo+n]
		idx, v, err = tn.decodeF16Checked(dst, k)
		b := unsafe.Slice((*byte)(unsafe.Pointer(&whole[0])), 2*len(whole))
		out, outside = b[2*lo:2*(lo+n)], append(b[:2*lo:2*lo], b[2*(lo+n):]...)
	} else {
		whole := make([]float32, n+2*guards+8)
		for i := range whole {
			whole[i] = math.Float32frombits(guard)
		}
		lo := guards + int(-uintptr(unsafe.Pointer(&whole[guards]))&31)/4 + dstOff/4
		dst := whole[lo : lo+n]
		idx, v, err = tn.decodeF32Checked(dst, k)
		b := unsafe.Slice((*byte)(unsafe.Pointer(&whole[0])), 4*len(whole))
		out, outside = b[4*lo:4*(lo+n)], append(b[:4*lo:4*lo], b[4*(lo+n):]...)
	}
	what := fmt.Sprintf("%s: wire dtype %d into f16 %v, %d values, dst +%d, src +%d", k.name, wire, out16, n, dstOff, srcOff)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if idx != wantIdx || idx >= 0 && math.Float32bits(v) != wantVal {
		t.Fatalf("%s: index %d value %#08x, want %d and %#08x", what, idx, math.Float32bits(v), wantIdx, wantVal)
	}
	end := n
	if idx >= 0 {
		end = idx
	}
	wantOut := make([]byte, outSize*n) // dst holds values in the host's byte order
	for i, w := range want {
		if outSize == 4 {
			binary.NativeEndian.PutUint32(wantOut[4*i:], w)
		} else {
			binary.NativeEndian.PutUint16(wantOut[2*i:], uint16(w))
		}
	}
	if g, w := out[:outSize*end], wantOut[:outSize*end]; string(g) != string(w) {
		for i := 0; ; i += outSize {
			if string(g[i:i+outSize]) != string(w[i:i+outSize]) {
				t.Fatalf("%s: element %d (sent %#x) is % x, want % x", what, i/outSize, vals[i/outSize], g[i:i+outSize], w[i:i+outSize])
			}
		}
	}
	for i := 0; i < len(outside); i += 2 {
		if outside[i] != guard&0xff || outside[i+1] != guard>>8&0xff {
			t.Fatalf("%s: a guard element outside the destination was overwritten", what)
		}
	}
}

// background returns n finite values cycling through pats from phase.
func background(pats []uint32, n, phase int) []uint32 {
	v := make([]uint32, n)
	for i := range v {
		v[i] = pats[(i+phase)%len(pats)]
	}
	return v
}

type decodeOp struct {
	name          string
	wire          uint8
	out16         bool
	finite, bad   []uint32
	size, outSize int
}

var decodeOps = []decodeOp{
	{"f32->f32", DTypeFloat32, false, finite32Patterns, bad32Patterns, 4, 4},
	{"f16->f16", DTypeFloat16, true, finite16Patterns, bad16Patterns, 2, 2},
	{"f16->f32", DTypeFloat16, false, finite16Patterns, bad16Patterns, 2, 4},
	{"f32->f16", DTypeFloat32, true, finite32Patterns, bad32Patterns, 4, 2},
}

// TestKernelSetsLengthsAlignments runs every set and every decode on
// finite data of the lengths around the kernels' strides (the 64-byte
// SSE2 and NEON copy iteration, the 256-byte AVX2 iteration, the 32-value
// NEON and 64-value F16C conversion iterations, the 64-value multiple the
// exact conversions are called with, the 512-value conversion block),
// with every element-aligned head
// misalignment of the destination from 0 to 31 bytes and several of the
// payload, and with a NaN as the last value.
func TestKernelSetsLengthsAlignments(t *testing.T) {
	lengths := []int{0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129,
		191, 192, 255, 256, 257, 383, 511, 512, 513, 575, 1023, 1024, 1025}
	for _, k := range testKernelSets(t) {
		for _, op := range decodeOps {
			for _, n := range lengths {
				for dstOff := 0; dstOff < 32; dstOff += op.outSize {
					for _, srcOff := range []int{0, op.size, 1, 3, 30} {
						vals := background(op.finite, n, n+dstOff)
						decodeInto(t, &k, op.wire, op.out16, vals, dstOff, srcOff)
						if n > 0 {
							vals[n-1] = op.bad[(n+dstOff)%len(op.bad)]
							decodeInto(t, &k, op.wire, op.out16, vals, dstOff, srcOff)
						}
					}
				}
			}
		}
	}
}

// TestKernelSetsFirstNonFinite places each non-finite pattern at every
// position of a stretch of two 256-byte AVX2 iterations (two to four
// 64-value F16C ones, four to nine NEON ones) and more, with a later NaN
// that must not win, over every destination misalignment, the finite
// patterns cycling through every position around it.
func TestKernelSetsFirstNonFinite(t *testing.T) {
	for _, k := range testKernelSets(t) {
		for _, op := range decodeOps {
			n := 600 / op.size // two 256-byte iterations of the source, a head and a tail
			for dstOff := 0; dstOff < 32; dstOff += op.outSize {
				for p := range n {
					vals := background(op.finite, n, p)
					vals[p] = op.bad[(p+dstOff)%len(op.bad)]
					if p+3 < n {
						vals[p+3] = op.bad[2]
					}
					decodeInto(t, &k, op.wire, op.out16, vals, dstOff, (p*op.size)%8)
				}
			}
		}
	}
}

// TestDecodeCheckedMatchesSets: the exported methods use one of the sets
// (hostKernels) and give what it gives.
func TestDecodeCheckedMatchesSets(t *testing.T) {
	found := false
	for _, k := range testKernelSets(t) {
		found = found || k.name == hostKernels.name
	}
	if !found {
		t.Fatalf("hostKernels %q is not among the tested sets", hostKernels.name)
	}
	vals := background(finite32Patterns, 777, 0)
	vals[500] = 0x7fc00000
	tn := tensorF32(nil)
	tn.Shape = []uint32{uint32(len(vals))}
	tn.Data = make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(tn.Data[4*i:], v)
	}
	if i, v, err := tn.DecodeF16Checked(make([]uint16, len(vals))); err != nil || i != 500 || !math.IsNaN(float64(v)) {
		t.Fatalf("DecodeF16Checked = %d, %v, %v; want 500 and a NaN", i, v, err)
	}
	if i, v, err := tn.DecodeF32Checked(make([]float32, len(vals))); err != nil || i != 500 || !math.IsNaN(float64(v)) {
		t.Fatalf("DecodeF32Checked = %d, %v, %v; want 500 and a NaN", i, v, err)
	}
}

// TestF16ToF32Reference: msgs' own f16ToF32, the reference of the
// conversion kernels, agrees with x448/float16 on every binary16 value
// that is not a NaN and keeps NaNs' payloads.
func TestF16ToF32Reference(t *testing.T) {
	for h := range 1 << 16 {
		got := math.Float32bits(f16ToF32(uint16(h)))
		if uint16(h)&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			if want := uint32(h&0x8000)<<16 | 0x7f800000 | uint32(h&0x3ff)<<13; got != want {
				t.Fatalf("f16ToF32(%#04x) = %#08x, want the NaN %#08x", h, got, want)
			}
			continue
		}
		if want := math.Float32bits(float16.Frombits(uint16(h)).Float32()); got != want {
			t.Fatalf("f16ToF32(%#04x) = %#08x, x448/float16 gives %#08x", h, got, want)
		}
	}
}

// TestDecodeCheckedHostile: a tensor that disagrees with itself or with
// the destination is an error naming what was wrong and what was
// expected, with every kernel set and both methods, and the destination
// is not written.
func TestDecodeCheckedHostile(t *testing.T) {
	for _, tc := range []struct {
		name string
		tn   Tensor
		dst  int
		want string
	}{
		{"short destination", Tensor{Shape: []uint32{3}, DType: DTypeFloat32, Data: make([]byte, 12)}, 2,
			"msgs: Tensor: destination has 2 elements, shape [3] has 3"},
		{"long destination", Tensor{Shape: []uint32{3}, DType: DTypeFloat16, Data: make([]byte, 6)}, 4,
			"msgs: Tensor: destination has 4 elements, shape [3] has 3"},
		{"truncated payload", Tensor{Shape: []uint32{3}, DType: DTypeFloat32, Data: make([]byte, 8)}, 3,
			"msgs: Tensor: shape [3] needs 12 bytes of float32, got 8"},
		{"odd float16 payload", Tensor{Shape: []uint32{2}, DType: DTypeFloat16, Data: make([]byte, 5)}, 2,
			"msgs: Tensor: shape [2] needs 4 bytes of float16, got 5"},
		{"payload longer than the shape", Tensor{Shape: []uint32{2}, DType: DTypeFloat16, Data: make([]byte, 1<<16)}, 2,
			"msgs: Tensor: shape [2] needs 4 bytes of float16, got 65536"},
		{"unknown dtype", Tensor{Shape: []uint32{2}, DType: 7, Data: make([]byte, 8)}, 2,
			"msgs: Tensor: dtype 7 is not DTYPE_FLOAT32 (0) or DTYPE_FLOAT16 (1)"},
		{"shape beyond int", Tensor{Shape: []uint32{1 << 31, 1 << 31, 1 << 31}, DType: DTypeFloat32, Data: make([]byte, 8)}, 2,
			"msgs: Tensor: shape [2147483648 2147483648 2147483648] has more than 9223372036854775807 elements"},
	} {
		for _, k := range testKernelSets(t) {
			d32, d16 := make([]float32, tc.dst), make([]uint16, tc.dst)
			for i := range d32 {
				d32[i], d16[i] = 7, 7
			}
			i32, _, err32 := tc.tn.decodeF32Checked(d32, &k)
			i16, _, err16 := tc.tn.decodeF16Checked(d16, &k)
			for _, err := range []error{err32, err16} {
				if err == nil || err.Error() != tc.want {
					t.Fatalf("%s, %s: error %v, want %q", tc.name, k.name, err, tc.want)
				}
			}
			if i32 != -1 || i16 != -1 {
				t.Errorf("%s, %s: indexes %d, %d with an error, want -1", tc.name, k.name, i32, i16)
			}
			for i := range d32 {
				if d32[i] != 7 || d16[i] != 7 {
					t.Fatalf("%s, %s: destination written before the error", tc.name, k.name)
				}
			}
		}
	}
}

// TestExactConversions runs checkF16ToF32AllValues and
// checkF32ToF16Sweep on every exact conversion kernel of the sets (F16C
// on amd64, NEON on arm64), with ordinary and non-temporal stores (the
// NEON kernels ignore nt).
func TestExactConversions(t *testing.T) {
	seen := map[uintptr]bool{}
	for _, k := range testKernelSets(t) {
		if k.f16ToF32 == nil || seen[reflect.ValueOf(k.f16ToF32).Pointer()] {
			continue
		}
		seen[reflect.ValueOf(k.f16ToF32).Pointer()] = true
		checkF16ToF32AllValues(t, k.name+" f16ToF32", k.f16ToF32, []bool{false, true})
		checkF32ToF16Sweep(t, k.name+" f32ToF16", k.f32ToF16, []bool{false, true})
	}
	if len(seen) == 0 {
		t.Skip("no set of this machine has exact conversion kernels")
	}
}

// TestCopyKernels runs checkCopyKernel on every copy kernel of the sets,
// over twelve 64-byte blocks (three 256-byte iterations of the AVX2
// kernels): the block kernels at destination offsets within 16 bytes, the
// non-temporal ones with the destination aligned to 32 bytes, as they
// need.
func TestCopyKernels(t *testing.T) {
	seen := map[uintptr]bool{}
	for _, k := range testKernelSets(t) {
		for _, c := range []struct {
			name    string
			fn      func(dst, src *byte, n int) bool
			width   int
			dstOffs []int
		}{
			{"copyCheck32", k.copyCheck32, 4, []int{0, 4, 8, 12}},
			{"copyCheck16", k.copyCheck16, 2, []int{0, 2, 6, 14}},
			{"copyCheck32NT", k.copyCheck32NT, 4, []int{0}},
			{"copyCheck16NT", k.copyCheck16NT, 2, []int{0}},
		} {
			if c.fn == nil || seen[reflect.ValueOf(c.fn).Pointer()] {
				continue
			}
			seen[reflect.ValueOf(c.fn).Pointer()] = true
			checkCopyKernel(t, k.name+" "+c.name, c.fn, c.width, 3*256, c.dstOffs)
		}
	}
}

// alignedF32 returns n float32 starting on a 32-byte boundary.
func alignedF32(n int) []float32 {
	b := make([]float32, n+8)
	lo := int(-uintptr(unsafe.Pointer(&b[0]))&31) / 4
	return b[lo : lo+n]
}

// alignedU16 returns n uint16 starting on a 32-byte boundary.
func alignedU16(n int) []uint16 {
	b := make([]uint16, n+16)
	lo := int(-uintptr(unsafe.Pointer(&b[0]))&31) / 2
	return b[lo : lo+n]
}

// checkF16ToF32AllValues converts every binary16 value with the exact
// kernel fn, once for each nt: each result equals f16ToF32's bit for bit
// (checked against x448/float16 in TestF16ToF32Reference), except that a
// signalling NaN comes out quiet, and a block is flagged exactly when it
// holds an infinity or a NaN, wherever in the 64 values it is.
func checkF16ToF32AllValues(t *testing.T, name string, fn func(dst *float32, src *byte, n int, nt bool) bool, nts []bool) {
	t.Helper()
	const n = 1 << 16
	src := make([]byte, 2*n)
	for h := range n {
		binary.LittleEndian.PutUint16(src[2*h:], uint16(h))
	}
	for _, nt := range nts {
		dst := alignedF32(n)
		if !fn(&dst[0], &src[0], n, nt) {
			t.Fatalf("%s, nt %v: infinities and NaNs not flagged", name, nt)
		}
		for h := range n {
			want := math.Float32bits(f16ToF32(uint16(h)))
			if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
				want |= 0x00400000 // the quiet bit
			}
			if got := math.Float32bits(dst[h]); got != want {
				t.Fatalf("%s, nt %v: %#04x converted to %#08x, want %#08x", name, nt, h, got, want)
			}
		}
		for b := 0; b < n; b += 64 {
			want := false
			for h := b; h < b+64; h++ {
				want = want || h&0x7c00 == 0x7c00
			}
			if got := fn(&dst[b], &src[2*b], 64, nt); got != want {
				t.Fatalf("%s, nt %v: block at %#04x flagged %v, want %v", name, nt, b, got, want)
			}
		}
		blk := make([]byte, 2*128)
		for p := range 128 {
			for i := range 128 {
				binary.LittleEndian.PutUint16(blk[2*i:], uint16(finite16Patterns[(i+p)%len(finite16Patterns)]))
			}
			if fn(&dst[0], &blk[0], 128, nt) {
				t.Fatalf("%s, nt %v: finite values (phase %d) flagged", name, nt, p)
			}
			binary.LittleEndian.PutUint16(blk[2*p:], 0xfc00)
			if !fn(&dst[0], &blk[0], 128, nt) {
				t.Fatalf("%s, nt %v: -Inf at %d of 128 not flagged", name, nt, p)
			}
		}
	}
}

// f32Sweep returns the float32 patterns the conversion is checked on:
// every sign and exponent with the top mantissa bits and the low bits
// that decide a normal half's rounding; the four patterns around every
// midpoint between two adjacent finite binary16 values (the rounding
// boundaries, subnormal ones included; the midpoint above the largest
// half is 65520, where a value becomes infinite), with both signs; and
// every 4099th pattern.
func f32Sweep() []uint32 {
	var s []uint32
	for hi := range uint32(1 << 19) {
		for _, lo := range []uint32{0, 1, 0xfff, 0x1000, 0x1001, 0x1fff} {
			s = append(s, hi<<13|lo)
		}
	}
	for h := range uint16(0x7c00) {
		a, b := float64(f16ToF32(h)), float64(f16ToF32(h+1)) // h+1 = 0x7c00 is +Inf
		if h == 0x7bff {
			b = 65536
		}
		m := math.Float32bits(float32((a + b) / 2)) // exact: 12 significant bits
		for _, d := range []uint32{m - 2, m - 1, m, m + 1, m + 2} {
			s = append(s, d, d|0x80000000)
		}
	}
	for b := uint64(0); b < 1<<32; b += 4099 {
		s = append(s, uint32(b))
	}
	return s
}

// checkF32ToF16Sweep converts f32Sweep with the exact kernel fn (the
// chunks alternating between the nts) and compares every result with
// x448/float16's conversion, rounding to nearest even; a NaN must stay a
// NaN of its sign. A block is flagged exactly when a value is infinite or
// NaN, wherever in the 64 values it is.
func checkF32ToF16Sweep(t *testing.T, name string, fn func(dst *uint16, src *byte, n int, nt bool) bool, nts []bool) {
	t.Helper()
	s := f32Sweep()
	s = s[:len(s)&^63]
	src := make([]byte, 4*len(s))
	for i, b := range s {
		binary.LittleEndian.PutUint32(src[4*i:], b)
	}
	dst := alignedU16(len(s))
	const chunk = 64 << 10
	for lo := 0; lo < len(s); lo += chunk {
		hi := min(lo+chunk, len(s))
		nt := nts[lo/chunk%len(nts)]
		want := false
		for _, b := range s[lo:hi] {
			want = want || b&0x7f800000 == 0x7f800000
		}
		if got := fn(&dst[lo], &src[4*lo], hi-lo, nt); got != want {
			t.Fatalf("%s, nt %v: values %d..%d flagged %v, want %v", name, nt, lo, hi, got, want)
		}
	}
	for i, b := range s {
		got := dst[i]
		if b&0x7fffffff > 0x7f800000 {
			if got&0x7c00 != 0x7c00 || got&0x3ff == 0 || got>>15 != uint16(b>>31) {
				t.Fatalf("%s: NaN %#08x converted to %#04x, not a NaN of its sign", name, b, got)
			}
			continue
		}
		if want := float16.Fromfloat32(math.Float32frombits(b)).Bits(); got != want {
			t.Fatalf("%s: %#08x (%g) converted to %#04x, want %#04x", name, b, math.Float32frombits(b), got, want)
		}
	}
	blk := make([]byte, 4*128)
	for p := range 128 {
		for i := range 128 {
			binary.LittleEndian.PutUint32(blk[4*i:], finite32Patterns[(i+p)%len(finite32Patterns)])
		}
		for _, nt := range nts {
			if fn(&dst[0], &blk[0], 128, nt) {
				t.Fatalf("%s, nt %v: finite values (phase %d) flagged", name, nt, p)
			}
		}
		binary.LittleEndian.PutUint32(blk[4*p:], 0x7f800001)
		for _, nt := range nts {
			if !fn(&dst[0], &blk[0], 128, nt) {
				t.Fatalf("%s, nt %v: NaN at %d of 128 not flagged", name, nt, p)
			}
		}
	}
}

// checkCopyKernel checks a copy kernel of float32 (width 4) or binary16
// (width 2) values directly on n bytes, with the destination dstOff bytes
// after a 32-byte boundary for each of dstOffs and the source at an even
// and an odd address: the copy is exact, finite values (the extremes
// included, in every lane) are not flagged, and one value with an
// all-ones exponent at any position is.
func checkCopyKernel(t *testing.T, name string, fn func(dst, src *byte, n int) bool, width, n int, dstOffs []int) {
	t.Helper()
	finite, bad := finite32Patterns, bad32Patterns
	if width == 2 {
		finite, bad = finite16Patterns, bad16Patterns
	}
	put := func(b []byte, i int, v uint32) {
		if width == 4 {
			binary.LittleEndian.PutUint32(b[4*i:], v)
		} else {
			binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
		}
	}
	whole := unsafe.Slice((*byte)(unsafe.Pointer(&alignedF32(n/4 + 8)[0])), n+32)
	for _, dstOff := range dstOffs {
		dst := whole[dstOff : dstOff+n]
		for p := range n / width {
			for _, srcOff := range []int{0, 1} {
				src := make([]byte, n+1)[srcOff:][:n]
				for i := range n / width {
					put(src, i, finite[(i+p)%len(finite)])
				}
				clear(whole)
				if fn(&dst[0], &src[0], n) {
					t.Fatalf("%s, dst +%d: finite values (phase %d) flagged", name, dstOff, p)
				}
				if string(dst) != string(src) {
					t.Fatalf("%s, dst +%d: copy differs", name, dstOff)
				}
				put(src, p, bad[p%len(bad)])
				if !fn(&dst[0], &src[0], n) {
					t.Fatalf("%s, dst +%d: %#x at element %d not flagged", name, dstOff, bad[p%len(bad)], p)
				}
				if string(dst) != string(src) {
					t.Fatalf("%s, dst +%d: copy differs", name, dstOff)
				}
				for i, c := range whole {
					if (i < dstOff || i >= dstOff+n) && c != 0 {
						t.Fatalf("%s, dst +%d: byte %d outside the destination written", name, dstOff, i-dstOff)
					}
				}
			}
		}
	}
}

// BenchmarkKernelSets decodes one full-size key tensor (30x1x98x3072
// values; 36 MB as float32) with each of benchKernelSets (SSE2 and AVX2
// on amd64, the portable set and NEON on arm64) on the same machine, in
// each direction, values all normal with a zero every 1000 (which sends
// the block conversions of the SSE2 and portable sets to the per-value
// path):
//
//	go test -run '^$' -bench 'KernelSets' -benchtime 20x ./msgs/
func BenchmarkKernelSets(b *testing.B) {
	sets := benchKernelSets(b)
	const n = 30 * 98 * 3072
	f32 := make([]byte, 4*n)
	f16 := make([]byte, 2*n)
	for i := range n {
		x := float32(i%1000) * 0.001
		binary.LittleEndian.PutUint32(f32[4*i:], math.Float32bits(x))
		binary.LittleEndian.PutUint16(f16[2*i:], float16.Fromfloat32(x).Bits())
	}
	d32, d16 := make([]float32, n), make([]uint16, n)
	for i := range n {
		d32[i], d16[i] = 1, 1 // the pages are mapped before the timing starts
	}
	shape := []uint32{30, 1, 98, 3072}
	for _, op := range decodeOps {
		tn := Tensor{Shape: shape, DType: op.wire, Data: f32}
		if op.wire == DTypeFloat16 {
			tn.Data = f16
		}
		for _, k := range sets {
			b.Run(op.name+"/"+k.name, func(b *testing.B) {
				b.SetBytes(int64(len(tn.Data)))
				for b.Loop() {
					var i int
					if op.out16 {
						i, _, _ = tn.decodeF16Checked(d16, &k)
					} else {
						i, _, _ = tn.decodeF32Checked(d32, &k)
					}
					if i >= 0 {
						b.Fatal(i)
					}
				}
			})
		}
	}
}
