package msgs

import "math"

// copyCheck32 copies n bytes, a multiple of 64, from src to dst and
// reports whether a NaN or infinite little-endian float32 is among them
// (NEON, in copycheck_arm64.s).
//
//go:noescape
func copyCheck32(dst, src *byte, n int) bool

// copyCheck16 is copyCheck32 for little-endian binary16 values.
//
//go:noescape
func copyCheck16(dst, src *byte, n int) bool

// f16ToF32NEON converts n little-endian binary16 values (a multiple of
// 64) to float32 exactly with FCVTL and reports whether one is infinite
// or NaN. nt is ignored: there are no non-temporal stores.
//
//go:noescape
func f16ToF32NEON(dst *float32, src *byte, n int, nt bool) bool

// f32ToF16NEON converts n little-endian float32 values (a multiple of 64)
// to binary16 with FCVTN, rounding to nearest even, and reports whether
// one of the float32 values is infinite or NaN. nt is ignored.
//
//go:noescape
func f32ToF16NEON(dst *uint16, src *byte, n int, nt bool) bool

// neonKernels is the arm64 set: every ARMv8-A core has Advanced SIMD and
// its half <-> single conversions, so it needs no feature test. The copies
// are block kernels (a tensor is copied and checked 64 KiB at a time and
// a block is scanned for the index only when it holds a NaN or an
// infinity), the conversions exact ones over the whole tensor. ntMin is
// beyond any tensor: nothing is stored non-temporally. The Normal
// conversions are never used when the exact ones are there; they are the
// portable ones so that the set is complete.
var neonKernels = kernels{
	name:           "neon",
	copyCheck32:    copyCheck32,
	copyCheck16:    copyCheck16,
	f16ToF32Normal: f16ToF32NormalGo,
	f32ToF16Normal: f32ToF16NormalGo,
	f16ToF32:       f16ToF32NEON,
	f32ToF16:       f32ToF16NEON,
	ntMin:          math.MaxInt,
}

// hostKernels is the set the Tensor methods use. It is the one
// package-level variable of the receive path and is never written after
// initialisation (see copycheck_amd64.go).
var hostKernels = neonKernels
