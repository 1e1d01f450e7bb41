package msgs

import (
	"testing"
)

// testKernelSets returns every kernel set this machine runs: the portable
// one, SSE2, and with AVX2 and F16C the host's set and the same with
// non-temporal stores at every size (so the aligned heads, the kernels and
// the tails are exercised at the short lengths of the tests).
func testKernelSets(t *testing.T) []kernels {
	sets := []kernels{goKernels, sse2Kernels}
	if !hasAVX2F16C() {
		t.Log("this CPU has no AVX2 and F16C: their kernels are not tested here")
		return sets
	}
	nt := avx2Kernels
	nt.name, nt.ntMin = "avx2-nt", 0
	return append(sets, avx2Kernels, nt)
}

func requireAVX2F16C(t *testing.T) {
	t.Helper()
	if !hasAVX2F16C() {
		t.Skip("this CPU has no AVX2 and F16C")
	}
}

// TestNonTemporalThreshold: with the host's set, a tensor whose output has
// ntMinBytes or more goes through ONE call of a non-temporal kernel (one
// store fence), and a smaller one through none, and both decode as the
// reference does, with a NaN near the end too.
func TestNonTemporalThreshold(t *testing.T) {
	requireAVX2F16C(t)
	for _, op := range decodeOps {
		for _, extra := range []int{-1, 0} {
			n := ntMinBytes/op.outSize + extra
			calls, ntCalls := 0, 0
			k := avx2Kernels
			count := func(nt bool) {
				calls++
				if nt {
					ntCalls++
				}
			}
			k.copyCheck32NT = func(dst, src *byte, n int) bool { count(true); return copyCheck32NT(dst, src, n) }
			k.copyCheck16NT = func(dst, src *byte, n int) bool { count(true); return copyCheck16NT(dst, src, n) }
			k.f16ToF32 = func(dst *float32, src *byte, n int, nt bool) bool { count(nt); return f16ToF32F16C(dst, src, n, nt) }
			k.f32ToF16 = func(dst *uint16, src *byte, n int, nt bool) bool { count(nt); return f32ToF16F16C(dst, src, n, nt) }
			dstOffs := []int{0, 32 - op.outSize}
			if extra < 0 {
				dstOffs = dstOffs[:1]
			}
			for _, dstOff := range dstOffs {
				vals := background(op.finite, n, extra+1)
				calls, ntCalls = 0, 0
				decodeInto(t, &k, op.wire, op.out16, vals, dstOff, 0)
				wantNT := 0
				if extra >= 0 {
					wantNT = 1
				}
				if ntCalls != wantNT || calls > 1 {
					t.Fatalf("%s, %d values, dst +%d: %d kernel calls, %d non-temporal; want at most 1 and %d",
						op.name, n, dstOff, calls, ntCalls, wantNT)
				}
				if extra >= 0 {
					vals[n-5] = op.bad[0]
					decodeInto(t, &k, op.wire, op.out16, vals, dstOff, 0)
				}
			}
		}
	}
}

// benchKernelSets returns the sets BenchmarkKernelSets compares: SSE2 and
// AVX2.
func benchKernelSets(b *testing.B) []kernels {
	if !hasAVX2F16C() {
		b.Skip("this CPU has no AVX2 and F16C")
	}
	return []kernels{sse2Kernels, avx2Kernels}
}
