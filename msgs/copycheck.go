package msgs

import "unsafe"

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
