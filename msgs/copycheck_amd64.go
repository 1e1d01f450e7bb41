package msgs

// copyCheck32 copies n bytes, a multiple of 64, from src to dst and
// reports whether a NaN or infinite little-endian float32 is among them
// (SSE2, in copycheck_amd64.s).
//
//go:noescape
func copyCheck32(dst, src *byte, n int) bool

// copyCheck16 is copyCheck32 for little-endian binary16 values.
//
//go:noescape
func copyCheck16(dst, src *byte, n int) bool

// f16ToF32Normal converts n binary16 values (a multiple of 8) to float32
// as if all were normal, and reports whether one is not (SSE2).
//
//go:noescape
func f16ToF32Normal(dst *float32, src *uint16, n int) bool

// f32ToF16Normal converts n float32 values (a multiple of 8) to binary16
// as if every result were normal or an overflow, and reports whether one
// is not (SSE2).
//
//go:noescape
func f32ToF16Normal(dst *uint16, src *uint32, n int) bool
