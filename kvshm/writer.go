package kvshm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/fastwam/actionexpert/internal/proc"
	"github.com/fastwam/actionexpert/msgs"
)

// Writer is the producer's side of a segment (the Go one; the Python one
// is fastwam_action_expert.producer.ShmPublisher): it creates the segment,
// fills one slot at a time, round robin, and removes the segment on Close.
// A Writer is not safe for concurrent use.
type Writer struct {
	path   string
	name   string
	layout Layout
	mem    []byte
	next   int
	open   int // the slot between Begin and Commit, or -1
}

// SegmentName is the name of the segment of producer pid: prefix.pid.
func SegmentName(prefix string, pid int) string { return prefix + "." + strconv.Itoa(pid) }

// Create removes the stale segments of prefix in dir (CleanStale), then
// creates dir/prefix.<pid> with the layout l, readable and writable by its
// owner only (mode 0600) or, with group, by its group too (0660), whatever
// the umask.
func Create(dir, prefix string, l Layout, group bool) (*Writer, error) {
	if err := checkName(prefix); err != nil {
		return nil, err
	}
	size, err := l.Size()
	if err != nil {
		return nil, err
	}
	if _, err := CleanStale(dir, prefix); err != nil {
		return nil, err
	}
	mode := uint32(0o600)
	if group {
		mode = 0o660
	}
	name := SegmentName(prefix, os.Getpid())
	path := filepath.Join(dir, name)
	fd, err := syscall.Open(path, syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, mode)
	if err != nil {
		return nil, fmt.Errorf("kvshm: create %s: %w", path, err)
	}
	defer syscall.Close(fd) // the mapping keeps the memory
	fail := func(err error) (*Writer, error) {
		_ = syscall.Unlink(path)
		return nil, err
	}
	if err := syscall.Fchmod(fd, mode); err != nil { // the umask may have taken bits
		return fail(fmt.Errorf("kvshm: chmod %s: %w", path, err))
	}
	if err := syscall.Ftruncate(fd, size); err != nil {
		return fail(fmt.Errorf("kvshm: size %s to %d bytes: %w", path, size, err))
	}
	mem, err := syscall.Mmap(fd, 0, int(size), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		return fail(fmt.Errorf("kvshm: map %s: %w", path, err))
	}
	putHeader(mem, l, os.Getpid())
	return &Writer{path: path, name: name, layout: l, mem: mem, open: -1}, nil
}

// Name is the segment's file name (KVHandoff.segment); Path its path.
func (w *Writer) Name() string { return w.name }

// Path is the segment's path.
func (w *Writer) Path() string { return w.path }

// Layout is the segment's geometry.
func (w *Writer) Layout() Layout { return w.layout }

func (w *Writer) gen(slot int) *uint64 {
	return (*uint64)(unsafe.Pointer(&w.mem[genOffset+8*slot]))
}

// Begin marks the next slot as being written (its generation odd) and
// returns its index and payload, for the caller to write the tensors into
// (Place lays them out). Commit ends the write.
func (w *Writer) Begin() (int, []byte, error) {
	if w.mem == nil {
		return 0, nil, errors.New("kvshm: writer closed")
	}
	if w.open >= 0 {
		return 0, nil, fmt.Errorf("kvshm: slot %d is still being written (Begin without Commit)", w.open)
	}
	s := w.next
	w.next = (w.next + 1) % w.layout.Slots
	g := w.gen(s)
	v := loadGen(g)
	// Odd before a byte of the payload changes. The atomic store is a
	// release on arm64 and a full fence (XCHG) on amd64; the payload's
	// plain stores that follow may not pass it on amd64 (TSO); on arm64
	// the StoreRelease-LoadAcquire pair below orders them.
	storeGen(g, v|1)
	_ = loadGen(g)
	w.open = s
	lo := HeaderSize + int64(s)*w.layout.SlotSize
	return s, w.mem[lo : lo+w.layout.SlotSize : lo+w.layout.SlotSize], nil
}

// Commit marks the slot Begin returned as written (its generation even and
// new) and returns that generation, for the descriptor.
func (w *Writer) Commit() (uint64, error) {
	if w.open < 0 {
		return 0, errors.New("kvshm: Commit without Begin")
	}
	g := w.gen(w.open)
	v := (loadGen(g) | 1) + 1 // a release: the payload is before it
	storeGen(g, v)
	w.open = -1
	return v, nil
}

// Place lays tensors of the given shapes and dtypes out in a slot, each at
// a TensorAlign offset, and returns their descriptors; an error when they
// do not fit in the slot size.
func (w *Writer) Place(dtypes []uint8, shapes ...[]uint32) ([]msgs.SharedTensor, error) {
	if len(dtypes) != len(shapes) {
		return nil, fmt.Errorf("kvshm: %d dtypes for %d shapes", len(dtypes), len(shapes))
	}
	out := make([]msgs.SharedTensor, len(shapes))
	var off uint64
	for i, sh := range shapes {
		t := msgs.SharedTensor{Shape: sh, DType: dtypes[i], Offset: uint64(alignUp(int64(off), TensorAlign))}
		size := uint64(2)
		if t.DType == msgs.DTypeFloat32 {
			size = 4
		}
		for _, d := range sh {
			size *= uint64(d)
		}
		t.Length = size
		if _, err := t.Bytes(); err != nil {
			return nil, err
		}
		off = t.Offset + t.Length
		if off > uint64(w.layout.SlotSize) {
			return nil, fmt.Errorf("kvshm: tensors of %d bytes do not fit in a slot of %d", off, w.layout.SlotSize)
		}
		out[i] = t
	}
	return out, nil
}

// Close unmaps and removes the segment.
func (w *Writer) Close() error {
	if w.mem == nil {
		return nil
	}
	err := syscall.Munmap(w.mem)
	w.mem = nil
	if rerr := os.Remove(w.path); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		err = errors.Join(err, rerr)
	}
	return err
}

// CleanStale removes the segments dir/prefix.<pid> owned by this user whose
// producer pid no longer runs, and returns their names. Files of other
// users, and names that do not end in a pid, are left alone.
func CleanStale(dir, prefix string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("kvshm: clean stale segments: %w", err)
	}
	var removed []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix+".")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		pid, err := strconv.Atoi(rest)
		if err != nil || pid <= 0 || strconv.Itoa(pid) != rest {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if !ok || int(st.Uid) != os.Getuid() || proc.Alive(pid) {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err == nil {
			removed = append(removed, e.Name())
		}
	}
	return removed, nil
}

// checkName refuses a segment name that is not one plain file name.
func checkName(name string) error {
	switch {
	case name == "" || name == "." || name == "..":
		return fmt.Errorf("kvshm: segment name %q, want a file name", name)
	case len(name) > 255:
		return fmt.Errorf("kvshm: segment name of %d bytes, want at most 255", len(name))
	case strings.ContainsAny(name, "/\x00"):
		return fmt.Errorf("kvshm: segment name %q has a '/' or NUL, want a file name in the segment folder", name)
	}
	return nil
}
