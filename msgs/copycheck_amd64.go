package msgs

import "golang.org/x/sys/cpu"

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

// copyCheck32NT copies n bytes, a multiple of 256, from src to dst, which
// must be 32-byte aligned, with non-temporal stores, and reports whether a
// NaN or infinite little-endian float32 is among them (AVX2, in
// copycheck_avx2_amd64.s).
//
//go:noescape
func copyCheck32NT(dst, src *byte, n int) bool

// copyCheck16NT is copyCheck32NT for little-endian binary16 values.
//
//go:noescape
func copyCheck16NT(dst, src *byte, n int) bool

// f16ToF32F16C converts n little-endian binary16 values (a multiple of
// 64) to float32 exactly and reports whether one is infinite or NaN
// (F16C); with nt the stores are non-temporal and dst must be 32-byte
// aligned.
//
//go:noescape
func f16ToF32F16C(dst *float32, src *byte, n int, nt bool) bool

// f32ToF16F16C converts n little-endian float32 values (a multiple of 64)
// to binary16, rounding to nearest even, and reports whether one of the
// float32 values is infinite or NaN (F16C); with nt the stores are
// non-temporal and dst must be 32-byte aligned.
//
//go:noescape
func f32ToF16F16C(dst *uint16, src *byte, n int, nt bool) bool

// ntMinBytes is the output size from which the receive kernels store with
// non-temporal stores (AVX2): 4 MiB. Such stores bypass
// the caches, which pays off only for data that would not stay there for
// its consumer anyway: a 36 MB key or value tensor of the released
// contract is larger than any core's L2 and than the L3 a core shares on
// most machines, and the backend reads it after the other tensors have
// been written. A tensor under 4 MiB (the 2 MB text context) fits in L2 or
// L3, where the CPU backend's BindChunk reads it right after the decode;
// non-temporal stores would send it to DRAM and make that read a miss.
const ntMinBytes = 4 << 20

// sse2Kernels is the amd64 baseline: every amd64 CPU has SSE2.
var sse2Kernels = kernels{
	name:           "sse2",
	copyCheck32:    copyCheck32,
	copyCheck16:    copyCheck16,
	f16ToF32Normal: f16ToF32Normal,
	f32ToF16Normal: f32ToF16Normal,
}

// avx2Kernels adds the AVX2 copies with non-temporal stores and the F16C
// conversions to the SSE2 set, for the CPUs that have both extensions.
var avx2Kernels = kernels{
	name:           "avx2",
	copyCheck32:    copyCheck32,
	copyCheck16:    copyCheck16,
	f16ToF32Normal: f16ToF32Normal,
	f32ToF16Normal: f32ToF16Normal,
	copyCheck32NT:  copyCheck32NT,
	copyCheck16NT:  copyCheck16NT,
	f16ToF32:       f16ToF32F16C,
	f32ToF16:       f32ToF16F16C,
	ntMin:          ntMinBytes,
}

// hasAVX2F16C reports whether this CPU (and its OS, which must save the
// YMM registers; x/sys/cpu checks that for AVX2) runs avx2Kernels.
func hasAVX2F16C() bool { return cpu.X86.HasAVX2 && cpu.X86.HasF16C }

// hostKernels is the set the Tensor methods use. It is the one
// package-level variable of the receive path and it is written once, when
// the package is initialised, from the CPU's features: the choice is a
// fact of the machine, not state, and the tests pass every other set
// explicitly instead of changing this one.
var hostKernels = func() kernels {
	if hasAVX2F16C() {
		return avx2Kernels
	}
	return sse2Kernels
}()
