package qnnfake

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

const idxLogSetLogLevel = 26

// logRecord is what one callback invocation received (the format, not the
// formatted text: qnnrt's tests check the formatting).
type logRecord struct {
	format    string
	level     uint32
	timestamp uint64
}

// logRecorder is a QnnLog_Callback_t made once for the test binary
// (purego callbacks cannot be freed) that records its calls.
var logRecorder = sync.OnceValue(func() *recorder {
	r := &recorder{}
	r.fn = purego.NewCallback(func(format *byte, level uint32, timestamp uint64, _ unsafe.Pointer) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.got = append(r.got, logRecord{goString(format), level, timestamp})
	})
	return r
})

type recorder struct {
	fn  uintptr
	mu  sync.Mutex
	got []logRecord
}

// take returns and clears the records.
func (r *recorder) take() []logRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := r.got
	r.got = nil
	return got
}

func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

func levels(rs []logRecord) []uint32 {
	var out []uint32
	for _, r := range rs {
		out = append(out, r.level)
	}
	return out
}

// TestLogLevels checks that the double calls the logger's callback for the
// lines its level admits, through the most recently created live logger,
// with increasing timestamps, from a thread of its own too, and that the
// failure paths log their reason at ERROR.
func TestLogLevels(t *testing.T) {
	l := New(t, Variant{})
	a := newABI(t, l).open()
	rec := logRecorder()
	rec.take()
	emitAll := func() []uint32 {
		for lv := uint32(1); lv <= 5; lv++ {
			l.EmitLog(lv, "x", 1, 2, 3, 4, 5)
		}
		return levels(rec.take())
	}
	if got := emitAll(); got != nil {
		t.Fatalf("lines %v before any logger exists", got)
	}
	log := a.handle("logCreate", idxLogCreate, rec.fn, 2)
	if got := rec.take(); len(got) != 0 {
		t.Errorf("logCreate at WARN logged %+v (its line is INFO)", got)
	}
	if got := emitAll(); !slices.Equal(got, []uint32{1, 2}) {
		t.Errorf("level 2 logger got levels %v, want [1 2]", got)
	}
	a.must("logSetLogLevel", a.call(idxLogSetLogLevel, log, 5))
	if got := emitAll(); !slices.Equal(got, []uint32{1, 2, 3, 4, 5}) {
		t.Errorf("level 5 logger got levels %v", got)
	}
	l.EmitLogFromThread(3, "y", 1, 2, 3, 4, 5)
	if got := rec.take(); len(got) != 1 || got[0].format != EmitFormat || got[0].level != 3 {
		t.Errorf("line from the library's thread: %+v", got)
	}

	// Entry points log what they do; failures log their reason at ERROR.
	backend := a.handle("backendCreate", idxBackendCreate, log, 0)
	if got := rec.take(); len(got) != 1 || got[0].level != 3 || !strings.HasPrefix(got[0].format, "backend %p created") {
		t.Errorf("backendCreate logged %+v", got)
	}
	a.out.put64(0, 0)
	if code := a.call(idxContextCreateFromBinary, backend, 0, 0, a.out.at(64), 3, a.out.at(0), 0); code == 0 {
		t.Fatal("3-byte binary accepted")
	}
	got := rec.take()
	if len(got) != 2 || got[0].level != 4 || got[1].level != 1 || got[1].format != "%s (error %llu)" ||
		!strings.Contains(l.LastError(), "failed to deserialize context blob") {
		t.Errorf("failed contextCreateFromBinary logged %+v (last error %q)", got, l.LastError())
	}
	for i := 1; i < len(got); i++ {
		if got[i].timestamp <= got[i-1].timestamp {
			t.Errorf("timestamps not increasing: %+v", got)
		}
	}

	// A second logger takes over; freeing it hands back to the first.
	log2 := a.handle("logCreate", idxLogCreate, rec.fn, 1)
	rec.take()
	if got := emitAll(); !slices.Equal(got, []uint32{1}) {
		t.Errorf("second (level 1) logger got levels %v", got)
	}
	a.must("logFree", a.call(idxLogFree, log2))
	rec.take()
	if got := emitAll(); !slices.Equal(got, []uint32{1, 2, 3, 4, 5}) {
		t.Errorf("after freeing the second logger: levels %v, want the first logger's", got)
	}
	a.must("backendFree", a.call(idxBackendFree, backend))
	a.must("logFree", a.call(idxLogFree, log))
	rec.take()
	if got := emitAll(); got != nil {
		t.Errorf("lines %v after every logger was freed", got)
	}
	// NULL callback: platform logging, nothing reaches the recorder.
	log3 := a.handle("logCreate", idxLogCreate, 0, 5)
	if got := emitAll(); got != nil {
		t.Errorf("NULL callback: lines %v", got)
	}
	a.must("logFree", a.call(idxLogFree, log3))
}

// TestOmitFunction checks that an omitted core entry is NULL in tables
// built afterwards and comes back when restored.
func TestOmitFunction(t *testing.T) {
	l := New(t, Variant{})
	entry := func() uintptr {
		a := newABI(t, l).open()
		return peekPtr(a.core + offInterfaceTable + 8*idxDeviceGetInfrastructure)
	}
	if entry() == 0 {
		t.Fatal("deviceGetInfrastructure is NULL by default")
	}
	l.OmitFunction("deviceGetInfrastructure", true)
	if entry() != 0 {
		t.Error("omitted deviceGetInfrastructure is not NULL")
	}
	l.OmitFunction("deviceGetInfrastructure", false)
	if entry() == 0 {
		t.Error("restored deviceGetInfrastructure is NULL")
	}
	if l.c.omitFunction("setPowerConfig", 1) == 0 || l.c.omitFunction("nonsense", 1) == 0 {
		t.Error("OmitFunction accepted a name that is not a core table entry")
	}
}
