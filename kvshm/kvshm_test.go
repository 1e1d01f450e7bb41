package kvshm

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/fastwam/actionexpert/msgs"
)

// fixture is a segment of 3 slots holding keys and values of shape
// [2, 1, 3, 4] float32 and its reader.
type fixture struct {
	dir string
	w   *Writer
	r   *Reader
}

var shape = []uint32{2, 1, 3, 4}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	w, err := Create(dir, "kv", Layout{Slots: 3, SlotSize: SlotSizeFor(96, 96)}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	r := NewReader(Policy{Dir: dir})
	t.Cleanup(func() { r.Close() })
	return &fixture{dir: dir, w: w, r: r}
}

// write fills the next slot with bytes from fill and returns its descriptor.
func (f *fixture) write(t *testing.T, fill byte) *msgs.KVHandoff {
	t.Helper()
	ts, err := f.w.Place([]uint8{msgs.DTypeFloat32, msgs.DTypeFloat32}, shape, shape)
	if err != nil {
		t.Fatal(err)
	}
	slot, mem, err := f.w.Begin()
	if err != nil {
		t.Fatal(err)
	}
	for i, tt := range ts {
		b := mem[tt.Offset : tt.Offset+tt.Length]
		for j := range b {
			b[j] = fill + byte(i)
		}
	}
	gen, err := f.w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	return &msgs.KVHandoff{Segment: f.w.Name(), Slot: uint32(slot), Generation: gen, Keys: ts[0], Values: ts[1]}
}

func TestRoundTrip(t *testing.T) {
	f := newFixture(t)
	st, err := os.Stat(f.w.Path())
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("segment mode %o, want 0600", st.Mode().Perm())
	}
	for i := range 5 { // round robin over the 3 slots, twice
		d := f.write(t, byte(10*i))
		if int(d.Slot) != i%3 {
			t.Errorf("write %d in slot %d", i, d.Slot)
		}
		var l Lease
		if err := f.r.Acquire(d, &l); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(l.Keys, bytes.Repeat([]byte{byte(10 * i)}, 96)) || !bytes.Equal(l.Values, bytes.Repeat([]byte{byte(10*i) + 1}, 96)) {
			t.Fatalf("write %d: views hold %v / %v", i, l.Keys[:4], l.Values[:4])
		}
		if err := l.Check(); err != nil || !l.Intact() {
			t.Fatalf("write %d: check %v, intact %v", i, err, l.Intact())
		}
		l.Release()
	}
	if f.r.live != 1 {
		t.Errorf("%d mappings for one segment", f.r.live)
	}
}

// TestTornSlot: a slot the producer begins rewriting while the node copies
// it is not Intact, whether the rewrite is still going on (odd) or done.
func TestTornSlot(t *testing.T) {
	f := newFixture(t)
	d := f.write(t, 1)
	var l Lease
	if err := f.r.Acquire(d, &l); err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	f.write(t, 2)
	f.write(t, 3) // slots 1 and 2: slot 0 still intact
	if !l.Intact() {
		t.Fatal("slot 0 reported torn after writes to the other slots")
	}
	if _, _, err := f.w.Begin(); err != nil { // slot 0 again: odd
		t.Fatal(err)
	}
	if l.Intact() {
		t.Fatal("slot being rewritten reported intact")
	}
	if _, err := f.w.Commit(); err != nil {
		t.Fatal(err)
	}
	if l.Intact() {
		t.Fatal("rewritten slot reported intact")
	}
	// The old descriptor is stale now.
	var l2 Lease
	if err := f.r.Acquire(d, &l2); !errors.Is(err, ErrStale) {
		t.Fatalf("acquire of an overwritten slot: %v, want ErrStale", err)
	}
}

// TestCrashedProducer: a producer that died between Begin and Commit
// leaves an odd generation: no descriptor for that slot is accepted (its
// last descriptor is stale, an odd one is refused), the next producer's
// segment is a new file, mapped anew, and the old mapping stays valid for
// the lease that holds it.
func TestCrashedProducer(t *testing.T) {
	f := newFixture(t)
	d := f.write(t, 1)
	var held Lease
	if err := f.r.Acquire(d, &held); err != nil {
		t.Fatal(err)
	}
	d2 := f.write(t, 2)
	slot, _, _ := f.w.Begin() // slot 2 is never committed: the crash
	var l Lease
	odd := *d2
	odd.Slot, odd.Generation = uint32(slot), d2.Generation+1
	if err := f.r.Acquire(&odd, &l); !errors.Is(err, ErrDescriptor) {
		t.Errorf("odd generation: %v, want ErrDescriptor", err)
	}
	even := odd
	even.Generation = 2
	if err := f.r.Acquire(&even, &l); !errors.Is(err, ErrStale) {
		t.Errorf("descriptor of the slot being written: %v, want ErrStale", err)
	}
	// Restart: the segment is removed and created again under the same
	// name (same pid here): a new inode, a new layout.
	if err := f.w.Close(); err != nil {
		t.Fatal(err)
	}
	w, err := Create(f.dir, "kv", Layout{Slots: 2, SlotSize: SlotSizeFor(96, 96, 4096)}, true)
	if err != nil {
		t.Fatal(err)
	}
	f.w = w
	d3 := f.write(t, 7)
	if err := f.r.Acquire(d3, &l); err != nil {
		t.Fatalf("restarted producer: %v", err)
	}
	if l.m == held.m || l.m.layout.Slots != 2 || l.Keys[0] != 7 {
		t.Fatalf("not remapped: same mapping %v, layout %+v", l.m == held.m, l.m.layout)
	}
	if held.Keys[0] != 1 || held.m.mem == nil {
		t.Fatal("the old mapping went away under its lease")
	}
	old := held.m
	held.Release()
	if old.mem != nil {
		t.Error("the replaced mapping was not unmapped after its last lease")
	}
	l.Release()
	if st, _ := os.Stat(w.Path()); st.Mode().Perm() != 0o660 {
		t.Errorf("group segment mode %o, want 0660", st.Mode().Perm())
	}
}

// TestTruncatedSegment: a producer that shrinks its file under the mapping
// makes Check fail, and a copy that faults anyway returns ErrFault from
// Guard instead of crashing the process with SIGBUS.
func TestTruncatedSegment(t *testing.T) {
	f := newFixture(t)
	d := f.write(t, 1)
	var l Lease
	if err := f.r.Acquire(d, &l); err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if err := os.Truncate(f.w.Path(), HeaderSize); err != nil {
		t.Fatal(err)
	}
	if err := l.Check(); !errors.Is(err, ErrFault) {
		t.Errorf("Check after truncation: %v, want ErrFault", err)
	}
	dst := make([]float32, 24)
	var tn msgs.Tensor
	err := Guard(func() {
		tn = msgs.Tensor{Shape: shape, DType: msgs.DTypeFloat32, Data: l.Keys}
		_, _, _ = tn.DecodeF32Checked(dst)
	})
	if !errors.Is(err, ErrFault) {
		t.Fatalf("copy from a truncated mapping: %v, want ErrFault", err)
	}
}

// TestRefusedSegments: owner, mode, symlink, kind and size.
func TestRefusedSegments(t *testing.T) {
	f := newFixture(t)
	d := f.write(t, 1)
	try := func(what string, r *Reader, d *msgs.KVHandoff, want error) {
		t.Helper()
		var l Lease
		err := r.Acquire(d, &l)
		l.Release()
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", what, err, want)
		} else {
			t.Logf("%s: %v", what, err)
		}
	}
	try("wrong owner", NewReader(Policy{Dir: f.dir, AllowedUIDs: []int{os.Getuid() + 1}}), d, ErrRefused)
	link := *d
	link.Segment = "link"
	if err := os.Symlink(f.w.Path(), filepath.Join(f.dir, "link")); err != nil {
		t.Fatal(err)
	}
	try("symlink", f.r, &link, ErrRefused)
	fifo := *d
	fifo.Segment = "fifo"
	if err := syscall.Mkfifo(filepath.Join(f.dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	try("fifo", f.r, &fifo, ErrRefused)
	folder := *d
	folder.Segment = "folder"
	if err := os.Mkdir(filepath.Join(f.dir, "folder"), 0o700); err != nil {
		t.Fatal(err)
	}
	try("folder", f.r, &folder, ErrRefused)
	missing := *d
	missing.Segment = "missing"
	try("missing", f.r, &missing, ErrRefused)

	// A copy of the segment with other modes and sizes.
	data, err := os.ReadFile(f.w.Path())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		mode os.FileMode
		data []byte
		want error
	}{
		{"world_readable", 0o644, data, ErrRefused},
		{"grown", 0o600, append(data[:len(data):len(data)], make([]byte, 4096)...), ErrFormat},
		{"shrunk", 0o600, data[:len(data)-4096], ErrFormat},
		{"tiny", 0o600, data[:100], ErrFormat},
		{"bad_magic", 0o600, append([]byte("XXXXXXXX"), data[8:]...), ErrFormat},
	} {
		p := filepath.Join(f.dir, c.name)
		if err := os.WriteFile(p, c.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, c.mode); err != nil {
			t.Fatal(err)
		}
		dd := *d
		dd.Segment = c.name
		try(c.name, f.r, &dd, c.want)
	}
}

// TestHostileDescriptors: every field of a descriptor is checked against
// the mapping before a view is made.
func TestHostileDescriptors(t *testing.T) {
	f := newFixture(t)
	good := f.write(t, 1)
	slot := uint64(f.w.Layout().SlotSize)
	for _, c := range []struct {
		name string
		edit func(d *msgs.KVHandoff)
	}{
		{"empty_segment", func(d *msgs.KVHandoff) { d.Segment = "" }},
		{"dotdot", func(d *msgs.KVHandoff) { d.Segment = ".." }},
		{"path", func(d *msgs.KVHandoff) { d.Segment = "../" + d.Segment }},
		{"nul", func(d *msgs.KVHandoff) { d.Segment += "\x00" }},
		{"slot_out_of_range", func(d *msgs.KVHandoff) { d.Slot = 3 }},
		{"slot_huge", func(d *msgs.KVHandoff) { d.Slot = 1<<32 - 1 }},
		{"generation_zero", func(d *msgs.KVHandoff) { d.Generation = 0 }},
		{"generation_odd", func(d *msgs.KVHandoff) { d.Generation++ }},
		{"dtype", func(d *msgs.KVHandoff) { d.Keys.DType = 9 }},
		{"length_not_shape", func(d *msgs.KVHandoff) { d.Values.Length -= 4 }},
		{"shape_overflow", func(d *msgs.KVHandoff) { d.Keys.Shape = []uint32{1 << 31, 1 << 31, 1 << 31}; d.Keys.Length = 0 }},
		{"offset_past_slot", func(d *msgs.KVHandoff) { d.Values.Offset = slot }},
		{"offset_wraps", func(d *msgs.KVHandoff) { d.Values.Offset = 1<<64 - 64 }},
		{"runs_past_slot", func(d *msgs.KVHandoff) { d.Values.Offset = slot - 64 }},
		{"misaligned", func(d *msgs.KVHandoff) { d.Values.Offset += 4 }},
		{"overlap", func(d *msgs.KVHandoff) { d.Values.Offset = d.Keys.Offset + 64 }},
		{"same_bytes", func(d *msgs.KVHandoff) { d.Values.Offset = d.Keys.Offset }},
	} {
		d := *good
		d.Keys.Shape, d.Values.Shape = append([]uint32(nil), shape...), append([]uint32(nil), shape...)
		c.edit(&d)
		var l Lease
		err := f.r.Acquire(&d, &l)
		if !errors.Is(err, ErrDescriptor) || l.Held() {
			t.Errorf("%s: %v (held %v), want ErrDescriptor", c.name, err, l.Held())
			l.Release()
			continue
		}
		t.Logf("%s: %v", c.name, err)
	}
	if m := f.r.cur; m == nil || m.name != good.Segment || m.refs != 0 {
		t.Fatalf("refused descriptors left references: %+v", m)
	}
}

// TestCleanStale: segments of dead producers are removed at Create, a
// live one's and other names are left.
func TestCleanStale(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skip("no true(1):", err)
	}
	dead := cmd.Process.Pid
	for _, n := range []string{SegmentName("kv", dead), SegmentName("kv", 1), "kv.x", "other.5"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	w, err := Create(dir, "kv", Layout{Slots: 1, SlotSize: SlotAlign}, false)
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	got := strings.Join(names, " ")
	if strings.Contains(got, SegmentName("kv", dead)) || !strings.Contains(got, "kv.1 ") || !strings.Contains(got, w.Name()) {
		t.Errorf("after Create: %s (dead pid %d)", got, dead)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.Path()); !os.IsNotExist(err) {
		t.Errorf("Close left the segment: %v", err)
	}
}
