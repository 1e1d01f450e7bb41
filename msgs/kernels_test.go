package msgs

import (
	"encoding/binary"
	"fmt"
	"math"
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
// SSE2 block, the 256-byte AVX2 iteration, the 64-value F16C iteration,
// the 512-value conversion block), with every element-aligned head
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
// 64-value F16C ones) and more, with a later NaN
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
