package kvshm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/fastwam/actionexpert/msgs"
)

// childEnv names the test a child process of the test binary runs (inChild).
const childEnv = "KVSHM_TEST_CHILD"

// inChild reports whether the calling test runs its body in this process.
// A test whose regression would crash the process (a SIGBUS on a mapping
// is fatal to a Go program: no recover, no other test's result) runs its
// body in a child process of the test binary instead; the parent fails the
// test with the child's output when the child fails or dies.
func inChild(t *testing.T) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+regexp.QuoteMeta(t.Name())+"$", "-test.v", "-test.count=1", "-test.timeout=1m")
	cmd.Env = append(os.Environ(), childEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the test's child process: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the test's child process did not run it:\n%s", out)
	}
	t.Logf("child process:\n%s", out)
	return false
}

// TestTruncatedUnderReader: a segment the reader has mapped, truncated to
// 0 bytes or to its header page (a producer that re-creates a fixed name
// with O_TRUNC), then named by another descriptor: every read of the
// mapping is refused or guarded, never a SIGBUS. The descriptor gets a
// clear error and the mapping is dropped; a lease that still holds it
// reports the slot as not intact, and its mapping goes once it is
// released.
func TestTruncatedUnderReader(t *testing.T) {
	if !inChild(t) {
		return
	}
	for _, size := range []int64{0, HeaderSize} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			f := newFixture(t)
			d1, d2 := f.write(t, 1), f.write(t, 2) // written before: the writer's own mapping would fault after
			var held Lease
			if err := f.r.Acquire(d1, &held); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(f.w.Path(), size); err != nil {
				t.Fatal(err)
			}
			var l Lease
			err := f.r.Acquire(d2, &l)
			if !errors.Is(err, ErrFault) || l.Held() {
				t.Fatalf("descriptor for a segment truncated to %d under the mapping: %v (held %v), want ErrFault", size, err, l.Held())
			}
			t.Log(err)
			if want := fmt.Sprintf("is %d bytes now, mapped with", size); !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
			if f.r.cur != nil {
				t.Error("the truncated segment is still the reader's current mapping")
			}
			if err := held.Check(); !errors.Is(err, ErrFault) {
				t.Errorf("Check of the held lease: %v, want ErrFault", err)
			}
			if err := Guard(func() { _ = append([]byte(nil), held.Keys...) }); !errors.Is(err, ErrFault) {
				t.Errorf("a copy of the held slot: %v, want ErrFault", err)
			}
			if intact := held.Intact(); size == 0 && intact { // at 4096 the generations are still there
				t.Error("a slot of a segment truncated to 0 reported intact")
			}
			// Mapped anew, the file is refused for its size.
			err = f.r.Acquire(d2, &l)
			if !errors.Is(err, ErrFormat) || l.Held() {
				t.Fatalf("descriptor for the truncated file, mapped anew: %v, want ErrFormat", err)
			}
			t.Log(err)
			m := held.m
			held.Release()
			if m.mem != nil || f.r.live != 0 {
				t.Errorf("after the last lease: mapping still there %v, %d mapped", m.mem != nil, f.r.live)
			}
		})
	}
}

// TestGuardedReads: each read of a mapping is guarded, so a truncation
// after the size check (a race no descriptor can be timed to hit) is an
// error, not a crash: the slot's generation (Acquire's and Intact's read)
// and the header (checked per descriptor).
func TestGuardedReads(t *testing.T) {
	if !inChild(t) {
		return
	}
	f := newFixture(t)
	d := f.write(t, 1)
	var l Lease
	if err := f.r.Acquire(d, &l); err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if err := os.Truncate(f.w.Path(), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := loadGenGuarded(l.gen); !errors.Is(err, ErrFault) {
		t.Errorf("generation of a truncated segment: %v, want ErrFault", err)
	}
	if err := l.m.checkHeader(f.w.Path(), l.m.size); !errors.Is(err, ErrFault) {
		t.Errorf("header of a truncated segment: %v, want ErrFault", err)
	}
}

// readerMaps counts the reader's read-only mappings of files in dir
// (/proc/self/maps; the test's writers map theirs read-write) and the
// open file descriptors of files in dir (the writers keep none).
func readerMaps(t *testing.T, dir string) (maps, fds int) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 6 && f[1] == "r--s" && strings.HasPrefix(f[5], dir+"/") {
			maps++
		}
	}
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if p, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && strings.HasPrefix(p, dir+"/") {
			fds++
		}
	}
	return maps, fds
}

// TestProducerRestarts: 20 producer restarts, each under a new name (the
// pid in it changes), leave the live producer's segment mapped and no
// other: a replaced segment is unmapped and its file closed once no lease
// holds it, and at most MaxMapped are mapped while leases do.
func TestProducerRestarts(t *testing.T) {
	if _, err := os.Stat("/proc/self/maps"); err != nil {
		t.Skip("no /proc/self/maps:", err)
	}
	dir := t.TempDir()
	r := NewReader(Policy{Dir: dir})
	defer r.Close()
	lay := Layout{Slots: 2, SlotSize: SlotSizeFor(96, 96)}
	var prev Lease // the last producer's input, still pending at the restart
	defer prev.Release()
	for i := range 20 {
		w, err := Create(dir, fmt.Sprintf("kv%d", i), lay, false)
		if err != nil {
			t.Fatal(err)
		}
		f := &fixture{dir: dir, w: w, r: r}
		var l Lease
		if err := r.Acquire(f.write(t, byte(i)), &l); err != nil {
			t.Fatalf("restart %d: %v", i, err)
		}
		if maps, fds := readerMaps(t, dir); i > 0 && (maps != 2 || fds != 2) {
			t.Errorf("restart %d, the previous segment's lease held: %d mappings, %d fds, want 2", i, maps, fds)
		}
		prev.Release()
		if maps, fds := readerMaps(t, dir); maps != 1 || fds != 1 || r.live != 1 {
			t.Fatalf("restart %d, the previous lease released: %d mappings, %d fds (%d counted), want 1", i, maps, fds, r.live)
		}
		prev = l
		if err := w.Close(); err != nil { // the producer exits: its file goes, the node's mapping stays
			t.Fatal(err)
		}
	}
	prev.Release()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if maps, fds := readerMaps(t, dir); maps != 0 || fds != 0 {
		t.Errorf("after Close: %d mappings, %d fds", maps, fds)
	}
}

// TestMappedBound: while leases hold replaced segments, at most MaxMapped
// are mapped; the next new segment is refused, and accepted once a lease
// lets go.
func TestMappedBound(t *testing.T) {
	dir := t.TempDir()
	r := NewReader(Policy{Dir: dir})
	defer r.Close()
	lay := Layout{Slots: 1, SlotSize: SlotSizeFor(96, 96)}
	var ds []*msgs.KVHandoff
	for i := range MaxMapped + 1 {
		w, err := Create(dir, fmt.Sprintf("kv%d", i), lay, false)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		ds = append(ds, (&fixture{dir: dir, w: w, r: r}).write(t, byte(i)))
	}
	leases := make([]Lease, MaxMapped+1)
	defer func() {
		for i := range leases {
			leases[i].Release()
		}
	}()
	for i := range MaxMapped {
		if err := r.Acquire(ds[i], &leases[i]); err != nil {
			t.Fatal(err)
		}
	}
	err := r.Acquire(ds[MaxMapped], &leases[MaxMapped])
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "still mapped") {
		t.Fatalf("segment %d with %d held: %v, want ErrRefused (still mapped)", MaxMapped+1, MaxMapped, err)
	}
	t.Log(err)
	leases[0].Release()
	if err := r.Acquire(ds[MaxMapped], &leases[MaxMapped]); err != nil {
		t.Fatalf("after a release: %v", err)
	}
}

// TestRecheckedPerDescriptor: owner, mode, size and header are checked for
// every descriptor, not only when the segment is mapped: a chmod to 0666,
// a chown to a uid not allowed, a file grown or rewritten in place after
// the mapping are refused, and the mapping is dropped.
func TestRecheckedPerDescriptor(t *testing.T) {
	f := newFixture(t)
	d := f.write(t, 1)
	acquire := func() error {
		var l Lease
		defer l.Release()
		return f.r.Acquire(d, &l)
	}
	if err := acquire(); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, want error, msg string) {
		t.Helper()
		err := acquire()
		if !errors.Is(err, want) || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s after the mapping: %v, want %v (%s)", what, err, want, msg)
		} else {
			t.Logf("%s: %v", what, err)
		}
		if f.r.cur != nil {
			t.Errorf("%s: the mapping was kept", what)
		}
	}
	p := f.w.Path()
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	refused("chmod 0666", ErrRefused, "has mode 0666")
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := acquire(); err != nil {
		t.Fatalf("chmod back to 0600: %v", err)
	}
	if os.Getuid() == 0 {
		if err := os.Chown(p, 4242, -1); err != nil {
			t.Fatal(err)
		}
		refused("chown to uid 4242", ErrRefused, "owned by uid 4242")
		if err := os.Chown(p, 0, -1); err != nil {
			t.Fatal(err)
		}
		if err := acquire(); err != nil {
			t.Fatalf("chown back: %v", err)
		}
	} else {
		t.Log("not root: chown to another uid not tried")
	}
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, st.Size()+SlotAlign); err != nil {
		t.Fatal(err)
	}
	refused("grown", ErrFormat, "the segment has")
	if err := os.Truncate(p, st.Size()); err != nil {
		t.Fatal(err)
	}
	if err := acquire(); err != nil {
		t.Fatalf("the size restored: %v", err)
	}
	// Rewritten in place, the same inode and size: a header of another
	// layout (same total: 1 slot of 3 slots' bytes).
	h := make([]byte, HeaderSize)
	putHeader(h, Layout{Slots: 1, SlotSize: 3 * f.w.Layout().SlotSize}, os.Getpid())
	fd, err := os.OpenFile(p, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fd.WriteAt(h, 0)
	fd.Close()
	if err != nil {
		t.Fatal(err)
	}
	refused("rewritten in place", ErrFormat, "declares 1 slots")
}

// TestSparseHugeFile: a 1 GiB sparse file whose header is not a segment's,
// or declares less than its size, is refused from its header page: the
// reader's peak resident memory does not grow by the file's size.
func TestSparseHugeFile(t *testing.T) {
	if !inChild(t) { // a clean peak
		return
	}
	dir := t.TempDir()
	valid := make([]byte, HeaderSize)
	putHeader(valid, Layout{Slots: 1, SlotSize: SlotAlign}, 1)
	r := NewReader(Policy{Dir: dir})
	defer r.Close()
	for _, c := range []struct {
		name   string
		header []byte
		want   string
	}{
		{"zero", make([]byte, HeaderSize), "magic"},
		{"small_header", valid, "the segment has 1073741824"},
	} {
		p := filepath.Join(dir, c.name)
		if err := os.WriteFile(p, c.header, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 1<<30); err != nil {
			t.Fatal(err)
		}
		before := maxRSS(t)
		var l Lease
		err := r.Acquire(&msgs.KVHandoff{Segment: c.name, Generation: 2}, &l)
		grown := maxRSS(t) - before
		if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrFormat (%s)", c.name, err, c.want)
		}
		t.Logf("%s: %v; peak resident memory grew by %d KiB", c.name, err, grown)
		if grown > 64<<10 {
			t.Errorf("%s: refusing a sparse 1 GiB file raised the peak resident memory by %d MiB", c.name, grown>>10)
		}
	}
}

// maxRSS is the process's peak resident memory in KiB.
func maxRSS(t *testing.T) int64 {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return ru.Maxrss
}

// TestMaxSlotSize: a segment whose header declares slots larger than the
// policy's bound is refused from its header page; a segment at the bound
// is mapped.
func TestMaxSlotSize(t *testing.T) {
	dir := t.TempDir()
	bound := SlotSizeFor(96, 96)
	r := NewReader(Policy{Dir: dir, MaxSlotSize: bound})
	defer r.Close()
	for _, c := range []struct {
		prefix   string
		slotSize int64
		want     error
	}{{"at", bound, nil}, {"over", bound + SlotAlign, ErrFormat}} {
		w, err := Create(dir, c.prefix, Layout{Slots: 2, SlotSize: c.slotSize}, false)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		var l Lease
		err = r.Acquire((&fixture{dir: dir, w: w, r: r}).write(t, 1), &l)
		l.Release()
		if !errors.Is(err, c.want) || (err != nil && !strings.Contains(err.Error(), "want at most")) {
			t.Errorf("slots of %d bytes, at most %d: %v, want %v", c.slotSize, bound, err, c.want)
		}
		t.Logf("slots of %d bytes: %v", c.slotSize, err)
	}
	if r.cur == nil || !strings.HasPrefix(r.cur.name, "at.") || r.live != 1 {
		t.Errorf("the refused segment replaced the current one or was mapped (%d mapped)", r.live)
	}
}
