//go:build !amd64 && !arm64

package msgs

// copyCheck32 copies n bytes, a multiple of 64, from src to dst and
// reports whether a NaN or infinite little-endian float32 is among them.
func copyCheck32(dst, src *byte, n int) bool { return copyCheckGo32(dst, src, n) }

// copyCheck16 is copyCheck32 for little-endian binary16 values.
func copyCheck16(dst, src *byte, n int) bool { return copyCheckGo16(dst, src, n) }

// hostKernels is the set the Tensor methods use: the portable one. It is
// never written after initialisation (see copycheck_amd64.go).
var hostKernels = goKernels
