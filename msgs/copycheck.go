package msgs

import (
	"encoding/binary"
	"math"
	"unsafe"
)

// copyCheckGo32 is the portable copyCheck32: a copy, then the check of
// the copied bytes from the cache, two values per 64-bit word (dst is
// 8-byte aligned where it matters; see firstNonFinite32). On a
// big-endian host the bytes are read as the little-endian values they
// are, one at a time (the Tensor methods do not call it there).
func copyCheckGo32(dst, src *byte, n int) bool {
	d := unsafe.Slice(dst, n)
	copy(d, unsafe.Slice(src, n))
	if !hostLittleEndian() {
		return firstNonFiniteBytes32(d) >= 0
	}
	return firstNonFinite32(unsafe.Slice((*float32)(unsafe.Pointer(dst)), n/4)) >= 0
}

// copyCheckGo16 is the portable copyCheck16.
func copyCheckGo16(dst, src *byte, n int) bool {
	d := unsafe.Slice(dst, n)
	copy(d, unsafe.Slice(src, n))
	if !hostLittleEndian() {
		for i := 1; i < len(d); i += 2 {
			if d[i]&0x7c == 0x7c {
				return true
			}
		}
		return false
	}
	return firstNonFinite16(unsafe.Slice((*uint16)(unsafe.Pointer(dst)), n/2)) >= 0
}

// f16ToF32NormalGo is the portable f16ToF32Normal.
func f16ToF32NormalGo(dst *float32, src *uint16, n int) bool {
	d, s := unsafe.Slice(dst, n), unsafe.Slice(src, n)
	special := false
	for i, h := range s {
		e := h & 0x7c00
		special = special || e == 0 || e == 0x7c00
		d[i] = math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)<<13 + (127-15)<<23))
	}
	return special
}

// f32ToF16NormalGo is the portable f32ToF16Normal.
func f32ToF16NormalGo(dst *uint16, src *uint32, n int) bool {
	d, s := unsafe.Slice(dst, n), unsafe.Slice(src, n)
	special := false
	for i, b := range s {
		abs := b & 0x7fffffff
		special = special || abs-0x38800000 >= 0x47800000-0x38800000
		d[i] = uint16(b>>16)&0x8000 | uint16((abs-0x38000000+0xfff+(abs>>13)&1)>>13)
	}
	return special
}

// kernels is one set of receive kernels. The block kernels are always
// there (SSE2 on amd64, NEON on arm64, Go elsewhere). On amd64 the
// non-temporal copies and the exact conversions are nil unless the CPU
// has AVX2 and F16C; on arm64 the exact conversions are NEON ones and
// there are no non-temporal copies. The sets (goKernels; sse2Kernels and
// avx2Kernels on amd64, neonKernels on arm64) are package-level values
// that are never written: one is chosen for the machine when the package
// is initialised (hostKernels), and the tests run every set on the same
// inputs, changing only copies of them.
type kernels struct {
	name string

	// copyCheck32 and copyCheck16 copy n bytes, a multiple of 64, and
	// report whether a float32 / binary16 with an all-ones exponent is
	// among them.
	copyCheck32, copyCheck16 func(dst, src *byte, n int) bool
	// f16ToF32Normal and f32ToF16Normal convert n values, a multiple of 8,
	// as if every one were normal, and report whether one is not.
	f16ToF32Normal func(dst *float32, src *uint16, n int) bool
	f32ToF16Normal func(dst *uint16, src *uint32, n int) bool

	// copyCheck32NT and copyCheck16NT are copyCheck32 and copyCheck16
	// with non-temporal stores, for n a multiple of 256 and dst 32-byte
	// aligned; nil when absent.
	copyCheck32NT, copyCheck16NT func(dst, src *byte, n int) bool
	// f16ToF32 and f32ToF16 convert n values, a multiple of 64, exactly
	// (f32ToF16 rounding to nearest even) and report whether one of the
	// source values is infinite or NaN; with nt the stores are
	// non-temporal and dst must be 32-byte aligned. nil when absent.
	f16ToF32 func(dst *float32, src *byte, n int, nt bool) bool
	f32ToF16 func(dst *uint16, src *byte, n int, nt bool) bool
	// ntMin is the output size in bytes from which the non-temporal
	// kernels are used (ntMinBytes on amd64; the tests lower it).
	ntMin int
}

// goKernels is the portable set.
var goKernels = kernels{
	name:           "go",
	copyCheck32:    copyCheckGo32,
	copyCheck16:    copyCheckGo16,
	f16ToF32Normal: f16ToF32NormalGo,
	f32ToF16Normal: f32ToF16NormalGo,
}

// align32 returns the number of elements of size bytes from p to the next
// 32-byte boundary (p is element-aligned), at most n.
func align32(p unsafe.Pointer, size, n int) int {
	return min(n, int(-uintptr(p)&31)/size)
}

// copy32 copies the little-endian float32 bytes src into dst (of the
// same number of elements) and returns the index of the first NaN or
// infinity, or -1. A tensor of ntMin bytes or more goes through the
// non-temporal kernel in one call (one store fence) and only when that
// reports a non-finite value is dst scanned for its index; a smaller one
// is copied block by block, each block scanned while it is in cache when
// it holds one.
func (k *kernels) copy32(dst []float32, src []byte) int {
	out := f32Bytes(dst)
	src = src[:len(out)]
	if k.copyCheck32NT != nil && len(out) >= k.ntMin {
		head := 4 * align32(unsafe.Pointer(unsafe.SliceData(dst)), 4, len(dst))
		bad := k.copyChecked32(out[:head], src[:head])
		body := (len(out) - head) &^ 255
		if body > 0 {
			bad = k.copyCheck32NT(&out[head], &src[head], body) || bad
		}
		bad = k.copyChecked32(out[head+body:], src[head+body:]) || bad
		if !bad {
			return -1
		}
		return firstNonFinite32(dst)
	}
	for lo := 0; lo < len(out); lo += checkBlock {
		hi := min(lo+checkBlock, len(out))
		if !k.copyChecked32(out[lo:hi], src[lo:hi]) {
			continue
		}
		if i := firstNonFinite32(dst[lo/4 : hi/4]); i >= 0 {
			return lo/4 + i
		}
	}
	return -1
}

// copy16 is copy32 for binary16 values.
func (k *kernels) copy16(dst []uint16, src []byte) int {
	if len(dst) == 0 {
		return -1
	}
	out := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 2*len(dst))
	src = src[:len(out)]
	if k.copyCheck16NT != nil && len(out) >= k.ntMin {
		head := 2 * align32(unsafe.Pointer(unsafe.SliceData(dst)), 2, len(dst))
		bad := k.copyChecked16(out[:head], src[:head])
		body := (len(out) - head) &^ 255
		if body > 0 {
			bad = k.copyCheck16NT(&out[head], &src[head], body) || bad
		}
		bad = k.copyChecked16(out[head+body:], src[head+body:]) || bad
		if !bad {
			return -1
		}
		return firstNonFinite16(dst)
	}
	for lo := 0; lo < len(out); lo += checkBlock {
		hi := min(lo+checkBlock, len(out))
		if !k.copyChecked16(out[lo:hi], src[lo:hi]) {
			continue
		}
		if i := firstNonFinite16(dst[lo/2 : hi/2]); i >= 0 {
			return lo/2 + i
		}
	}
	return -1
}

// copyChecked32 copies src into dst (of the same length, a multiple of 4)
// and reports whether a NaN or infinite float32 may be among the bytes
// (true sends the caller to the exact scan).
func (k *kernels) copyChecked32(dst, src []byte) bool {
	whole := len(src) &^ 63
	bad := false
	if whole > 0 {
		bad = k.copyCheck32(unsafe.SliceData(dst), unsafe.SliceData(src), whole)
	}
	if whole < len(src) {
		copy(dst[whole:], src[whole:])
		bad = bad || firstNonFiniteBytes32(src[whole:]) >= 0
	}
	return bad
}

// copyChecked16 is copyChecked32 for binary16 values.
func (k *kernels) copyChecked16(dst, src []byte) bool {
	whole := len(src) &^ 63
	bad := false
	if whole > 0 {
		bad = k.copyCheck16(unsafe.SliceData(dst), unsafe.SliceData(src), whole)
	}
	for i := whole; i+1 < len(src); i += 2 {
		dst[i], dst[i+1] = src[i], src[i+1]
		bad = bad || src[i+1]&0x7c == 0x7c
	}
	return bad
}

// f16ToF32 converts the little-endian binary16 bytes src into dst (of the
// same number of elements) and returns the index of the first NaN or
// infinity, or -1. With F16C or NEON the whole tensor is one kernel call (with
// non-temporal stores from ntMin bytes of output on, the unaligned head
// and the tail in Go) and only when it reports a non-finite value is dst
// scanned for the index: a binary16 value converts to a non-finite
// float32 exactly when it is non-finite itself. Without them, blocks of
// normal values are converted without a branch per value and a block with
// another one is converted again value by value.
func (k *kernels) f16ToF32Checked(dst []float32, src []byte) int {
	src = src[:2*len(dst)]
	if k.f16ToF32 != nil {
		nt := 4*len(dst) >= k.ntMin
		head := 0
		if nt {
			head = align32(unsafe.Pointer(unsafe.SliceData(dst)), 4, len(dst))
		}
		bad := f16BytesToF32(dst[:head], src[:2*head])
		body := (len(dst) - head) &^ 63
		if body > 0 {
			bad = k.f16ToF32(&dst[head], &src[2*head], body, nt) || bad
		}
		bad = f16BytesToF32(dst[head+body:], src[2*(head+body):]) || bad
		if !bad {
			return -1
		}
		return firstNonFinite32(dst)
	}
	h, ok := halves(src)
	if !ok {
		// A big-endian host or an odd payload address: value by value
		// from the bytes, then the index from dst.
		if !f16BytesToF32(dst, src) {
			return -1
		}
		return firstNonFinite32(dst)
	}
	const block = 512
	for lo := 0; lo+block <= len(h); lo += block {
		if !k.f16ToF32Normal(&dst[lo], &h[lo], block) {
			continue
		}
		if i := f16ToF32Scalar(dst[lo:lo+block], h[lo:lo+block]); i >= 0 {
			return lo + i
		}
	}
	tail := len(h) / block * block
	if i := f16ToF32Scalar(dst[tail:], h[tail:]); i >= 0 {
		return tail + i
	}
	return -1
}

// f16BytesToF32 converts the little-endian binary16 bytes src into dst
// (of half their number) and reports whether one is NaN or infinite.
func f16BytesToF32(dst []float32, src []byte) bool {
	bad := false
	for i := range dst {
		h := binary.LittleEndian.Uint16(src[2*i:])
		bad = bad || h&0x7c00 == 0x7c00
		dst[i] = f16ToF32(h)
	}
	return bad
}

// f16ToF32Scalar converts src into dst (of its length) and returns the
// index of the first NaN or infinity, or -1.
func f16ToF32Scalar(dst []float32, src []uint16) int {
	dst = dst[:len(src)]
	for i, h := range src {
		if e := h & 0x7c00; e != 0 && e != 0x7c00 {
			// Normal: rebias the exponent from 15 to 127.
			dst[i] = math.Float32frombits(uint32(h&0x8000)<<16 | (uint32(h&0x7fff)<<13 + (127-15)<<23))
			continue
		}
		dst[i] = f16ToF32(h)
		if h&0x7c00 == 0x7c00 {
			return i
		}
	}
	return -1
}

// f32ToF16Checked converts the little-endian float32 bytes src into dst
// (of the same number of elements), rounding to nearest even, and returns
// the index of the first NaN or infinity among the float32 values, or -1.
// With F16C or NEON the whole tensor is one kernel call, as in f16ToF32Checked,
// and only when it reports a non-finite value is src scanned for the
// index (dst cannot tell: a finite float32 beyond the binary16 range
// becomes an infinity). Without them, blocks whose results are all
// normal convert without a branch per value and a block with another one
// is converted again value by value.
func (k *kernels) f32ToF16Checked(dst []uint16, src []byte) int {
	src = src[:4*len(dst)]
	if k.f32ToF16 != nil {
		nt := 2*len(dst) >= k.ntMin
		head := 0
		if nt {
			head = align32(unsafe.Pointer(unsafe.SliceData(dst)), 2, len(dst))
		}
		bad := f32BytesToF16(dst[:head], src[:4*head])
		body := (len(dst) - head) &^ 63
		if body > 0 {
			bad = k.f32ToF16(&dst[head], &src[4*head], body, nt) || bad
		}
		bad = f32BytesToF16(dst[head+body:], src[4*(head+body):]) || bad
		if !bad {
			return -1
		}
		if uintptr(unsafe.Pointer(unsafe.SliceData(src)))%4 == 0 {
			return firstNonFinite32(unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(src))), len(dst)))
		}
		return firstNonFiniteBytes32(src)
	}
	if len(dst) == 0 {
		return -1
	}
	if uintptr(unsafe.Pointer(unsafe.SliceData(src)))%4 != 0 {
		for i := range dst {
			b := binary.LittleEndian.Uint32(src[4*i:])
			if b&0x7f800000 == 0x7f800000 {
				return i
			}
			dst[i] = f32BitsToF16(b)
		}
		return -1
	}
	w := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(src))), len(dst))
	const block = 512
	for lo := 0; lo+block <= len(w); lo += block {
		if !k.f32ToF16Normal(&dst[lo], &w[lo], block) {
			continue
		}
		if i := f32ToF16Scalar(dst[lo:lo+block], w[lo:lo+block]); i >= 0 {
			return lo + i
		}
	}
	tail := len(w) / block * block
	if i := f32ToF16Scalar(dst[tail:], w[tail:]); i >= 0 {
		return tail + i
	}
	return -1
}

// f32BytesToF16 converts the little-endian float32 bytes src into dst
// (of a quarter their number) and reports whether one is NaN or infinite.
func f32BytesToF16(dst []uint16, src []byte) bool {
	bad := false
	for i := range dst {
		b := binary.LittleEndian.Uint32(src[4*i:])
		bad = bad || b&0x7f800000 == 0x7f800000
		dst[i] = f32BitsToF16(b)
	}
	return bad
}

// f32ToF16Scalar converts the float32 bits of src into dst (of its
// length) and returns the index of the first NaN or infinity, or -1.
func f32ToF16Scalar(dst []uint16, src []uint32) int {
	dst = dst[:len(src)]
	for i, b := range src {
		if b&0x7f800000 == 0x7f800000 {
			return i
		}
		dst[i] = f32BitsToF16(b)
	}
	return -1
}
