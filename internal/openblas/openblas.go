// Package openblas binds the one OpenBLAS routine the CPU backend needs,
// sgemm, at run time through purego, so binaries stay free of cgo and fall
// back to gonum's pure-Go BLAS where no OpenBLAS is installed.
//
// Sgemm calls the Fortran entry sgemm_, which takes every argument by
// pointer, through purego.SyscallN: integer registers only (SyscallN cannot
// place float arguments such as cblas_sgemm's alpha and beta), and no
// reflection, so a call allocates nothing once the argument blocks are
// pooled. A row-major C = op(A)·op(B) is the column-major Cᵀ = op(B)ᵀ·op(A)ᵀ,
// the same operand swap cblas_sgemm makes, so results are bit for bit those
// of cblas_sgemm.
package openblas

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
	"gonum.org/v1/gonum/blas"
)

// defaultPaths are tried in order by Load when no path is given: Debian and
// Ubuntu's runtime library names, found through the loader path.
func defaultPaths() []string { return []string{"libopenblas.so.0", "libopenblas.so"} }

// maxFreeArgs is how many argument blocks a Lib keeps for reuse: more than
// the concurrent callers of any user here. A free list rather than a
// sync.Pool, which drops items at random under the race detector.
const maxFreeArgs = 64

// sgemmArgs holds sgemm_'s by-pointer arguments in heap memory, which the
// garbage collector does not move, so their addresses stay valid for the
// whole foreign call. a, b and c hold the matrices for the call: storing them
// in a heap object keeps them alive and makes them escape, so no caller's
// matrix lives on a goroutine stack that could move under a raw address.
type sgemmArgs struct {
	transA, transB byte
	m, n, k        int32
	lda, ldb, ldc  int32
	alpha, beta    float32
	a, b, c        *float32
	ptrs           [13]uintptr // SyscallN's arguments, passed as a slice
}

// Lib is a loaded OpenBLAS. Its Sgemm has the signature and argument
// contract of gonum's blas.Float32Level3.Sgemm.
type Lib struct {
	path       string
	sgemm      uintptr         // sgemm_
	args       chan *sgemmArgs // free argument blocks, one per concurrent call
	setThreads func(n int32)
	getThreads func() int32
	config     func() *byte
}

// Load opens OpenBLAS from path, or by its usual sonames (libopenblas.so.0,
// libopenblas.so) on the loader path when path is empty.
func Load(path string) (*Lib, error) {
	paths := defaultPaths()
	if path != "" {
		paths = []string{path}
	}
	var errs []error
	for _, p := range paths {
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		l := &Lib{path: p}
		l.args = make(chan *sgemmArgs, maxFreeArgs)
		if l.sgemm, err = purego.Dlsym(h, "sgemm_"); err != nil {
			return nil, fmt.Errorf("openblas: %s: %w", p, err)
		}
		for _, f := range []struct {
			name string
			fn   any
		}{
			{"openblas_set_num_threads", &l.setThreads},
			{"openblas_get_num_threads", &l.getThreads},
			{"openblas_get_config", &l.config},
		} {
			sym, err := purego.Dlsym(h, f.name)
			if err != nil {
				return nil, fmt.Errorf("openblas: %s: %w", p, err)
			}
			purego.RegisterFunc(f.fn, sym)
		}
		return l, nil
	}
	return nil, fmt.Errorf("openblas: not loadable: %w", errors.Join(errs...))
}

// String names the library and its build configuration.
func (l *Lib) String() string {
	cfg := ""
	if p := l.config(); p != nil {
		cfg = goString(p)
	}
	n, unit := l.getThreads(), "threads"
	if n == 1 {
		unit = "thread"
	}
	return fmt.Sprintf("%s (%s, %d %s)", cfg, l.path, n, unit)
}

func goString(p *byte) string {
	var b []byte
	for q := p; *q != 0; q = (*byte)(add(q, 1)) {
		b = append(b, *q)
	}
	return string(b)
}

// SetThreads sets OpenBLAS's thread count (process-wide, as OpenBLAS keeps it).
func (l *Lib) SetThreads(n int) { l.setThreads(int32(n)) }

// Threads reports OpenBLAS's thread count.
func (l *Lib) Threads() int { return int(l.getThreads()) }

// Sgemm computes C = alpha*op(A)*op(B) + beta*C for row-major matrices, with
// gonum's argument contract: it panics on arguments that violate it, which
// only a programming error can produce.
func (l *Lib) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if m == 0 || n == 0 {
		return
	}
	rowsA, colsA := m, k
	if tA != blas.NoTrans {
		rowsA, colsA = k, m
	}
	rowsB, colsB := k, n
	if tB != blas.NoTrans {
		rowsB, colsB = n, k
	}
	need := func(name string, s []float32, rows, cols, ld int) {
		if ld < max(1, cols) || (rows > 0 && len(s) < (rows-1)*ld+cols) {
			panic(fmt.Sprintf("openblas: Sgemm: %s too short (%d elements for %dx%d, ld %d)", name, len(s), rows, cols, ld))
		}
	}
	if k > 0 {
		need("a", a, rowsA, colsA, lda)
		need("b", b, rowsB, colsB, ldb)
	}
	need("c", c, m, n, ldc)
	var pa, pb *float32
	if k > 0 {
		pa, pb = &a[0], &b[0]
	}
	var p *sgemmArgs
	select {
	case p = <-l.args:
	default:
		p = new(sgemmArgs)
	}
	// Column-major Cᵀ (n×m, ldc) = op(B)ᵀ (n×k) · op(A)ᵀ (k×m).
	p.transA, p.transB = trans(tB), trans(tA)
	p.m, p.n, p.k = int32(n), int32(m), int32(k)
	p.lda, p.ldb, p.ldc = int32(ldb), int32(lda), int32(ldc)
	p.alpha, p.beta = alpha, beta
	p.a, p.b, p.c = pb, pa, &c[0]
	p.ptrs = [13]uintptr{
		uintptr(unsafe.Pointer(&p.transA)), uintptr(unsafe.Pointer(&p.transB)),
		uintptr(unsafe.Pointer(&p.m)), uintptr(unsafe.Pointer(&p.n)), uintptr(unsafe.Pointer(&p.k)),
		uintptr(unsafe.Pointer(&p.alpha)), uintptr(unsafe.Pointer(p.a)), uintptr(unsafe.Pointer(&p.lda)),
		uintptr(unsafe.Pointer(p.b)), uintptr(unsafe.Pointer(&p.ldb)),
		uintptr(unsafe.Pointer(&p.beta)), uintptr(unsafe.Pointer(p.c)), uintptr(unsafe.Pointer(&p.ldc)),
	}
	// A slice that already exists: SyscallN's variadic parameter then
	// allocates nothing.
	purego.SyscallN(l.sgemm, p.ptrs[:]...)
	runtime.KeepAlive(p)
	p.a, p.b, p.c = nil, nil, nil
	select {
	case l.args <- p:
	default: // more concurrent calls than maxFreeArgs: let the collector have it
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)
	runtime.KeepAlive(c)
}

func trans(t blas.Transpose) byte {
	if t == blas.NoTrans {
		return 'N'
	}
	return 'T'
}
