//go:build !amd64 && !arm64

package msgs

import "testing"

// testKernelSets returns every kernel set this machine runs: the portable
// one.
func testKernelSets(*testing.T) []kernels { return []kernels{goKernels} }

// benchKernelSets returns the sets BenchmarkKernelSets compares: the
// portable one.
func benchKernelSets(*testing.B) []kernels { return []kernels{goKernels} }
