package openblas

import (
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/fastwam/actionexpert/internal/testenv"
)

// TestSgemmMatchesGonum checks every transpose combination, strided leading
// dimensions and beta accumulation against gonum's pure-Go Sgemm.
func TestSgemmMatchesGonum(t *testing.T) {
	l, err := Load("")
	if err != nil {
		testenv.Missing(t, "OpenBLAS not installed here (%v); the CPU backend falls back to gonum", err)
	}
	t.Log(l)
	r := rand.New(rand.NewPCG(1, 2))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(r.NormFloat64())
		}
		return s
	}
	const m, n, k, pad = 7, 13, 19, 3
	for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
		for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			ra, ca := m, k
			if tA == blas.Trans {
				ra, ca = k, m
			}
			rb, cb := k, n
			if tB == blas.Trans {
				rb, cb = n, k
			}
			a, b := fill(ra*(ca+pad)), fill(rb*(cb+pad))
			c0 := fill(m * (n + pad))
			want := append([]float32(nil), c0...)
			got := append([]float32(nil), c0...)
			gonum.Implementation{}.Sgemm(tA, tB, m, n, k, 0.5, a, ca+pad, b, cb+pad, 0.25, want, n+pad)
			l.Sgemm(tA, tB, m, n, k, 0.5, a, ca+pad, b, cb+pad, 0.25, got, n+pad)
			for i := range want {
				if d := want[i] - got[i]; d > 1e-4 || d < -1e-4 {
					t.Fatalf("tA=%v tB=%v: c[%d] = %v, gonum %v", tA, tB, i, got[i], want[i])
				}
			}
		}
	}
}

func TestLoadMissing(t *testing.T) {
	if _, err := Load("/nonexistent/libopenblas.so"); err == nil {
		t.Fatal("Load of a missing library succeeded")
	}
}
