//go:build !amd64

package msgs

// copyCheck32 copies n bytes, a multiple of 64, from src to dst and
// reports whether a NaN or infinite little-endian float32 is among them.
func copyCheck32(dst, src *byte, n int) bool { return copyCheckGo32(dst, src, n) }

// copyCheck16 is copyCheck32 for little-endian binary16 values.
func copyCheck16(dst, src *byte, n int) bool { return copyCheckGo16(dst, src, n) }

// f16ToF32Normal converts n binary16 values (a multiple of 8) to float32
// as if all were normal, and reports whether one is not.
func f16ToF32Normal(dst *float32, src *uint16, n int) bool { return f16ToF32NormalGo(dst, src, n) }

// f32ToF16Normal converts n float32 values (a multiple of 8) to binary16
// as if every result were normal or an overflow, and reports whether one
// is not.
func f32ToF16Normal(dst *uint16, src *uint32, n int) bool { return f32ToF16NormalGo(dst, src, n) }

// hostKernels is the set the Tensor methods use: the portable one. It is
// never written after initialisation (see copycheck_amd64.go).
var hostKernels = goKernels
