//go:build !amd64

package kernels

// Without vector kernels AddSquares and ScaleSiLU run the portable loops.

func addSquaresVector(s []float64, x []float32, b float32) int { return 0 }
func scaleSiLUVector(o, x []float32, b float32, s []float32, g float32) int {
	return 0
}
