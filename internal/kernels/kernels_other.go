//go:build !amd64

package kernels

// Without vector kernels every function below leaves all the work to the
// portable loops of kernels.go.

func expVector(u []float64) []float64                                      { return u }
func softmaxExpVector(row []float32, mx float32, s *float64) int           { return 0 }
func geluVector(x []float32) []float32                                     { return x }
func laneSumsVector(x []float32, mu float64, out *[4]float64, sq bool) int { return 0 }
func normAffineVector(o, x []float32, mu, inv float64, a, c []float32, addOne bool) int {
	return 0
}
func mulScaleVector(x []float32, s float32, g []float32) int         { return 0 }
func ropeVector(row []float32, heads, dh int, cs, sn []float64) bool { return false }
