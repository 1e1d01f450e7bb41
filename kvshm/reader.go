package kvshm

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"github.com/fastwam/actionexpert/msgs"
)

// Errors a Reader's and a Lease's methods wrap, so that the node can count
// them by kind.
var (
	// ErrRefused: the segment is not one the node may trust (owner, mode,
	// a symlink, not a regular file).
	ErrRefused = errors.New("segment refused")
	// ErrDescriptor: the descriptor does not fit the segment it names.
	ErrDescriptor = errors.New("descriptor refused")
	// ErrStale: the slot's generation is not the descriptor's any more
	// (being rewritten, or rewritten already): the input is gone.
	ErrStale = errors.New("slot overwritten before it was read")
	// ErrTorn: the slot's generation changed during the copy.
	ErrTorn = errors.New("slot overwritten during the copy")
	// ErrFault: reading the mapping faulted, or would have: the file was
	// truncated under it.
	ErrFault = errors.New("segment truncated under the mapping")
)

// MaxMapped bounds the segments a Reader has mapped at a time: the current
// one and those replaced while leases still held them. A new segment
// beyond it is refused until leases are released.
const MaxMapped = 4

// Policy is what a Reader trusts.
type Policy struct {
	// Dir is the folder the segments are in (/dev/shm).
	Dir string
	// AllowedUIDs are the owners a segment may have; empty allows the
	// reader's own uid only.
	AllowedUIDs []int
	// MaxSlotSize bounds the slot size a segment's header may declare,
	// and so the size of a segment the Reader maps: the most a slot needs
	// to hold tensors the reader can accept (the node: its contract's keys
	// and values in float32, SlotSizeFor). 0: only the format's bound.
	MaxSlotSize int64
}

// Reader maps the segment descriptors name, read-only, once per segment
// file, and checks every descriptor against the mapping. It keeps one
// current segment: a descriptor that names another file (a restarted
// producer's, under a new name or the same) maps that one, and the old
// mapping is unmapped and its file descriptor closed as soon as no Lease
// holds it; at most MaxMapped are mapped at a time. Its methods are safe
// for concurrent use.
type Reader struct {
	pol  Policy
	mu   sync.Mutex
	cur  *mapping // the current segment, or nil
	live int      // mappings not unmapped yet, cur included (and opens under way)
}

type mapping struct {
	name     string
	fd       int
	mem      []byte
	dev, ino uint64
	size     int64
	layout   Layout
	refs     int  // leases holding it, under Reader.mu
	retired  bool // replaced or closed: unmapped at refs 0
}

// NewReader returns a Reader with the policy p.
func NewReader(p Policy) *Reader {
	if len(p.AllowedUIDs) == 0 {
		p.AllowedUIDs = []int{os.Getuid()}
	}
	return &Reader{pol: p}
}

// Lease is one descriptor's slot, checked and held mapped until Release.
// Keys and Values view the mapping: read them only between Check and
// Intact, inside Guard.
type Lease struct {
	Keys, Values []byte
	r            *Reader
	m            *mapping
	gen          *uint64
	want         uint64
	fence        uint32
}

// Acquire checks d against its segment (mapping it when new) and fills l.
// Everything in d is hostile: the segment name, slot, generation, each
// tensor's dtype, shape, offset and length are checked against the
// mapping before a view is made, and the slot's generation must be d's.
func (r *Reader) Acquire(d *msgs.KVHandoff, l *Lease) error {
	l.Release()
	if err := checkName(d.Segment); err != nil {
		return fmt.Errorf("%w: %w", err, ErrDescriptor)
	}
	m, err := r.mapped(d.Segment)
	if err != nil {
		return err
	}
	lay := m.layout
	if int64(d.Slot) >= int64(lay.Slots) {
		r.release(m)
		return fmt.Errorf("kvshm: slot %d, the segment %s has %d: %w", d.Slot, d.Segment, lay.Slots, ErrDescriptor)
	}
	if d.Generation == 0 || d.Generation&1 != 0 {
		r.release(m)
		return fmt.Errorf("kvshm: generation %d, want an even one above 0 (a written slot): %w", d.Generation, ErrDescriptor)
	}
	base := uint64(HeaderSize) + uint64(d.Slot)*uint64(lay.SlotSize)
	views := [2][]byte{}
	for i, t := range [2]*msgs.SharedTensor{&d.Keys, &d.Values} {
		field := [2]string{"keys", "values"}[i]
		if _, err := t.Bytes(); err != nil {
			r.release(m)
			return fmt.Errorf("kvshm: %s: %w: %w", field, err, ErrDescriptor)
		}
		if t.Offset%TensorAlign != 0 || t.Offset > uint64(lay.SlotSize) || t.Length > uint64(lay.SlotSize)-t.Offset {
			r.release(m)
			return fmt.Errorf("kvshm: %s at offset %d, %d bytes: outside the slot of %d bytes or not %d-aligned: %w",
				field, t.Offset, t.Length, lay.SlotSize, TensorAlign, ErrDescriptor)
		}
		views[i] = m.mem[base+t.Offset : base+t.Offset+t.Length : base+t.Offset+t.Length]
	}
	k, v := &d.Keys, &d.Values
	if k.Length > 0 && v.Length > 0 && k.Offset < v.Offset+v.Length && v.Offset < k.Offset+k.Length {
		r.release(m)
		return fmt.Errorf("kvshm: keys [%d, %d) and values [%d, %d) overlap: %w",
			k.Offset, k.Offset+k.Length, v.Offset, v.Offset+v.Length, ErrDescriptor)
	}
	*l = Lease{Keys: views[0], Values: views[1], r: r, m: m,
		gen: (*uint64)(unsafe.Pointer(&m.mem[genOffset+8*int(d.Slot)])), want: d.Generation}
	g, err := loadGenGuarded(l.gen)
	if err != nil { // truncated since mapped checked its size
		l.Release()
		r.retire(m)
		return fmt.Errorf("kvshm: segment %s: %w", d.Segment, err)
	}
	if g != d.Generation {
		l.Release()
		return fmt.Errorf("kvshm: slot %d of %s is at generation %d, the descriptor says %d: %w", d.Slot, d.Segment, g, d.Generation, ErrStale)
	}
	return nil
}

// mapped returns the current mapping of name, one reference taken: the
// cached one while the name is still the same file and that file still
// passes the checks it was mapped with, else a new one, which replaces
// the current.
func (r *Reader) mapped(name string) (*mapping, error) {
	path := filepath.Join(r.pol.Dir, name)
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return nil, fmt.Errorf("kvshm: segment %s: %w: %w", path, err, ErrRefused)
	}
	r.mu.Lock()
	if m := r.cur; m != nil && m.name == name && m.dev == uint64(st.Dev) && m.ino == st.Ino {
		if err := r.recheck(m, path); err != nil {
			r.retireLocked(m)
			r.mu.Unlock()
			return nil, err
		}
		m.refs++
		r.mu.Unlock()
		return m, nil
	}
	if r.live >= MaxMapped {
		r.mu.Unlock()
		return nil, fmt.Errorf("kvshm: segment %s: %d segments are still mapped, held by pending inputs (at most %d): %w",
			path, r.live, MaxMapped, ErrRefused)
	}
	r.live++ // the open's place
	r.mu.Unlock()
	m, err := r.open(path, name)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.live--
		return nil, err
	}
	if r.cur != nil {
		r.retireLocked(r.cur)
	}
	r.cur = m
	m.refs++
	return m, nil
}

// trust checks a segment's file status against the policy: a regular
// file, owned by an allowed uid, with no access for others.
func (r *Reader) trust(path string, st *syscall.Stat_t) error {
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return fmt.Errorf("kvshm: segment %s is not a regular file (mode %o): %w", path, st.Mode, ErrRefused)
	}
	if !slices.Contains(r.pol.AllowedUIDs, int(st.Uid)) {
		return fmt.Errorf("kvshm: segment %s is owned by uid %d, allowed: %v: %w", path, st.Uid, r.pol.AllowedUIDs, ErrRefused)
	}
	if st.Mode&0o007 != 0 {
		return fmt.Errorf("kvshm: segment %s has mode %04o, want no access for others (0600 or 0660): %w", path, st.Mode&0o777, ErrRefused)
	}
	return nil
}

// recheck checks, for a descriptor, that the mapped file still passes
// trust (an owner or mode changed since it was mapped), still has the
// size it was mapped with (a file truncated under the mapping would fault
// the first read of a page past its end), and still has the header it
// was mapped with (under r.mu).
func (r *Reader) recheck(m *mapping, path string) error {
	var st syscall.Stat_t
	if err := syscall.Fstat(m.fd, &st); err != nil {
		return fmt.Errorf("kvshm: stat segment %s: %w", path, err)
	}
	if err := r.trust(path, &st); err != nil {
		return err
	}
	if st.Size < m.size {
		return fmt.Errorf("kvshm: segment %s is %d bytes now, mapped with %d: %w", path, st.Size, m.size, ErrFault)
	}
	return m.checkHeader(path, st.Size)
}

// checkHeader reads the header from the mapping, checking it against the
// file's size and the layout the segment was mapped with: a file rewritten
// in place (truncated and written again) is not the segment that was
// mapped.
func (m *mapping) checkHeader(path string, size int64) error {
	var lay Layout
	var err error
	if ferr := Guard(func() { lay, _, err = parseHeader(m.mem[:HeaderSize], size) }); ferr != nil {
		return fmt.Errorf("kvshm: segment %s: %w", path, ferr)
	}
	if err != nil {
		return fmt.Errorf("segment %s: %w", path, err)
	}
	if lay != m.layout {
		return fmt.Errorf("kvshm: segment %s declares %d slots of %d bytes now, mapped with %d of %d: %w",
			path, lay.Slots, lay.SlotSize, m.layout.Slots, m.layout.SlotSize, ErrFormat)
	}
	return nil
}

// open opens, checks and maps one segment file. The header page is mapped
// and checked first, so that a file whose header does not declare its
// size exactly costs one page, not its size, before it is refused.
func (r *Reader) open(path, name string) (*mapping, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("kvshm: segment %s is a symlink, want a regular file: %w", path, ErrRefused)
		}
		return nil, fmt.Errorf("kvshm: open segment %s: %w: %w", path, err, ErrRefused)
	}
	fail := func(err error) (*mapping, error) {
		syscall.Close(fd)
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return fail(fmt.Errorf("kvshm: stat segment %s: %w", path, err))
	}
	if err := r.trust(path, &st); err != nil {
		return fail(err)
	}
	if st.Size < HeaderSize {
		return fail(fmt.Errorf("kvshm: segment %s is %d bytes, shorter than the %d-byte header: %w", path, st.Size, HeaderSize, ErrFormat))
	}
	m := &mapping{name: name, fd: fd, dev: uint64(st.Dev), ino: st.Ino, size: st.Size}
	if m.layout, err = readHeader(fd, path, st.Size); err != nil {
		return fail(err)
	}
	if r.pol.MaxSlotSize > 0 && m.layout.SlotSize > r.pol.MaxSlotSize {
		return fail(fmt.Errorf("kvshm: segment %s declares slots of %d bytes, want at most %d (keys and values of the contract in float32): %w",
			path, m.layout.SlotSize, r.pol.MaxSlotSize, ErrFormat))
	}
	if st.Size > math.MaxInt {
		return fail(fmt.Errorf("kvshm: segment %s is %d bytes, more than this host can map: %w", path, st.Size, ErrFormat))
	}
	if m.mem, err = syscall.Mmap(fd, 0, int(st.Size), syscall.PROT_READ, syscall.MAP_SHARED|syscall.MAP_POPULATE); err != nil { // page tables filled now, not on the first copy of each slot
		return fail(fmt.Errorf("kvshm: map segment %s: %w", path, err))
	}
	if err := m.checkHeader(path, st.Size); err != nil { // rewritten since readHeader
		syscall.Munmap(m.mem)
		return fail(err)
	}
	return m, nil
}

// readHeader maps the header page of the segment file fd of size bytes
// alone, and returns the layout it declares, checked against size.
func readHeader(fd int, path string, size int64) (Layout, error) {
	h, err := syscall.Mmap(fd, 0, HeaderSize, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return Layout{}, fmt.Errorf("kvshm: map the header of segment %s: %w", path, err)
	}
	defer syscall.Munmap(h)
	var lay Layout
	if ferr := Guard(func() { lay, _, err = parseHeader(h, size) }); ferr != nil {
		return Layout{}, fmt.Errorf("kvshm: segment %s: %w", path, ferr)
	}
	if err != nil {
		return Layout{}, fmt.Errorf("segment %s: %w", path, err)
	}
	return lay, nil
}

func (r *Reader) release(m *mapping) {
	r.mu.Lock()
	m.refs--
	r.unmapIfIdle(m)
	r.mu.Unlock()
}

// retire makes m a mapping no new lease gets: unmapped once no lease holds
// it.
func (r *Reader) retire(m *mapping) {
	r.mu.Lock()
	r.retireLocked(m)
	r.mu.Unlock()
}

// retireLocked is retire under r.mu.
func (r *Reader) retireLocked(m *mapping) {
	if r.cur == m {
		r.cur = nil
	}
	m.retired = true
	r.unmapIfIdle(m)
}

// unmapIfIdle unmaps a retired mapping no lease holds and closes its file
// (under r.mu).
func (r *Reader) unmapIfIdle(m *mapping) {
	if m.retired && m.refs == 0 && m.mem != nil {
		_ = syscall.Munmap(m.mem)
		_ = syscall.Close(m.fd)
		m.mem = nil
		r.live--
	}
}

// Close retires the current mapping: it is unmapped once no lease holds
// it, as are those it replaced.
func (r *Reader) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil {
		r.retireLocked(r.cur)
	}
	return nil
}

// Held reports whether l holds a slot.
func (l *Lease) Held() bool { return l.m != nil }

// Check reports, just before a copy, whether the segment still has the
// size it was mapped with (a truncated file would fault the copy; Guard
// catches a truncation after this check).
func (l *Lease) Check() error {
	var st syscall.Stat_t
	if err := syscall.Fstat(l.m.fd, &st); err != nil {
		return fmt.Errorf("kvshm: stat segment %s: %w", l.m.name, err)
	}
	if st.Size < l.m.size {
		return fmt.Errorf("kvshm: segment %s is %d bytes now, mapped with %d: %w", l.m.name, st.Size, l.m.size, ErrFault)
	}
	return nil
}

// Intact reports, after the copy of Keys and Values, whether the slot
// still holds the generation the descriptor named: false means the
// producer began rewriting the slot before the copy ended, and the copy
// must not be used. The copy's loads are ordered before the generation's
// load: the atomic store to l.fence is a release (STLR on arm64, which
// the following load-acquire LDAR cannot pass; XCHG, a full fence, on
// amd64).
//
// The generation is read under Guard: a segment truncated under the
// mapping is not intact either.
func (l *Lease) Intact() bool {
	atomic.StoreUint32(&l.fence, 1)
	g, err := loadGenGuarded(l.gen)
	return err == nil && g == l.want
}

// loadGenGuarded is loadGen of a generation in a mapping, under Guard.
func loadGenGuarded(p *uint64) (g uint64, err error) {
	err = Guard(func() { g = loadGen(p) })
	return g, err
}

// Release hands the slot back (the mapping may be unmapped then). It is a
// no-op on a Lease that holds nothing.
func (l *Lease) Release() {
	if l.m == nil {
		return
	}
	l.r.release(l.m)
	*l = Lease{}
}

// Guard runs f, which reads a mapping, and turns a memory fault in it (a
// SIGBUS on a page of a truncated file) into ErrFault instead of a crash.
// Other panics propagate.
func Guard(f func()) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if p := recover(); p != nil {
			if re, ok := p.(runtime.Error); ok && isFault(re) {
				err = fmt.Errorf("kvshm: %v: %w", re, ErrFault)
				return
			}
			panic(p)
		}
	}()
	f()
	return nil
}

// isFault reports whether a runtime error is a memory fault (runtime
// errors of SetPanicOnFault carry the faulting address).
func isFault(e runtime.Error) bool {
	_, ok := e.(interface{ Addr() uintptr })
	return ok
}
