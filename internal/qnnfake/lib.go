package qnnfake

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Lib is one loaded, independent instance of the test double. Its Set*
// methods configure what the library advertises and how it behaves; set them
// before the runtime under test loads the library (provider tables are built
// on the first QnnInterface_getProviders / QnnSystemInterface_getProviders
// call after a change). The accessors read the library's counters.
type Lib struct {
	// Path is the .so to hand to the runtime under test as its backend,
	// system and rpcmem library: one file, so all three share state.
	Path string

	t      testing.TB
	handle uintptr
	c      control
}

// control holds the library's control API (the fake_* exports of fakeqnn.c).
type control struct {
	resetCoreProviders   func()
	addCoreProvider      func(name string, backendID, major, minor, patch uint32)
	setSystemAPI         func(major, minor, patch uint32)
	setBinaryInfoVersion func(v uint32)
	setGraphInfoV3       func(on int32)
	setTensorVersion     func(v uint32)
	setDeviceSupported   func(on int32)
	setRPCMemAvailable   func(on int32)
	setEmptyExecute      func(on int32)
	setProfileMicros     func(us uint64)
	failCall             func(fn string, code uint64, nth int32) int32
	calls                func(fn string) int32
	liveHandles          func() int32
	doubleFrees          func() int32
	lastError            func(buf unsafe.Pointer, capacity int32) int32
	rawBytesRead         func() uint64
	memHandleBytesRead   func() uint64
	memHandleBytesWrite  func() uint64
	memRecords           func() int32
	memRecord            func(i int32, out unsafe.Pointer) int32
	powerVoteCount       func() int32
	powerVote            func(i int32, out unsafe.Pointer) int32
	functionName         func(i int32) string
	omitFunction         func(fn string, on int32) int32
	emitLog              func(level uint32, s string, d int32, u uint32, llu uint64, f float64, p uintptr)
	emitLogFromThread    func(level uint32, s string, d int32, u uint32, llu uint64, f float64, p uintptr) int32
	contextRecords       func() int32
	contextRecord        func(i int32, out unsafe.Pointer) int32
	executeRecords       func() int32
	executeRecord        func(i int32, name unsafe.Pointer, capacity int32, addrs, counts unsafe.Pointer) int32
}

// New builds the test double for v (cached per source and flags under
// os.TempDir()), copies it to a fresh file under t.TempDir() so the instance
// has its own global state, opens its control API and returns it. The library
// is closed when the test ends. New calls t.Skip only if gcc is missing; any
// other failure is fatal.
func New(t testing.TB, v Variant) *Lib {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("qnnfake: gcc is not installed; the QNN test double is compiled from C with gcc")
	}
	built, err := cachedBuild(v)
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			t.Skip("qnnfake: gcc is not installed; the QNN test double is compiled from C with gcc")
		}
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), v.fileName())
	if err := copyFile(path, built); err != nil {
		t.Fatalf("qnnfake: copy %s: %v", built, err)
	}
	l, err := open(path)
	if err != nil {
		t.Fatal(err)
	}
	l.t = t
	t.Cleanup(func() {
		if err := purego.Dlclose(l.handle); err != nil {
			t.Errorf("qnnfake: close %s: %v", path, err)
		}
	})
	return l
}

// open loads the library at path and binds its control API.
func open(path string) (l *Lib, err error) {
	h, err := purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("qnnfake: open %s: %w", path, err)
	}
	// RegisterLibFunc panics on a missing symbol; turn that into an error.
	defer func() {
		if r := recover(); r != nil {
			purego.Dlclose(h)
			l, err = nil, fmt.Errorf("qnnfake: open %s: control API: %v", path, r)
		}
	}()
	l = &Lib{Path: path, handle: h}
	c := &l.c
	for _, f := range []struct {
		ptr  any
		name string
	}{
		{&c.resetCoreProviders, "fake_reset_core_providers"},
		{&c.addCoreProvider, "fake_add_core_provider"},
		{&c.setSystemAPI, "fake_set_system_api"},
		{&c.setBinaryInfoVersion, "fake_set_binary_info_version"},
		{&c.setGraphInfoV3, "fake_set_graph_info_v3"},
		{&c.setTensorVersion, "fake_set_tensor_version"},
		{&c.setDeviceSupported, "fake_set_device_supported"},
		{&c.setRPCMemAvailable, "fake_set_rpcmem_available"},
		{&c.setEmptyExecute, "fake_set_empty_execute"},
		{&c.setProfileMicros, "fake_set_profile_micros"},
		{&c.failCall, "fake_fail_call"},
		{&c.calls, "fake_calls"},
		{&c.liveHandles, "fake_live_handles"},
		{&c.doubleFrees, "fake_double_frees"},
		{&c.lastError, "fake_last_error"},
		{&c.rawBytesRead, "fake_raw_bytes_read"},
		{&c.memHandleBytesRead, "fake_memhandle_bytes_read"},
		{&c.memHandleBytesWrite, "fake_memhandle_bytes_written"},
		{&c.memRecords, "fake_mem_records"},
		{&c.memRecord, "fake_mem_record"},
		{&c.powerVoteCount, "fake_power_vote_count"},
		{&c.powerVote, "fake_power_vote"},
		{&c.functionName, "fake_function_name"},
		{&c.omitFunction, "fake_omit_function"},
		{&c.emitLog, "fake_emit_log"},
		{&c.emitLogFromThread, "fake_emit_log_from_thread"},
		{&c.contextRecords, "fake_context_records"},
		{&c.contextRecord, "fake_context_record"},
		{&c.executeRecords, "fake_execute_records"},
		{&c.executeRecord, "fake_execute_record"},
	} {
		purego.RegisterLibFunc(f.ptr, h, f.name)
	}
	return l, nil
}

// Provider is one core interface provider the library advertises.
type Provider struct {
	Name                string
	BackendID           uint32 // 6 = HTP, 3 = CPU
	Major, Minor, Patch uint32 // core API version
}

// SetCoreProviders replaces the core providers QnnInterface_getProviders
// returns (default: one HTP (6) provider "FAKE_HTP", API 2.32.0). Each
// provider's function table is sized for its version: 71 entries for minor
// >= 32, 62 for 18..31, and a 16-entry bogus table below 18; it ends at a
// page boundary followed by an inaccessible guard page. With no argument the
// library advertises no provider.
func (l *Lib) SetCoreProviders(p ...Provider) {
	l.c.resetCoreProviders()
	for _, q := range p {
		l.c.addCoreProvider(q.Name, q.BackendID, q.Major, q.Minor, q.Patch)
	}
}

// SetSystemAPI sets the system API version QnnSystemInterface_getProviders
// advertises (default 1.7.0). Minor 0 gives the 3-entry table of system API
// 1.0 (create, getBinaryInfo, free); minor >= 1 the 16-entry table.
func (l *Lib) SetSystemAPI(major, minor, patch uint32) { l.c.setSystemAPI(major, minor, patch) }

// SetBinaryInfoVersion sets the QnnSystemContext_BinaryInfo_t version the
// metadata calls report: 1, 2 or 3 (default 3). Any other value is reported
// as is, laid out like version 3, to exercise a runtime's refusal of
// versions it does not know.
func (l *Lib) SetBinaryInfoVersion(v uint32) { l.c.setBinaryInfoVersion(v) }

// SetGraphInfoV3 selects the graph-info layout of the metadata: the 88-byte
// QnnSystemContext_GraphInfo_t with graph-info version 3 (true, default) or
// the 64-byte one of older libraries with graph-info version 1 (false).
func (l *Lib) SetGraphInfoV3(on bool) { l.c.setGraphInfoV3(b2i(on)) }

// SetTensorVersion sets the Qnn_Tensor_t version the metadata reports: 1 or
// 2 (default 2). Other values are reported as is with the version-2 fields.
func (l *Lib) SetTensorVersion(v uint32) { l.c.setTensorVersion(v) }

// SetDeviceSupported sets whether propertyHasCapability(DEVICE) reports
// support and deviceCreate/deviceGetInfrastructure succeed (default true).
func (l *Lib) SetDeviceSupported(on bool) { l.c.setDeviceSupported(b2i(on)) }

// SetRPCMemAvailable sets whether rpcmem_alloc can allocate (default true);
// when false it returns NULL, as on a device without the DSP heap.
func (l *Lib) SetRPCMemAvailable(on bool) { l.c.setRPCMemAvailable(b2i(on)) }

// SetEmptyExecute makes graphExecute validate its arguments and count the
// input bytes but skip the computation and leave the outputs untouched, for
// host-overhead benchmarks (default false).
func (l *Lib) SetEmptyExecute(on bool) { l.c.setEmptyExecute(b2i(on)) }

// SetProfileMicros sets the value of the EXECUTE profile event recorded by
// an execute with a profile handle (default 1500).
func (l *Lib) SetProfileMicros(us uint64) { l.c.setProfileMicros(us) }

// FailCall makes function fn fail with error code code on its nth call from
// now (nth = 1: the next call), or on every call when nth is 0; a negative
// nth removes the injection. fn is a function-table entry name such as
// "graphExecute", "memRegister" or "contextCreateFromBinary", a system entry
// such as "systemContextGetMetaData", an export ("QnnInterface_getProviders",
// "rpcmem_alloc", "rpcmem_to_fd") or a perf-infrastructure function
// ("createPowerConfigId", "setPowerConfig", ...). rpcmem_alloc fails by
// returning NULL and rpcmem_to_fd by returning -1, whatever the code;
// rpcmem_free returns nothing, so an injection there is counted and has no
// effect. The code is returned exactly as given, upper bits included, so a
// test can check that a runtime reads ret & 0xFFFF. An unknown name fails
// the test.
func (l *Lib) FailCall(fn string, code uint64, nth int) {
	l.t.Helper()
	if l.c.failCall(fn, code, int32(nth)) != 0 {
		l.t.Fatalf("qnnfake: FailCall: unknown function %q; known: %v", fn, l.functionNames())
	}
}

// Calls is the number of calls of function fn so far (names as in FailCall,
// failed calls included). An unknown name fails the test.
func (l *Lib) Calls(fn string) int {
	l.t.Helper()
	n := l.c.calls(fn)
	if n < 0 {
		l.t.Fatalf("qnnfake: Calls: unknown function %q; known: %v", fn, l.functionNames())
	}
	return int(n)
}

// LiveHandles is the number of handles created and not yet freed: log,
// backend, device, context, profile, system context, memory handles, power
// config ids and rpcmem allocations (graph handles belong to their context
// and are not counted).
func (l *Lib) LiveHandles() int { return int(l.c.liveHandles()) }

// DoubleFrees is the number of frees of an unknown or already freed handle
// (or rpcmem buffer).
func (l *Lib) DoubleFrees() int { return int(l.c.doubleFrees()) }

// LastError describes the most recent error the library returned, or is ""
// if it has returned none.
func (l *Lib) LastError() string {
	buf := make([]byte, 512)
	for {
		n := l.c.lastError(unsafe.Pointer(&buf[0]), int32(len(buf)))
		if int(n) < len(buf) {
			return string(buf[:n])
		}
		buf = make([]byte, int(n)+1)
	}
}

// RawBytesRead is the number of bytes executes have taken from RAW client
// buffers of input tensors (counted in empty-execute mode too: the bytes a
// real backend would copy to the DSP).
func (l *Lib) RawBytesRead() uint64 { return l.c.rawBytesRead() }

// MemHandleBytesRead is the number of bytes executes have taken from
// registered shared memory (MEMHANDLE input tensors).
func (l *Lib) MemHandleBytesRead() uint64 { return l.c.memHandleBytesRead() }

// MemHandleBytesWritten is the number of bytes executes have written into
// registered shared memory (MEMHANDLE output tensors).
func (l *Lib) MemHandleBytesWritten() uint64 { return l.c.memHandleBytesWrite() }

// MemRecord is one memRegister descriptor the library accepted, as it read
// it: for memType CUSTOM (2) the fd and offset come from the
// QnnMemHtp_Descriptor_t's sharedBufferConfig, for ION (1) the offset is 0.
type MemRecord struct {
	// Seq is the registering context's ContextRecord.Seq.
	Seq int
	// FD is the rpcmem buffer's file descriptor.
	FD int32
	// Offset and Size place the registered region in the buffer (Size is
	// the descriptor's shape times its element size).
	Offset, Size uint64
	// MemType is the descriptor's memType, DataType its dataType.
	MemType, DataType uint32
	// Live is false once the handle was deregistered.
	Live bool
	// Addr is the region's address in this process (the rpcmem buffer's
	// base plus Offset), 0 once the buffer was freed.
	Addr uintptr
}

// MemRecords returns every registration so far, in order, deregistered
// ones included.
func (l *Lib) MemRecords() []MemRecord {
	n := l.c.memRecords()
	out := make([]MemRecord, 0, n)
	for i := range n {
		var v [8]uint64
		if l.c.memRecord(i, unsafe.Pointer(&v[0])) == 0 {
			break
		}
		out = append(out, MemRecord{Seq: int(v[0]), FD: int32(uint32(v[1])), Offset: v[2], Size: v[3],
			MemType: uint32(v[4]), DataType: uint32(v[5]), Live: v[6] != 0, Addr: uintptr(v[7])})
	}
	return out
}

// PowerVote is one HTP power configuration received by setPowerConfig.
// DCVS_V3 (Option 1) votes fill the DCVS fields; RPC_CONTROL_LATENCY (2)
// and RPC_POLLING_TIME (3) fill RPCValue. Call numbers the setPowerConfig
// call that carried the configuration (1 = the library's first call,
// failed calls included), so configs sent together share it.
type PowerVote struct {
	Option                       uint32
	PowerMode, DcvsEnable        uint32
	SleepLatency                 uint32
	BusMin, BusTarget, BusMax    uint32
	CoreMin, CoreTarget, CoreMax uint32
	RPCValue                     uint32
	Call                         int
}

// PowerVotes returns every power configuration received so far, in order.
func (l *Lib) PowerVotes() []PowerVote {
	n := l.c.powerVoteCount()
	votes := make([]PowerVote, 0, n)
	for i := range n {
		var v [12]uint32
		if l.c.powerVote(i, unsafe.Pointer(&v[0])) != 0 {
			break
		}
		votes = append(votes, PowerVote{
			Option: v[0], PowerMode: v[1], DcvsEnable: v[2], SleepLatency: v[3],
			BusMin: v[4], BusTarget: v[5], BusMax: v[6],
			CoreMin: v[7], CoreTarget: v[8], CoreMax: v[9], RPCValue: v[10], Call: int(v[11]),
		})
	}
	return votes
}

// OmitFunction makes the provider tables built from now on (on the next
// QnnInterface_getProviders) carry NULL for core function fn, as a backend
// without that function does; on false restores it. fn must be a core
// function-table entry name ("deviceGetInfrastructure", ...); any other name
// fails the test.
func (l *Lib) OmitFunction(fn string, on bool) {
	l.t.Helper()
	if l.c.omitFunction(fn, b2i(on)) != 0 {
		l.t.Fatalf("qnnfake: OmitFunction: %q is not a core function-table entry", fn)
	}
}

// EmitFormat is the C format of the line EmitLog and EmitLogFromThread
// log, whose first argument is "fake_emit_log" or "fake_emit_log thread"
// and the others the values passed (u twice, for %u and %x; f twice, for
// %f and %.3f).
const EmitFormat = "%s: s=%s d=%d u=%u x=%x llu=%llu f=%f g=%.3f p=%p"

// EmitLog makes the library log EmitFormat with these values at level
// through the active logger (the most recently created live log handle),
// on the calling thread, if that logger's level admits it. The logger's
// callback runs inside the library, holding its lock.
func (l *Lib) EmitLog(level uint32, s string, d int32, u uint32, llu uint64, f float64, p uintptr) {
	l.c.emitLog(level, s, d, u, llu, f, p)
}

// EmitLogFromThread is EmitLog from a thread the library creates with
// pthread_create (not a Go thread) and joins before returning.
func (l *Lib) EmitLogFromThread(level uint32, s string, d int32, u uint32, llu uint64, f float64, p uintptr) {
	l.t.Helper()
	if err := l.c.emitLogFromThread(level, s, d, u, llu, f, p); err != 0 {
		l.t.Fatalf("qnnfake: EmitLogFromThread: pthread error %d", err)
	}
}

// functionNames lists the names FailCall and Calls accept.
func (l *Lib) functionNames() []string {
	var names []string
	for i := int32(0); ; i++ {
		s := l.c.functionName(i)
		if s == "" {
			return names
		}
		names = append(names, s)
	}
}

func b2i(on bool) int32 {
	if on {
		return 1
	}
	return 0
}

// ContextRecord is what the library recorded about one successful
// contextCreateFromBinary.
type ContextRecord struct {
	// Seq numbers the contexts in creation order, from 1.
	Seq int
	// Group is true when the call carried a spill-fill group registration
	// (QnnHtpContext_CustomConfig_t option REGISTER_MULTI_CONTEXTS).
	Group bool
	// FirstSeq is the Seq of the context the registration's
	// firstGroupHandle named, 0 for a new group (or no registration).
	FirstSeq int
	// MaxSpillFill is the registration's maxSpillFillBuffer.
	MaxSpillFill uint64
	// BinarySpillFill is the largest spill-fill size of the binary's
	// graphs (Graph.SpillFill).
	BinarySpillFill uint64
	// Freed is 0 while the context lives, else the rank of its
	// contextFree among those that freed a context (1 = the first freed).
	Freed int
	// GroupSpillFill is the group's spill-fill buffer: the
	// maxSpillFillBuffer of the group's first context (QnnHtpContext.h: a
	// later context's value is disregarded). 0 without a group.
	GroupSpillFill uint64
}

// ContextRecords returns every context creation so far, in order. The
// library refuses a registration with maxSpillFillBuffer 0, a
// firstGroupHandle that is not a live context that itself started a group,
// and a binary whose spill-fill size exceeds the group's buffer (5010,
// QNN_CONTEXT_ERROR_INVALID_CONFIG); a later context's maxSpillFillBuffer
// other than the group's is accepted and disregarded, as QnnHtpContext.h
// says.
func (l *Lib) ContextRecords() []ContextRecord {
	n := l.c.contextRecords()
	out := make([]ContextRecord, 0, n)
	for i := range n {
		var v [7]uint64
		if l.c.contextRecord(i, unsafe.Pointer(&v[0])) == 0 {
			break
		}
		out = append(out, ContextRecord{Seq: int(v[0]), Group: v[1] != 0, FirstSeq: int(v[2]), MaxSpillFill: v[3], BinarySpillFill: v[4], Freed: int(v[5]), GroupSpillFill: v[6]})
	}
	return out
}

// ExecuteRecord is what the library recorded about one successful
// graphExecute: the context (its ContextRecord.Seq), the graph, and the
// address of every tensor's data (client buffer or registered memory), so
// a test can see that one graph read the memory another wrote.
type ExecuteRecord struct {
	Seq     int
	Graph   string
	Inputs  []uintptr // in the graph's input declaration order
	Outputs []uintptr // in the graph's output declaration order
}

// maxRecordedAddrs is how many tensor addresses an execute record keeps.
const maxRecordedAddrs = 16

// ExecuteRecords returns the successful executes so far (the first 65536),
// in order. Addresses beyond the first 16 tensors of a graph are 0.
func (l *Lib) ExecuteRecords() []ExecuteRecord {
	n := l.c.executeRecords()
	out := make([]ExecuteRecord, 0, n)
	name := make([]byte, 64)
	for i := range n {
		var addrs [maxRecordedAddrs]uint64
		var counts [3]uint32
		if l.c.executeRecord(i, unsafe.Pointer(&name[0]), int32(len(name)), unsafe.Pointer(&addrs[0]), unsafe.Pointer(&counts[0])) == 0 {
			break
		}
		r := ExecuteRecord{Seq: int(counts[0])}
		if k := bytes.IndexByte(name, 0); k >= 0 {
			r.Graph = string(name[:k])
		}
		at := func(k int) uintptr {
			if k < maxRecordedAddrs {
				return uintptr(addrs[k])
			}
			return 0
		}
		for k := range int(counts[1]) {
			r.Inputs = append(r.Inputs, at(k))
		}
		for k := range int(counts[2]) {
			r.Outputs = append(r.Outputs, at(int(counts[1])+k))
		}
		out = append(out, r)
	}
	return out
}
