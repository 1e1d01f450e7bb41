package msgs

import "testing"

// testKernelSets returns every kernel set this machine runs: the portable
// one and NEON.
func testKernelSets(*testing.T) []kernels { return []kernels{goKernels, neonKernels} }

// benchKernelSets returns the sets BenchmarkKernelSets compares: the
// portable one and NEON.
func benchKernelSets(*testing.B) []kernels { return []kernels{goKernels, neonKernels} }
