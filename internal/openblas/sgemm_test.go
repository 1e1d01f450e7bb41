package openblas

import (
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/ebitengine/purego"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/fastwam/actionexpert/internal/testenv"
)

// cblasSgemm binds cblas_sgemm from the library l loaded, the reference
// Sgemm must equal bit for bit.
func cblasSgemm(t *testing.T, l *Lib) func(order, tA, tB, m, n, k int32, alpha float32, a *float32, lda int32, b *float32, ldb int32, beta float32, c *float32, ldc int32) {
	t.Helper()
	h, err := purego.Dlopen(l.path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		t.Fatal(err)
	}
	sym, err := purego.Dlsym(h, "cblas_sgemm")
	if err != nil {
		t.Fatal(err)
	}
	var f func(order, tA, tB, m, n, k int32, alpha float32, a *float32, lda int32, b *float32, ldb int32, beta float32, c *float32, ldc int32)
	purego.RegisterFunc(&f, sym)
	return f
}

func load(t *testing.T) *Lib {
	t.Helper()
	l, err := Load("")
	if err != nil {
		testenv.Missing(t, "OpenBLAS not installed here (%v); the CPU backend falls back to gonum", err)
	}
	return l
}

// TestSgemmMatchesCBLAS checks Sgemm (sgemm_) against cblas_sgemm bit for
// bit, and against gonum within rounding, on many shapes (from 1 to past
// OpenBLAS's blocking sizes), all transposes, padded leading dimensions and
// several alpha and beta.
func TestSgemmMatchesCBLAS(t *testing.T) {
	l := load(t)
	ref := cblasSgemm(t, l)
	r := rand.New(rand.NewPCG(3, 4))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(r.NormFloat64())
		}
		return s
	}
	shapes := [][3]int{{1, 1, 1}, {1, 7, 3}, {5, 1, 9}, {7, 13, 19}, {33, 65, 17}, {64, 64, 64}, {130, 97, 300}, {257, 31, 520}, {16, 700, 40}}
	scal := [][2]float32{{1, 0}, {0.5, 0.25}, {-2, 1}}
	for si, sh := range shapes {
		m, n, k := sh[0], sh[1], sh[2]
		for _, tA := range []blas.Transpose{blas.NoTrans, blas.Trans} {
			for _, tB := range []blas.Transpose{blas.NoTrans, blas.Trans} {
				pad := si % 4 // 0 (ld = cols) to 3
				ra, ca := m, k
				if tA == blas.Trans {
					ra, ca = k, m
				}
				rb, cb := k, n
				if tB == blas.Trans {
					rb, cb = n, k
				}
				lda, ldb, ldc := ca+pad, cb+pad+1, n+pad
				a, b := fill(ra*lda), fill(rb*ldb)
				c0 := fill(m * ldc)
				sc := scal[si%len(scal)]
				want := append([]float32(nil), c0...)
				got := append([]float32(nil), c0...)
				gon := append([]float32(nil), c0...)
				ref(cblasRowMajor, ctrans(tA), ctrans(tB), int32(m), int32(n), int32(k), sc[0], &a[0], int32(lda), &b[0], int32(ldb), sc[1], &want[0], int32(ldc))
				l.Sgemm(tA, tB, m, n, k, sc[0], a, lda, b, ldb, sc[1], got, ldc)
				gonum.Implementation{}.Sgemm(tA, tB, m, n, k, sc[0], a, lda, b, ldb, sc[1], gon, ldc)
				for i := range want {
					if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
						t.Fatalf("%dx%dx%d tA=%v tB=%v: c[%d] = %v, cblas_sgemm %v", m, n, k, tA, tB, i, got[i], want[i])
					}
					if d := float64(gon[i] - got[i]); math.Abs(d) > 1e-5*float64(k)*4 {
						t.Fatalf("%dx%dx%d tA=%v tB=%v: c[%d] = %v, gonum %v", m, n, k, tA, tB, i, got[i], gon[i])
					}
				}
			}
		}
	}
}

// TestSgemmConcurrent runs Sgemm from several goroutines at once (as the CPU
// backend's workers do) and checks each against a serial result.
func TestSgemmConcurrent(t *testing.T) {
	l := load(t)
	const m, n, k, g = 24, 40, 56, 8
	r := rand.New(rand.NewPCG(5, 6))
	a, b := make([]float32, m*k), make([]float32, n*k)
	for i := range a {
		a[i] = float32(r.NormFloat64())
	}
	for i := range b {
		b[i] = float32(r.NormFloat64())
	}
	want := make([]float32, m*n)
	l.Sgemm(blas.NoTrans, blas.Trans, m, n, k, 1, a, k, b, k, 0, want, n)
	var wg sync.WaitGroup
	errs := make([]int, g)
	for w := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := make([]float32, m*n)
			for range 50 {
				alpha := float32(w + 1)
				l.Sgemm(blas.NoTrans, blas.Trans, m, n, k, alpha, a, k, b, k, 0, c, n)
				for i := range c {
					if c[i] != alpha*want[i] {
						errs[w]++
					}
				}
			}
		}()
	}
	wg.Wait()
	for w, e := range errs {
		if e != 0 {
			t.Errorf("goroutine %d: %d wrong elements", w, e)
		}
	}
}

// TestSgemmAllocs checks that a call allocates nothing. (Under the race
// detector purego's sync.Pool drops items at random; AllocsPerRun's
// average over 100 calls rounds those down. .ci/run also runs it without
// -race.)
func TestSgemmAllocs(t *testing.T) {
	l := load(t)
	const m, n, k = 8, 9, 10
	a, b, c := make([]float32, m*k), make([]float32, k*n), make([]float32, m*n)
	if got := testing.AllocsPerRun(100, func() {
		l.Sgemm(blas.NoTrans, blas.NoTrans, m, n, k, 1, a, k, b, n, 0, c, n)
	}); got != 0 {
		t.Errorf("Sgemm allocates %v times a call, want 0", got)
	}
}

// CBLAS enum values, for the reference call.
const (
	cblasRowMajor = 101
	cblasNoTrans  = 111
	cblasTrans    = 112
)

func ctrans(t blas.Transpose) int32 {
	if t == blas.NoTrans {
		return cblasNoTrans
	}
	return cblasTrans
}
