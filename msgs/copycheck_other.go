//go:build !amd64

package msgs

// f16ToF32Normal converts n binary16 values (a multiple of 8) to float32
// as if all were normal, and reports whether one is not.
func f16ToF32Normal(dst *float32, src *uint16, n int) bool { return f16ToF32NormalGo(dst, src, n) }

// f32ToF16Normal converts n float32 values (a multiple of 8) to binary16
// as if every result were normal or an overflow, and reports whether one
// is not.
func f32ToF16Normal(dst *uint16, src *uint32, n int) bool { return f32ToF16NormalGo(dst, src, n) }
