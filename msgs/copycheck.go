package msgs

import (
	"math"
	"unsafe"
)

// copyCheckGo32 is the portable copyCheck32: a copy, then the check of
// the copied bytes from the cache, two values per 64-bit word (dst is
// 8-byte aligned where it matters; see firstNonFinite32).
func copyCheckGo32(dst, src *byte, n int) bool {
	d := unsafe.Slice(dst, n)
	copy(d, unsafe.Slice(src, n))
	return firstNonFinite32(unsafe.Slice((*float32)(unsafe.Pointer(dst)), n/4)) >= 0
}

// copyCheckGo16 is the portable copyCheck16.
func copyCheckGo16(dst, src *byte, n int) bool {
	d := unsafe.Slice(dst, n)
	copy(d, unsafe.Slice(src, n))
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
