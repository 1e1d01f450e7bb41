//go:build !amd64

package msgs

import "testing"

// testKernelSets returns every kernel set this machine runs: the portable
// one.
func testKernelSets(*testing.T) []kernels { return []kernels{goKernels} }
