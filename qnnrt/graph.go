package qnnrt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"
)

// TensorSpec is an expected graph input or output.
type TensorSpec struct {
	Name string
	Dims []uint32 // nil accepts any shape
}

// GraphSpec is an expected graph I/O contract: the graph's inputs and
// outputs must be exactly the named ones (in any order), with the given
// shapes, and of data types the runtime converts.
type GraphSpec struct {
	Name    string
	Inputs  []TensorSpec
	Outputs []TensorSpec
}

// Check reports the first way the binary's graph spec.Name departs from
// spec, naming the tensor, what it is and what was expected.
func (c *ContextInfo) Check(spec GraphSpec) error {
	g, ok := c.Graph(spec.Name)
	if !ok {
		return fmt.Errorf("qnnrt: context binary has no graph %q; it has %q", spec.Name, c.GraphNames())
	}
	if err := checkTensors(g.Name, "input", g.Inputs, spec.Inputs); err != nil {
		return err
	}
	return checkTensors(g.Name, "output", g.Outputs, spec.Outputs)
}

func checkTensors(graph, kind string, have []TensorInfo, want []TensorSpec) error {
	names := make([]string, len(have))
	for i, t := range have {
		names[i] = t.Name
	}
	for _, w := range want {
		i := slices.Index(names, w.Name)
		if i < 0 {
			return fmt.Errorf("qnnrt: graph %q has no %s %q; its %ss are %q", graph, kind, w.Name, kind, names)
		}
		t := have[i]
		if w.Dims != nil && !slices.Equal(t.Dims, w.Dims) {
			return fmt.Errorf("qnnrt: graph %q %s %q has shape %s, want %s", graph, kind, w.Name, t.Shape(), formatDims(w.Dims))
		}
		if _, err := newCodec(t); err != nil {
			return fmt.Errorf("qnnrt: graph %q %s: %w", graph, kind, err)
		}
	}
	for _, n := range names {
		if !slices.ContainsFunc(want, func(w TensorSpec) bool { return w.Name == n }) {
			return fmt.Errorf("qnnrt: graph %q has %s %q that the expected contract does not name (expected %d %ss)",
				graph, kind, n, len(want), kind)
		}
	}
	return nil
}

// Timing is the time one execute took.
type Timing struct {
	Host     time.Duration // wall time of the graphExecute call
	Device   time.Duration // EXECUTE time the profiler reported (profiling only)
	Profiled bool          // Device is valid; false when profiling is off or its events could not be read
}

// GraphStats counts a graph's traffic since it was retrieved.
type GraphStats struct {
	Executes     uint64
	BytesWritten uint64 // bytes converted into input buffers (RAW or shared)
	BytesRead    uint64 // bytes converted out of output buffers
	Shared       []string
	// ProfileFailures counts successful executes whose profile events
	// could not be read (their Timing has Profiled false).
	ProfileFailures uint64
}

// Graph is a retrieved graph with its I/O buffers. Its methods are safe for
// concurrent use; executes are serialised.
type Graph struct {
	s      *Session
	ctx    *loadedContext
	pos    int // index in s.graphs (the lock order of Link)
	info   GraphInfo
	handle uintptr

	mu     sync.Mutex
	closed bool
	meta   arena // Qnn_Tensor_t arrays, dimensions, names, out-parameters
	in     []*ioTensor
	out    []*ioTensor
	inArr  unsafe.Pointer
	outArr unsafe.Pointer
	events unsafe.Pointer // profileGetEvents out-parameters and event data
	stats  GraphStats
	// args holds graphExecute's arguments: a variadic call from a fresh
	// slice would allocate it at every execute.
	args [7]uintptr
}

// ioTensor is one graph input or output and its buffer.
type ioTensor struct {
	info   TensorInfo
	codec  codec
	slot   *qnnTensor     // this tensor's entry in the execute array
	buf    unsafe.Pointer // the data: raw staging memory or the shared buffer
	raw    cmem
	shared *sharedBuffer
	set    bool // an input has been written at least once
	// link is the output of another graph this input reads in place
	// (Session.Link), linkGraph that graph; nil for an input of its own.
	link      *ioTensor
	linkGraph *Graph
	// linkedBy lists the inputs (of other graphs) that read this output.
	linkedBy []*ioTensor
	// written: an output holds the result of a successful execute
	// (guarded by the session's execMu).
	written bool
}

func (s *Session) retrieve(lc *loadedContext, name string) (*Graph, error) {
	gi, _ := lc.info.Graph(name)
	g := &Graph{s: s, ctx: lc, info: *gi}
	l := s.lib
	cname := cstringBytes(name)
	if err := l.call(fmt.Sprintf("graphRetrieve %q", name), l.core[fnGraphRetrieve], lc.handle, uintptr(unsafe.Pointer(&cname[0])), uintptr(unsafe.Pointer(&g.handle))); err != nil {
		return nil, err
	}
	size := 1024 + int(unsafe.Sizeof(qnnTensor{}))*(len(gi.Inputs)+len(gi.Outputs))
	for _, t := range slices.Concat(gi.Inputs, gi.Outputs) {
		size += 4*len(t.Dims) + len(t.Name) + 16
	}
	var err error
	if g.meta.mem, err = allocC(size); err != nil {
		return nil, err
	}
	if g.events, err = g.meta.alloc(64, 8); err != nil {
		return nil, g.fail(err)
	}
	if g.in, g.inArr, err = g.buildTensors(gi.Inputs, "input"); err != nil {
		return nil, g.fail(err)
	}
	if g.out, g.outArr, err = g.buildTensors(gi.Outputs, "output"); err != nil {
		return nil, g.fail(err)
	}
	for _, t := range g.out {
		if err := t.allocRaw(); err != nil {
			return nil, g.fail(err)
		}
	}
	return g, nil
}

// fail releases what retrieve built and returns err.
func (g *Graph) fail(err error) error { return errors.Join(err, g.freeMemory()) }

// buildTensors fills the Qnn_Tensor_t array for execute from the metadata:
// same version, id, name, types, quantization and dimensions, RAW memory.
func (g *Graph) buildTensors(infos []TensorInfo, kind string) ([]*ioTensor, unsafe.Pointer, error) {
	if len(infos) == 0 {
		return nil, nil, nil
	}
	arr, err := g.meta.alloc(int(unsafe.Sizeof(qnnTensor{}))*len(infos), 8)
	if err != nil {
		return nil, nil, err
	}
	out := make([]*ioTensor, len(infos))
	for i, ti := range infos {
		c, err := newCodec(ti)
		if err != nil {
			return nil, nil, fmt.Errorf("qnnrt: graph %q %s: %w", g.info.Name, kind, err)
		}
		if ti.Elements() <= 0 || ti.Bytes() > 1<<32-1 {
			return nil, nil, fmt.Errorf("qnnrt: graph %q %s %q has %d bytes (%s %s); a client buffer holds 1 to 2^32-1",
				g.info.Name, kind, ti.Name, ti.Bytes(), ti.DataType, ti.Shape())
		}
		slot := (*qnnTensor)(unsafe.Add(arr, uintptr(i)*unsafe.Sizeof(qnnTensor{})))
		slot.Version = ti.Version
		v := &slot.V2.tensorV1
		v.ID = ti.ID
		if v.Name, err = g.meta.cstring(ti.Name); err != nil {
			return nil, nil, err
		}
		v.Type = ti.Type
		v.DataType = uint32(ti.DataType)
		v.QuantizeParams.EncodingDefinition = definitionUndefined
		if ti.Quant.Defined {
			v.QuantizeParams.EncodingDefinition = definitionDefined
			v.QuantizeParams.QuantizationEncoding = ti.Quant.Encoding
			switch ti.Quant.Encoding {
			case encodingScaleOffset:
				*v.QuantizeParams.scaleOffset() = scaleOffset{Scale: ti.Quant.Scale, Offset: ti.Quant.Offset}
			case encodingBwScaleOffset:
				*v.QuantizeParams.bwScaleOffset() = bwScaleOffset{Bitwidth: ti.Quant.Bitwidth, Scale: ti.Quant.Scale, Offset: ti.Quant.Offset}
			}
		}
		v.Rank = uint32(len(ti.Dims))
		if len(ti.Dims) > 0 {
			dims, err := g.meta.alloc(4*len(ti.Dims), 4)
			if err != nil {
				return nil, nil, err
			}
			copy(unsafe.Slice((*uint32)(dims), len(ti.Dims)), ti.Dims)
			v.Dimensions = dims
		}
		v.MemType = memTypeRaw
		v.ClientBuf.DataSize = uint32(ti.Bytes())
		out[i] = &ioTensor{info: ti, codec: c, slot: slot}
	}
	return out, arr, nil
}

// allocRaw gives the tensor RAW staging memory and points its slot at it.
func (t *ioTensor) allocRaw() error {
	m, err := allocC(t.info.Bytes())
	if err != nil {
		return err
	}
	t.raw = m
	t.buf = m.ptr(0)
	v := &t.slot.V2.tensorV1
	v.MemType = memTypeRaw
	v.ClientBuf = clientBuffer{Data: t.buf, DataSize: uint32(t.info.Bytes())}
	return nil
}

// freeMemory unmaps the graph's staging and metadata memory (after the
// context is gone or was never created).
func (g *Graph) freeMemory() error {
	var errs []error
	for _, t := range slices.Concat(g.in, g.out) {
		errs = append(errs, t.raw.free())
		t.buf = nil
	}
	g.in, g.out = nil, nil
	errs = append(errs, g.meta.mem.free())
	return errors.Join(errs...)
}

// Name returns the graph's name.
func (g *Graph) Name() string { return g.info.Name }

// Inputs describes the graph's inputs in execute order.
func (g *Graph) Inputs() []TensorInfo { return slices.Clone(g.info.Inputs) }

// Outputs describes the graph's outputs in execute order.
func (g *Graph) Outputs() []TensorInfo { return slices.Clone(g.info.Outputs) }

// InputIndex returns the position of the input named name, or -1.
func (g *Graph) InputIndex(name string) int {
	return slices.IndexFunc(g.info.Inputs, func(t TensorInfo) bool { return t.Name == name })
}

// OutputIndex returns the position of the output named name, or -1.
func (g *Graph) OutputIndex(name string) int {
	return slices.IndexFunc(g.info.Outputs, func(t TensorInfo) bool { return t.Name == name })
}

// Stats returns the graph's counters.
func (g *Graph) Stats() GraphStats {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.stats
	st.Shared = slices.Clone(st.Shared)
	return st
}

// SetInput converts src into input i's buffer, where it stays for the
// following executes until overwritten.
func (g *Graph) SetInput(i int, src []float32) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return g.closedErr()
	}
	return g.setInput(i, src)
}

func (g *Graph) closedErr() error {
	return fmt.Errorf("qnnrt: graph %q: session is closed", g.info.Name)
}

func (g *Graph) setInput(i int, src []float32) error {
	if i < 0 || i >= len(g.in) {
		return fmt.Errorf("qnnrt: graph %q has no input %d (it has %d)", g.info.Name, i, len(g.in))
	}
	t := g.in[i]
	if t.link != nil {
		return g.linkedErr(t)
	}
	if len(src) != t.info.Elements() {
		return fmt.Errorf("qnnrt: graph %q input %q: got %d values, want %d (%s %s)",
			g.info.Name, t.info.Name, len(src), t.info.Elements(), t.info.DataType, t.info.Shape())
	}
	if t.buf == nil {
		if err := t.allocRaw(); err != nil {
			return err
		}
	}
	t.codec.encode(t.buf, src)
	t.set = true
	g.stats.BytesWritten += uint64(t.info.Bytes())
	return nil
}

// Run writes the non-nil entries of in to the graph's inputs (a nil entry
// keeps what the input holds), executes the graph and converts the outputs
// into the non-nil entries of out. in and out have one entry per input and
// output in execute order (Inputs, Outputs). Every input must have been
// written at least once.
func (g *Graph) Run(ctx context.Context, in, out [][]float32) (Timing, error) {
	if err := ctx.Err(); err != nil {
		return Timing{}, fmt.Errorf("qnnrt: graph %q: %w", g.info.Name, err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return Timing{}, g.closedErr()
	}
	if len(in) != len(g.in) || len(out) != len(g.out) {
		return Timing{}, fmt.Errorf("qnnrt: graph %q: Run got %d inputs and %d outputs, want %d and %d",
			g.info.Name, len(in), len(out), len(g.in), len(g.out))
	}
	for i, o := range out {
		if o != nil && len(o) != g.out[i].info.Elements() {
			t := g.out[i].info
			return Timing{}, fmt.Errorf("qnnrt: graph %q output %q: buffer has %d values, want %d (%s)",
				g.info.Name, t.Name, len(o), t.Elements(), t.Shape())
		}
	}
	for i, x := range in {
		if x != nil {
			if err := g.setInput(i, x); err != nil {
				return Timing{}, err
			}
		}
	}
	for _, t := range g.in {
		if !t.set {
			return Timing{}, fmt.Errorf("qnnrt: graph %q input %q was never written", g.info.Name, t.info.Name)
		}
	}
	tm, err := g.execute()
	if err != nil {
		return tm, err
	}
	for i, o := range out {
		if o != nil {
			g.out[i].codec.decode(o, g.out[i].buf)
			g.stats.BytesRead += uint64(g.out[i].info.Bytes())
		}
	}
	return tm, nil
}

// execute runs graphExecute on the prepared arrays; g.mu is held.
func (g *Graph) execute() (Timing, error) {
	s, l := g.s, g.s.lib
	profile := s.profile
	if profile != 0 {
		s.profMu.Lock()
		defer s.profMu.Unlock()
	}
	s.execMu.Lock()
	defer s.execMu.Unlock()
	for _, t := range g.in {
		if t.link != nil && !t.link.written {
			return Timing{}, fmt.Errorf("qnnrt: graph %q input %q reads output %q of graph %q, which has not executed successfully yet",
				g.info.Name, t.info.Name, t.link.info.Name, t.linkGraph.info.Name)
		}
	}
	mark := l.logs.mark()
	t0 := time.Now()
	g.args = [7]uintptr{g.handle, uintptr(g.inArr), uintptr(len(g.in)), uintptr(g.outArr), uintptr(len(g.out)), profile, 0}
	ret := ccall(l.core[fnGraphExecute], g.args[:]...)
	tm := Timing{Host: time.Since(t0)}
	for _, t := range g.out {
		t.written = ret == 0
	}
	if ret != 0 {
		return tm, l.failed(fmt.Sprintf("graphExecute %q", g.info.Name), ret, mark)
	}
	g.stats.Executes++
	if profile != 0 {
		// The execute succeeded: a profiler that cannot be read costs the
		// step its device time, never its output.
		d, ok, err := g.readProfile(profile)
		if err != nil {
			g.stats.ProfileFailures++
			l.warnOnce("profile-read", "qnnrt: graph %q: device execute times are missing (the executes themselves succeed): %v", g.info.Name, err)
			d, ok = 0, false
		}
		tm.Device, tm.Profiled = d, ok
	}
	return tm, nil
}

// maxProfileEvents bounds the event count profileGetEvents may report;
// more is taken for a corrupt answer rather than read.
const maxProfileEvents = 1 << 16

// readProfile returns the duration of the newest EXECUTE event of the
// profile handle.
func (g *Graph) readProfile(profile uintptr) (time.Duration, bool, error) {
	l := g.s.lib
	idsOut, nOut, data := g.events, unsafe.Add(g.events, 8), unsafe.Add(g.events, 16)
	*(*uintptr)(idsOut), *(*uint32)(nOut) = 0, 0
	if err := l.call("profileGetEvents", l.core[fnProfileGetEvents], profile, uintptr(idsOut), uintptr(nOut)); err != nil {
		return 0, false, err
	}
	ids, n := *(*unsafe.Pointer)(idsOut), *(*uint32)(nOut)
	if ids == nil || n == 0 {
		return 0, false, nil
	}
	if n > maxProfileEvents {
		return 0, false, fmt.Errorf("qnnrt: profileGetEvents reported %d events, more than the %d a basic profile can hold: not read", n, maxProfileEvents)
	}
	for i := int(n) - 1; i >= 0; i-- {
		id := *(*uint64)(unsafe.Add(ids, 8*i))
		ev := (*profileEventData)(data)
		*ev = profileEventData{}
		if err := l.call("profileGetEventData", l.core[fnProfileGetEventData], uintptr(id), uintptr(data)); err != nil {
			return 0, false, err
		}
		if ev.Type == profileEventExecute && ev.Unit == profileUnitMicrosec {
			return time.Duration(ev.Value) * time.Microsecond, true, nil
		}
	}
	return 0, false, nil
}

// InputBuffer returns input i's buffer (the shared buffer, or RAW staging
// memory, allocated here on first use) as bytes in the input's data type,
// for a caller to write the input in place instead of converting a
// float32 slice with SetInput. The memory is the runtime's, outside the Go
// heap: it stays valid until ShareInputs changes the input's home or the
// session closes, and must not be written during an execute. Call
// InputWritten once it holds the input.
func (g *Graph) InputBuffer(i int) ([]byte, DataType, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, 0, g.closedErr()
	}
	if i < 0 || i >= len(g.in) {
		return nil, 0, fmt.Errorf("qnnrt: graph %q has no input %d (it has %d)", g.info.Name, i, len(g.in))
	}
	t := g.in[i]
	if t.link != nil {
		return nil, 0, g.linkedErr(t)
	}
	if t.buf == nil {
		if err := t.allocRaw(); err != nil {
			return nil, 0, err
		}
	}
	return unsafe.Slice((*byte)(t.buf), t.info.Bytes()), t.info.DataType, nil
}

// InputWritten records that the caller wrote input i through InputBuffer,
// so that executes may use it.
func (g *Graph) InputWritten(i int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return g.closedErr()
	}
	if i < 0 || i >= len(g.in) || g.in[i].buf == nil || g.in[i].link != nil {
		return fmt.Errorf("qnnrt: graph %q input %d was not opened with InputBuffer", g.info.Name, i)
	}
	g.in[i].set = true
	g.stats.BytesWritten += uint64(g.in[i].info.Bytes())
	return nil
}
