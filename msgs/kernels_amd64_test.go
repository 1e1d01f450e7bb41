package msgs

import (
	"encoding/binary"
	"math"
	"testing"
	"unsafe"

	"github.com/x448/float16"
)

// testKernelSets returns every kernel set this machine runs: the portable
// one, SSE2, and with AVX2 and F16C the host's set and the same with
// non-temporal stores at every size (so the aligned heads, the kernels and
// the tails are exercised at the short lengths of the tests).
func testKernelSets(t *testing.T) []kernels {
	sets := []kernels{goKernels, sse2Kernels}
	if !hasAVX2F16C() {
		t.Log("this CPU has no AVX2 and F16C: their kernels are not tested here")
		return sets
	}
	nt := avx2Kernels
	nt.name, nt.ntMin = "avx2-nt", 0
	return append(sets, avx2Kernels, nt)
}

func requireAVX2F16C(t *testing.T) {
	t.Helper()
	if !hasAVX2F16C() {
		t.Skip("this CPU has no AVX2 and F16C")
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

// TestF16ToF32F16CAllValues converts every binary16 value with VCVTPH2PS,
// with ordinary and with non-temporal stores: each result equals
// f16ToF32's bit for bit (checked against x448/float16 in
// TestF16ToF32Reference), except that a signalling NaN comes out quiet,
// and a block is flagged exactly when it holds an infinity or a NaN,
// wherever in the 64 values it is.
func TestF16ToF32F16CAllValues(t *testing.T) {
	requireAVX2F16C(t)
	const n = 1 << 16
	src := make([]byte, 2*n)
	for h := range n {
		binary.LittleEndian.PutUint16(src[2*h:], uint16(h))
	}
	for _, nt := range []bool{false, true} {
		dst := alignedF32(n)
		if !f16ToF32F16C(&dst[0], &src[0], n, nt) {
			t.Fatalf("nt %v: infinities and NaNs not flagged", nt)
		}
		for h := range n {
			want := math.Float32bits(f16ToF32(uint16(h)))
			if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
				want |= 0x00400000 // the quiet bit
			}
			if got := math.Float32bits(dst[h]); got != want {
				t.Fatalf("nt %v: %#04x converted to %#08x, want %#08x", nt, h, got, want)
			}
		}
		for b := 0; b < n; b += 64 {
			want := false
			for h := b; h < b+64; h++ {
				want = want || h&0x7c00 == 0x7c00
			}
			if got := f16ToF32F16C(&dst[b], &src[2*b], 64, nt); got != want {
				t.Fatalf("nt %v: block at %#04x flagged %v, want %v", nt, b, got, want)
			}
		}
		blk := make([]byte, 2*128)
		for p := range 128 {
			for i := range 128 {
				binary.LittleEndian.PutUint16(blk[2*i:], uint16(finite16Patterns[(i+p)%len(finite16Patterns)]))
			}
			if f16ToF32F16C(&dst[0], &blk[0], 128, nt) {
				t.Fatalf("nt %v: finite values (phase %d) flagged", nt, p)
			}
			binary.LittleEndian.PutUint16(blk[2*p:], 0xfc00)
			if !f16ToF32F16C(&dst[0], &blk[0], 128, nt) {
				t.Fatalf("nt %v: -Inf at %d of 128 not flagged", nt, p)
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

// TestF32ToF16F16CSweep converts f32Sweep with VCVTPS2PH (ordinary and
// non-temporal stores) and compares every result with x448/float16's
// conversion, rounding to nearest even; a NaN must stay a NaN of its
// sign. A block is flagged exactly when a value is infinite or NaN,
// wherever in the 64 values it is.
func TestF32ToF16F16CSweep(t *testing.T) {
	requireAVX2F16C(t)
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
		nt := lo/chunk%2 == 1
		want := false
		for _, b := range s[lo:hi] {
			want = want || b&0x7f800000 == 0x7f800000
		}
		if got := f32ToF16F16C(&dst[lo], &src[4*lo], hi-lo, nt); got != want {
			t.Fatalf("nt %v: values %d..%d flagged %v, want %v", nt, lo, hi, got, want)
		}
	}
	for i, b := range s {
		got := dst[i]
		if b&0x7fffffff > 0x7f800000 {
			if got&0x7c00 != 0x7c00 || got&0x3ff == 0 || got>>15 != uint16(b>>31) {
				t.Fatalf("NaN %#08x converted to %#04x, not a NaN of its sign", b, got)
			}
			continue
		}
		if want := float16.Fromfloat32(math.Float32frombits(b)).Bits(); got != want {
			t.Fatalf("%#08x (%g) converted to %#04x, want %#04x", b, math.Float32frombits(b), got, want)
		}
	}
	blk := make([]byte, 4*128)
	for p := range 128 {
		for i := range 128 {
			binary.LittleEndian.PutUint32(blk[4*i:], finite32Patterns[(i+p)%len(finite32Patterns)])
		}
		for _, nt := range []bool{false, true} {
			if f32ToF16F16C(&dst[0], &blk[0], 128, nt) {
				t.Fatalf("nt %v: finite values (phase %d) flagged", nt, p)
			}
		}
		binary.LittleEndian.PutUint32(blk[4*p:], 0x7f800001)
		for _, nt := range []bool{false, true} {
			if !f32ToF16F16C(&dst[0], &blk[0], 128, nt) {
				t.Fatalf("nt %v: NaN at %d of 128 not flagged", nt, p)
			}
		}
	}
}

// TestNonTemporalThreshold: with the host's set, a tensor whose output has
// ntMinBytes or more goes through ONE call of a non-temporal kernel (one
// store fence), and a smaller one through none, and both decode as the
// reference does, with a NaN near the end too.
func TestNonTemporalThreshold(t *testing.T) {
	requireAVX2F16C(t)
	for _, op := range decodeOps {
		for _, extra := range []int{-1, 0} {
			n := ntMinBytes/op.outSize + extra
			calls, ntCalls := 0, 0
			k := avx2Kernels
			count := func(nt bool) {
				calls++
				if nt {
					ntCalls++
				}
			}
			k.copyCheck32NT = func(dst, src *byte, n int) bool { count(true); return copyCheck32NT(dst, src, n) }
			k.copyCheck16NT = func(dst, src *byte, n int) bool { count(true); return copyCheck16NT(dst, src, n) }
			k.f16ToF32 = func(dst *float32, src *byte, n int, nt bool) bool { count(nt); return f16ToF32F16C(dst, src, n, nt) }
			k.f32ToF16 = func(dst *uint16, src *byte, n int, nt bool) bool { count(nt); return f32ToF16F16C(dst, src, n, nt) }
			dstOffs := []int{0, 32 - op.outSize}
			if extra < 0 {
				dstOffs = dstOffs[:1]
			}
			for _, dstOff := range dstOffs {
				vals := background(op.finite, n, extra+1)
				calls, ntCalls = 0, 0
				decodeInto(t, &k, op.wire, op.out16, vals, dstOff, 0)
				wantNT := 0
				if extra >= 0 {
					wantNT = 1
				}
				if ntCalls != wantNT || calls > 1 {
					t.Fatalf("%s, %d values, dst +%d: %d kernel calls, %d non-temporal; want at most 1 and %d",
						op.name, n, dstOff, calls, ntCalls, wantNT)
				}
				if extra >= 0 {
					vals[n-5] = op.bad[0]
					decodeInto(t, &k, op.wire, op.out16, vals, dstOff, 0)
				}
			}
		}
	}
}

// TestCopyCheckNT checks the non-temporal copy kernels directly: the copy
// is exact, finite values (the extremes included, in every lane) are not
// flagged, and one value with an all-ones exponent at any position of
// three 256-byte iterations is.
func TestCopyCheckNT(t *testing.T) {
	requireAVX2F16C(t)
	for _, k := range []struct {
		name        string
		fn          func(dst, src *byte, n int) bool
		width       int
		finite, bad []uint32
	}{
		{"copyCheck32NT", copyCheck32NT, 4, finite32Patterns, bad32Patterns},
		{"copyCheck16NT", copyCheck16NT, 2, finite16Patterns, bad16Patterns},
	} {
		const n = 3 * 256
		put := func(b []byte, i int, v uint32) {
			if k.width == 4 {
				binary.LittleEndian.PutUint32(b[4*i:], v)
			} else {
				binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
			}
		}
		dst := unsafe.Slice((*byte)(unsafe.Pointer(&alignedF32(n / 4)[0])), n)
		for p := range n / k.width {
			for _, srcOff := range []int{0, 1} {
				src := make([]byte, n+1)[srcOff:][:n]
				for i := range n / k.width {
					put(src, i, k.finite[(i+p)%len(k.finite)])
				}
				clear(dst)
				if k.fn(&dst[0], &src[0], n) {
					t.Fatalf("%s: finite values (phase %d) flagged", k.name, p)
				}
				if string(dst) != string(src) {
					t.Fatalf("%s: copy differs", k.name)
				}
				put(src, p, k.bad[p%len(k.bad)])
				if !k.fn(&dst[0], &src[0], n) {
					t.Fatalf("%s: %#x at element %d not flagged", k.name, k.bad[p%len(k.bad)], p)
				}
				if string(dst) != string(src) {
					t.Fatalf("%s: copy differs", k.name)
				}
			}
		}
	}
}

// BenchmarkKernelSets decodes one full-size key tensor (30x1x98x3072
// values; 36 MB as float32) with the SSE2 set and with the AVX2 set on
// the same machine, in each direction, values all normal with a zero
// every 1000 (which sends the SSE2 conversions' blocks to the per-value
// path):
//
//	go test -run '^$' -bench 'KernelSets' -benchtime 20x ./msgs/
func BenchmarkKernelSets(b *testing.B) {
	if !hasAVX2F16C() {
		b.Skip("this CPU has no AVX2 and F16C")
	}
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
		for _, k := range []kernels{sse2Kernels, avx2Kernels} {
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
