package qnnrt

import (
	"fmt"
	"syscall"
	"unsafe"

	"github.com/ebitengine/purego"
)

// ccall calls the C function fn with integer/pointer arguments and returns
// its integer result. Pointers converted to uintptr in the argument list of
// a ccall call are kept alive and not moved for the duration of the call.
//
//go:uintptrescapes
func ccall(fn uintptr, args ...uintptr) uint64 {
	r, _, _ := purego.SyscallN(fn, args...)
	return uint64(r)
}

// cmem is anonymous memory from mmap: outside the Go heap, never moved, safe
// to hand to C for as long as C likes. The zero value is empty.
type cmem struct {
	b []byte
}

// allocC maps n bytes (rounded up to whole pages, at least one) of zeroed
// read-write memory.
func allocC(n int) (cmem, error) {
	if n < 0 {
		return cmem{}, fmt.Errorf("qnnrt: negative allocation size %d", n)
	}
	if n == 0 {
		n = 1
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return cmem{}, fmt.Errorf("qnnrt: mmap %d bytes: %w", n, err)
	}
	return cmem{b: b[:n:n]}, nil
}

// ptr returns the address of byte off.
func (m cmem) ptr(off int) unsafe.Pointer { return unsafe.Pointer(&m.b[off]) }

// free unmaps the memory; freeing the zero value is a no-op.
func (m *cmem) free() error {
	if m.b == nil {
		return nil
	}
	b := m.b[:cap(m.b)]
	m.b = nil
	if err := syscall.Munmap(b); err != nil {
		return fmt.Errorf("qnnrt: munmap: %w", err)
	}
	return nil
}

// arena hands out aligned pieces of one cmem.
type arena struct {
	mem cmem
	off int
}

// alloc returns n zeroed bytes aligned to align (a power of two), or an
// error when the arena is exhausted (a sizing bug).
func (a *arena) alloc(n, align int) (unsafe.Pointer, error) {
	off := (a.off + align - 1) &^ (align - 1)
	if off+n > len(a.mem.b) || n <= 0 {
		return nil, fmt.Errorf("qnnrt: internal arena of %d bytes cannot hold %d more at %d", len(a.mem.b), n, off)
	}
	a.off = off + n
	return a.mem.ptr(off), nil
}

// cstring copies s and a terminating NUL into the arena.
func (a *arena) cstring(s string) (unsafe.Pointer, error) {
	p, err := a.alloc(len(s)+1, 1)
	if err != nil {
		return nil, err
	}
	copy(unsafe.Slice((*byte)(p), len(s)), s)
	return p, nil
}

// goString copies the NUL-terminated C string at p (at most maxCString
// bytes); a nil p gives "".
func goString(p unsafe.Pointer) string {
	if p == nil {
		return ""
	}
	n := 0
	for n < maxCString && *(*byte)(unsafe.Add(p, n)) != 0 {
		n++
	}
	return string(unsafe.Slice((*byte)(p), n))
}

// cstringBytes returns s as a NUL-terminated byte slice for calls that only
// read the string during the call.
func cstringBytes(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

// loadPtr reads the pointer stored at p+off.
func loadPtr(p unsafe.Pointer, off uintptr) unsafe.Pointer {
	return *(*unsafe.Pointer)(unsafe.Add(p, off))
}

// loadUintptr reads the pointer-sized word stored at p+off.
func loadUintptr(p unsafe.Pointer, off uintptr) uintptr {
	return *(*uintptr)(unsafe.Add(p, off))
}
