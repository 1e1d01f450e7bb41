// Package kvshm is the shared-memory segment of the same-host KV hand-off
// (docs/shm.md): a producer writes a cycle's keys and values into a slot of
// a segment, a file in /dev/shm, and publishes a small KVHandoff descriptor
// over ROS; the node maps the segment read-only once and copies the slot
// into the backend's input buffers.
//
// The segment is plain POSIX shared memory, no cgo and no middleware: a
// header page, then Slots slots of SlotSize bytes each.
//
//	offset  size  field
//	0       8     magic "FWKVSHM\x01"
//	8       4     version (1)
//	12      4     header size (4096)
//	16      4     slots (1..MaxSlots)
//	20      4     the producer's pid (stale segments are those of dead pids)
//	24      8     slot size in bytes (a multiple of 4096)
//	64+8i   8     slot i's generation (seqlock: odd while the producer writes)
//	4096+i*slot size: slot i's payload
//
// Every integer is little-endian. A slot's generation is made odd before
// its payload is written and even after; a reader that sees the same even
// generation before and after its copy read a whole payload (see
// Lease.Intact for the memory ordering).
package kvshm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"sync/atomic"
)

// Segment format constants.
const (
	Magic      = "FWKVSHM\x01"
	Version    = 1
	HeaderSize = 4096
	// MaxSlots bounds the slot count (the generations fit in the header page).
	MaxSlots = 64
	// SlotAlign is the alignment of the slot size (a page: every slot
	// starts on a page boundary).
	SlotAlign = 4096
	// TensorAlign is the alignment of a tensor's offset in its slot.
	TensorAlign = 64
	genOffset   = 64
)

// Layout is a segment's geometry, as its header declares it.
type Layout struct {
	Slots    int
	SlotSize int64
}

// Size is the segment's size in bytes: the header and the slots.
func (l Layout) Size() (int64, error) {
	if err := l.validate(); err != nil {
		return 0, err
	}
	hi, lo := bits.Mul64(uint64(l.Slots), uint64(l.SlotSize))
	if hi != 0 || lo > 1<<62 {
		return 0, fmt.Errorf("kvshm: %d slots of %d bytes overflow", l.Slots, l.SlotSize)
	}
	return HeaderSize + int64(lo), nil
}

func (l Layout) validate() error {
	if l.Slots < 1 || l.Slots > MaxSlots {
		return fmt.Errorf("kvshm: %d slots, want 1 to %d", l.Slots, MaxSlots)
	}
	if l.SlotSize <= 0 || l.SlotSize%SlotAlign != 0 {
		return fmt.Errorf("kvshm: slot size %d, want a positive multiple of %d", l.SlotSize, SlotAlign)
	}
	return nil
}

// SlotSizeFor is the smallest slot size that holds tensors of the given
// byte lengths, each at a TensorAlign offset (as Writer.Place lays them).
func SlotSizeFor(lengths ...int64) int64 {
	var n int64
	for _, l := range lengths {
		n = alignUp(n, TensorAlign) + l
	}
	return alignUp(max(n, 1), SlotAlign)
}

func alignUp(n, a int64) int64 { return (n + a - 1) / a * a }

// ErrFormat is wrapped by the errors of a segment whose header is not one
// of this package's.
var ErrFormat = errors.New("not a KV hand-off segment")

// parseHeader reads the layout from a header page, checking it against the
// segment's size.
func parseHeader(h []byte, size int64) (Layout, int, error) {
	if len(h) < HeaderSize {
		return Layout{}, 0, fmt.Errorf("kvshm: %d bytes, shorter than the %d-byte header: %w", len(h), HeaderSize, ErrFormat)
	}
	if string(h[:8]) != Magic {
		return Layout{}, 0, fmt.Errorf("kvshm: magic %q, want %q: %w", h[:8], Magic, ErrFormat)
	}
	if v := binary.LittleEndian.Uint32(h[8:]); v != Version {
		return Layout{}, 0, fmt.Errorf("kvshm: version %d, want %d: %w", v, Version, ErrFormat)
	}
	if hs := binary.LittleEndian.Uint32(h[12:]); hs != HeaderSize {
		return Layout{}, 0, fmt.Errorf("kvshm: header size %d, want %d: %w", hs, HeaderSize, ErrFormat)
	}
	slots := binary.LittleEndian.Uint32(h[16:])
	slotSize := binary.LittleEndian.Uint64(h[24:])
	if slots > MaxSlots || slotSize > 1<<62 {
		return Layout{}, 0, fmt.Errorf("kvshm: %d slots of %d bytes: %w", slots, slotSize, ErrFormat)
	}
	l := Layout{Slots: int(slots), SlotSize: int64(slotSize)}
	want, err := l.Size()
	if err != nil {
		return Layout{}, 0, fmt.Errorf("%w: %w", err, ErrFormat)
	}
	if want != size {
		return Layout{}, 0, fmt.Errorf("kvshm: the header declares %d slots of %d bytes (%d bytes with the header), the segment has %d: %w",
			l.Slots, l.SlotSize, want, size, ErrFormat)
	}
	return l, int(binary.LittleEndian.Uint32(h[20:])), nil
}

// putHeader writes a header for l and pid (generations zero).
func putHeader(h []byte, l Layout, pid int) {
	copy(h, Magic)
	binary.LittleEndian.PutUint32(h[8:], Version)
	binary.LittleEndian.PutUint32(h[12:], HeaderSize)
	binary.LittleEndian.PutUint32(h[16:], uint32(l.Slots))
	binary.LittleEndian.PutUint32(h[20:], uint32(pid))
	binary.LittleEndian.PutUint64(h[24:], uint64(l.SlotSize))
}

// The slots' generations are little-endian in the segment, like the
// header, so that a segment means the same to every reader whatever its
// host (the Python producer writes them '<u8'). On a little-endian host
// (x86-64, arm64) these are plain atomic loads and stores; on a
// big-endian one the value is byte-swapped around the same atomic access.
func loadGen(p *uint64) uint64 { return leToHost(atomic.LoadUint64(p)) }

func storeGen(p *uint64, v uint64) { atomic.StoreUint64(p, leToHost(v)) }

// leToHost converts between a little-endian uint64 in memory and the
// host's value (the conversion is its own inverse).
func leToHost(v uint64) uint64 {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], 1)
	if b[0] == 1 {
		return v
	}
	return bits.ReverseBytes64(v)
}
