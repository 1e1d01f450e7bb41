// Package htp is the Hexagon NPU step backend of the action expert: it runs
// the offline-compiled action graphs of QNN context binaries through
// package qnnrt, resident for the life of the backend.
//
// Two bundle layouts are served, chosen by the graphs the binaries hold.
// The monolithic one is a single action_step graph that takes the context
// and recomputes its cross-attention keys and values at every step. The
// split one is an action_context graph (context -> cross_keys,
// cross_values), run once per chunk at BindChunk, and an action_step_ctx
// graph that takes those as inputs, run at every step; its cross_keys and
// cross_values inputs read action_context's outputs in place
// (qnnrt.Session.Link; with SharedBuffers through one rpcmem buffer
// registered in both contexts, LinkShared). The two graphs may sit in one binary or in two,
// which are then loaded as one spill-fill group.
//
// New checks the graph's I/O against the step contract (names, ranks and
// shapes from the binary's metadata) before loading it. BindChunk converts
// the per-chunk constants (video keys and values, context, context mask)
// into the graph's input buffers once per chunk, in registered shared
// memory when available, so a Step moves only the latents and the timestep.
// After a DSP subsystem restart (errors.Is(err, qnnrt.ErrSubsystemRestart))
// Reload rebuilds the session and rebinds the last chunk.
package htp

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/qnnrt"
)

// DefaultGraphName is the graph the action-step context binary holds.
const DefaultGraphName = "action_step"

// Graph names of the split bundle.
const (
	// ContextGraphName is the once-per-chunk graph: context -> cross_keys,
	// cross_values.
	ContextGraphName = "action_context"
	// StepCtxGraphName is the per-step graph that takes cross_keys and
	// cross_values as inputs.
	StepCtxGraphName = "action_step_ctx"
)

// maxStepTimes bounds the step timings kept per chunk.
const maxStepTimes = 1000

// DefaultHeadDim is the attention head width used to split the cached
// key/value width into heads when Options.Dims is not given.
const DefaultHeadDim = 128

// Tensor names of the step contract.
const (
	NameLatents     = "latents_action"
	NameTimestep    = "timestep"
	NameVideoKeys   = "video_keys"
	NameVideoValues = "video_values"
	NameContext     = "context"
	NameContextMask = "context_mask"
	NamePrediction  = "pred_noise"
	NameCrossKeys   = "cross_keys"
	NameCrossValues = "cross_values"
)

// Options configure the HTP backend.
type Options struct {
	// ContextPath is the action-step context binary (required unless
	// ContextPaths names the binaries).
	ContextPath string
	// ContextPaths lists further context binaries of the bundle, loaded
	// in the same session (one spill-fill group). When the binaries hold
	// both ContextGraphName and StepCtxGraphName (and GraphName is the
	// default) the backend runs the split graphs; otherwise GraphName.
	ContextPaths []string
	// GraphName is the monolithic graph to run. Default DefaultGraphName.
	GraphName string
	// CoGraphs names further graphs of the binaries for the session to
	// retrieve alongside the action graphs, for another component to run
	// on Session() (the world model's chain when it shares the process,
	// prefill.Attach), so that every context is in one spill-fill group.
	// Reload rebuilds the session: such a component must then be rebuilt.
	CoGraphs []string
	// BackendLib, SystemLib and RPCMemLib are the QNN backend, QNN system
	// and rpcmem libraries (paths or names for the loader); empty means
	// qnnrt's defaults (libQnnHtp.so, libQnnSystem.so, libcdsprpc.so).
	BackendLib, SystemLib, RPCMemLib string
	// ADSPLibraryPath, when set, is exported as ADSP_LIBRARY_PATH before
	// the backend library is loaded.
	ADSPLibraryPath string
	// PerfMode is the HTP performance vote held while the backend is open.
	PerfMode qnnrt.PerfMode
	// Profiling records the device's execute time of every step.
	Profiling bool
	// SharedBuffers puts the per-chunk constants in registered rpcmem
	// shared buffers; when that is unavailable the backend falls back to
	// RAW buffers and reports it once through Logf and Warnings.
	SharedBuffers bool
	// Dims, when set, is the contract the graph must implement exactly
	// (for example expert.FullDims()). Otherwise the contract is derived
	// from the graph, splitting the key width into heads of HeadDim.
	Dims *expert.Dims
	// HeadDim is the head width used when Dims is nil. Default
	// DefaultHeadDim.
	HeadDim int
	// LogLevel is the QNN log level (1 error .. 5 debug, as qnnrt.LogLevel
	// numbers them): the library's lines up to it go to LogSink. 0 means
	// warnings.
	LogLevel int
	// LogSink receives the QNN library's log lines (see
	// qnnrt.Options.LogSink: any thread, must not call back into the
	// backend). Nil drops them; the last ERROR line of a failed call is in
	// its error either way.
	LogSink func(qnnrt.LogLine)
	// RPCVote also sends the RPC control-latency and polling-time options
	// of the performance vote (see qnnrt.SessionOptions.RPCVote).
	RPCVote bool
	// Logf receives warnings, such as the shared-buffer fallback or a part
	// of the performance vote the backend refused.
	Logf func(format string, args ...any)
}

// Backend runs the action_step graph on the HTP. It implements
// expert.Backend; its methods are safe for concurrent use and executes are
// serialised.
type Backend struct {
	opts Options
	lib  *qnnrt.Library
	dims expert.Dims

	split bool // the split bundle: ctxGraph once per chunk, graph per step

	mu       sync.Mutex
	closed   bool
	sess     *qnnrt.Session
	graph    *qnnrt.Graph // the per-step graph
	ctxGraph *qnnrt.Graph // action_context (split bundle), else nil
	shared   bool
	idx      ioIndex
	in       [][]float32
	out      [][]float32
	tau      [1]float32
	mask     []float32
	chunk    *expert.Chunk // the chunk bound with BindChunk, rebound by Reload
	bound    bool          // a chunk is bound (with BindChunk or BindInputs)
	views    bool          // Inputs handed out views since the last bind
	stage    [3][]float32  // staging of keys, values, context for a type Inputs cannot expose
	staged   [3]bool       // the views of the last Inputs are the staging buffers
	times    []qnnrt.Timing
}

// ioIndex is the execute position of each contract tensor in the graph
// (context: in action_context's inputs for the split bundle).
type ioIndex struct {
	latents, timestep, keys, values, context, mask, pred int
}

// chunkInput returns the graph and input position of the per-chunk tensor
// k (0 video keys, 1 video values, 2 context); b.mu is held.
func (b *Backend) chunkInput(k int) (*qnnrt.Graph, int) {
	switch k {
	case 0:
		return b.graph, b.idx.keys
	case 1:
		return b.graph, b.idx.values
	}
	if b.split {
		return b.ctxGraph, b.idx.context
	}
	return b.graph, b.idx.context
}

var _ expert.InputBinder = (*Backend)(nil)

// New loads the libraries, checks the graph of o.ContextPath against the
// step contract and creates the resident session.
func New(ctx context.Context, o Options) (*Backend, error) {
	if o.ContextPath == "" && len(o.ContextPaths) == 0 {
		return nil, errors.New("htp: Options.ContextPath is empty; it names the action_step context binary")
	}
	if o.GraphName == "" {
		o.GraphName = DefaultGraphName
	}
	if o.HeadDim == 0 {
		o.HeadDim = DefaultHeadDim
	}
	if o.HeadDim < 0 {
		return nil, fmt.Errorf("htp: HeadDim %d must be positive", o.HeadDim)
	}
	lib, err := qnnrt.Open(qnnrt.Options{
		BackendPath: o.BackendLib, SystemPath: o.SystemLib, RPCMemPath: o.RPCMemLib,
		ADSPLibraryPath: o.ADSPLibraryPath, Logf: o.Logf, LogSink: o.LogSink,
	})
	if err != nil {
		return nil, fmt.Errorf("htp: %w", err)
	}
	b := &Backend{opts: o, lib: lib}
	if err := b.contract(); err != nil {
		return nil, errors.Join(err, lib.Close())
	}
	b.mask = make([]float32, b.dims.ContextTokens)
	if err := b.open(ctx); err != nil {
		return nil, errors.Join(err, lib.Close())
	}
	return b, nil
}

// paths lists the bundle's binaries.
func (o Options) paths() []string {
	if o.ContextPath == "" {
		return o.ContextPaths
	}
	return append([]string{o.ContextPath}, o.ContextPaths...)
}

// contract reads the binaries' metadata, chooses the monolithic or the
// split graphs and derives the contract they implement.
func (b *Backend) contract() error {
	o := b.opts
	found := map[string]*qnnrt.GraphInfo{}
	var all []string
	for _, p := range o.paths() {
		info, err := b.lib.ReadContextInfo(p)
		if err != nil {
			return fmt.Errorf("htp: %w", err)
		}
		for i := range info.Graphs {
			g := &info.Graphs[i]
			if _, dup := found[g.Name]; !dup {
				found[g.Name] = g
			}
			all = append(all, g.Name)
		}
	}
	cg, okC := found[ContextGraphName]
	sg, okS := found[StepCtxGraphName]
	var err error
	if okC && okS && o.GraphName == DefaultGraphName {
		b.split = true
		if b.dims, err = SplitContractDims(cg, sg, o.Dims, o.HeadDim); err != nil {
			return fmt.Errorf("htp: %w", err)
		}
		return nil
	}
	g, ok := found[o.GraphName]
	if !ok {
		return fmt.Errorf("htp: context binary %s has no graph %q; it has %q (and not both graphs of the split bundle, %q and %q)",
			strings.Join(o.paths(), ", "), o.GraphName, all, ContextGraphName, StepCtxGraphName)
	}
	if b.dims, err = ContractDims(g, o.Dims, o.HeadDim); err != nil {
		return fmt.Errorf("htp: %s: %w", strings.Join(o.paths(), ", "), err)
	}
	return nil
}

// Session returns the backend's resident session (nil once closed), on
// which Options.CoGraphs' graphs may be run. It is replaced by Reload.
func (b *Backend) Session() *qnnrt.Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sess
}

// KVGraph returns the graph whose inputs video_keys and video_values hold
// the chunk's K/V (the step graph), for a producer in the same session
// that writes them in place (prefill.Chain.BindKV); nil once closed. It
// is replaced by Reload.
func (b *Backend) KVGraph() *qnnrt.Graph {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sess == nil {
		return nil
	}
	return b.graph
}

// Split reports whether the backend runs the split bundle (action_context
// once per chunk, action_step_ctx per step).
func (b *Backend) Split() bool { return b.split }

// open creates the session and finds the contract tensors; b.mu is held
// or b is not yet shared.
func (b *Backend) open(ctx context.Context) error {
	o := b.opts
	graphs, expect := []string{o.GraphName}, []qnnrt.GraphSpec{Spec(o.GraphName, b.dims)}
	if b.split {
		graphs = []string{ContextGraphName, StepCtxGraphName}
		expect = SplitSpecs(b.dims)
	}
	sess, err := b.lib.NewSession(ctx, qnnrt.SessionOptions{
		ContextPath:  o.ContextPath,
		ContextPaths: o.ContextPaths,
		Graphs:       append(slices.Clip(graphs), o.CoGraphs...),
		Expect:       expect,
		PerfMode:     o.PerfMode,
		Profiling:    o.Profiling,
		LogLevel:     o.LogLevel,
		RPCVote:      o.RPCVote,
	})
	if err != nil {
		return fmt.Errorf("htp: %w", err)
	}
	fail := func(err error) error { return errors.Join(fmt.Errorf("htp: %w", err), sess.Close()) }
	g, err := sess.Graph(graphs[len(graphs)-1])
	if err != nil {
		return fail(err)
	}
	var cg *qnnrt.Graph
	if b.split {
		if cg, err = sess.Graph(ContextGraphName); err != nil {
			return fail(err)
		}
		for _, n := range []string{NameCrossKeys, NameCrossValues} {
			if o.SharedBuffers {
				_, err = sess.LinkShared(cg, n, g, n) // false: a RAW link, reported once
			} else {
				err = sess.Link(cg, n, g, n)
			}
			if err != nil {
				return fail(err)
			}
		}
	}
	shared := false
	if o.SharedBuffers {
		if b.split {
			shared, err = g.ShareInputs(NameVideoKeys, NameVideoValues, NameContextMask)
			if err == nil && shared {
				shared, err = cg.ShareInputs(NameContext)
			}
		} else {
			shared, err = g.ShareInputs(NameVideoKeys, NameVideoValues, NameContext, NameContextMask)
		}
		if err != nil {
			return fail(err)
		}
	}
	b.sess, b.graph, b.ctxGraph, b.shared = sess, g, cg, shared
	b.idx = ioIndex{
		latents: g.InputIndex(NameLatents), timestep: g.InputIndex(NameTimestep),
		keys: g.InputIndex(NameVideoKeys), values: g.InputIndex(NameVideoValues),
		context: g.InputIndex(NameContext), mask: g.InputIndex(NameContextMask),
		pred: g.OutputIndex(NamePrediction),
	}
	if b.split {
		b.idx.context = cg.InputIndex(NameContext)
	}
	b.in = make([][]float32, len(g.Inputs()))
	b.out = make([][]float32, len(g.Outputs()))
	return nil
}

// runContext runs action_context on the bound context, filling the
// cross-attention keys and values the step graph reads; b.mu is held. A
// no-op for the monolithic graph.
func (b *Backend) runContext(ctx context.Context) error {
	if !b.split {
		return nil
	}
	if _, err := b.sess.RunChain(ctx, b.ctxGraph); err != nil {
		if errors.Is(err, qnnrt.ErrSubsystemRestart) {
			return fmt.Errorf("htp: %w (the DSP restarted: Reload the backend)", err)
		}
		return fmt.Errorf("htp: %w", err)
	}
	return nil
}

// Spec is the qnnrt I/O contract of the action_step graph for d.
func Spec(graph string, d expert.Dims) qnnrt.GraphSpec {
	u := func(v int) uint32 { return uint32(v) }
	kv := []uint32{u(d.Layers), 1, u(d.VideoTokens), u(d.AttnWidth())}
	return qnnrt.GraphSpec{
		Name: graph,
		Inputs: []qnnrt.TensorSpec{
			{Name: NameLatents, Dims: []uint32{1, u(d.ActionTokens), u(d.ActionDim)}},
			{Name: NameTimestep, Dims: []uint32{1}},
			{Name: NameVideoKeys, Dims: kv},
			{Name: NameVideoValues, Dims: kv},
			{Name: NameContext, Dims: []uint32{1, u(d.ContextTokens), u(d.TextDim)}},
			{Name: NameContextMask, Dims: []uint32{1, u(d.ContextTokens)}},
		},
		Outputs: []qnnrt.TensorSpec{
			{Name: NamePrediction, Dims: []uint32{1, u(d.ActionTokens), u(d.ActionDim)}},
		},
	}
}

// SplitSpecs are the qnnrt I/O contracts of the split bundle for d:
//
//	action_context:  context [1,L,T] -> cross_keys, cross_values [N,1,L,A]
//	action_step_ctx: latents_action [1,S,a], timestep [1],
//	                 video_keys, video_values [N,1,Sv,A],
//	                 cross_keys, cross_values [N,1,L,A], context_mask [1,L]
//	                 -> pred_noise [1,S,a]
func SplitSpecs(d expert.Dims) []qnnrt.GraphSpec {
	u := func(v int) uint32 { return uint32(v) }
	kv := []uint32{u(d.Layers), 1, u(d.VideoTokens), u(d.AttnWidth())}
	cross := []uint32{u(d.Layers), 1, u(d.ContextTokens), u(d.AttnWidth())}
	return []qnnrt.GraphSpec{
		{
			Name:   ContextGraphName,
			Inputs: []qnnrt.TensorSpec{{Name: NameContext, Dims: []uint32{1, u(d.ContextTokens), u(d.TextDim)}}},
			Outputs: []qnnrt.TensorSpec{
				{Name: NameCrossKeys, Dims: cross}, {Name: NameCrossValues, Dims: cross},
			},
		},
		{
			Name: StepCtxGraphName,
			Inputs: []qnnrt.TensorSpec{
				{Name: NameLatents, Dims: []uint32{1, u(d.ActionTokens), u(d.ActionDim)}},
				{Name: NameTimestep, Dims: []uint32{1}},
				{Name: NameVideoKeys, Dims: kv},
				{Name: NameVideoValues, Dims: kv},
				{Name: NameCrossKeys, Dims: cross},
				{Name: NameCrossValues, Dims: cross},
				{Name: NameContextMask, Dims: []uint32{1, u(d.ContextTokens)}},
			},
			Outputs: []qnnrt.TensorSpec{
				{Name: NamePrediction, Dims: []uint32{1, u(d.ActionTokens), u(d.ActionDim)}},
			},
		},
	}
}

// findTensor returns the dimensions of the tensor named name in ts,
// checking its rank.
func findTensor(g *qnnrt.GraphInfo, ts []qnnrt.TensorInfo, kind, name string, rank int, pattern string) ([]int, error) {
	i := slices.IndexFunc(ts, func(t qnnrt.TensorInfo) bool { return t.Name == name })
	if i < 0 {
		names := make([]string, len(ts))
		for k, t := range ts {
			names[k] = t.Name
		}
		return nil, fmt.Errorf("graph %q has no %s %q (it has %q); the step contract needs it", g.Name, kind, name, names)
	}
	t := ts[i]
	if len(t.Dims) != rank {
		return nil, fmt.Errorf("graph %q %s %q has shape %s, want %s", g.Name, kind, name, t.Shape(), pattern)
	}
	dims := make([]int, rank)
	for k, d := range t.Dims {
		dims[k] = int(d)
	}
	return dims, nil
}

// SplitContractDims derives the contract of the split bundle (see
// SplitSpecs) from the metadata of its two graphs, with the checks and
// the head split of ContractDims; the cross-attention keys and values
// must be [N,1,L,A] with the layers and width of the video keys and the
// context's L.
func SplitContractDims(cg, sg *qnnrt.GraphInfo, want *expert.Dims, headDim int) (expert.Dims, error) {
	var d expert.Dims
	type req struct {
		g       *qnnrt.GraphInfo
		ts      []qnnrt.TensorInfo
		kind    string
		name    string
		rank    int
		pattern string
	}
	kvPat, crossPat := "[layers,1,video tokens,heads*head dim]", "[layers,1,context tokens,heads*head dim]"
	reqs := []req{
		{sg, sg.Inputs, "input", NameLatents, 3, "[1,S,a]"},
		{sg, sg.Inputs, "input", NameTimestep, 1, "[1]"},
		{sg, sg.Inputs, "input", NameVideoKeys, 4, kvPat},
		{sg, sg.Inputs, "input", NameVideoValues, 4, kvPat},
		{sg, sg.Inputs, "input", NameCrossKeys, 4, crossPat},
		{sg, sg.Inputs, "input", NameCrossValues, 4, crossPat},
		{sg, sg.Inputs, "input", NameContextMask, 2, "[1,L]"},
		{sg, sg.Outputs, "output", NamePrediction, 3, "[1,S,a]"},
		{cg, cg.Inputs, "input", NameContext, 3, "[1,L,T]"},
		{cg, cg.Outputs, "output", NameCrossKeys, 4, crossPat},
		{cg, cg.Outputs, "output", NameCrossValues, 4, crossPat},
	}
	got := make([][]int, len(reqs))
	for i, r := range reqs {
		var err error
		if got[i], err = findTensor(r.g, r.ts, r.kind, r.name, r.rank, r.pattern); err != nil {
			return d, err
		}
	}
	lat, ts, keys, vals, ck, cv, mask, pred, cx, ock, ocv := got[0], got[1], got[2], got[3], got[4], got[5], got[6], got[7], got[8], got[9], got[10]
	if len(sg.Inputs) != 7 || len(sg.Outputs) != 1 {
		return d, fmt.Errorf("graph %q has %d inputs and %d outputs; the split step contract has 7 and 1", sg.Name, len(sg.Inputs), len(sg.Outputs))
	}
	if len(cg.Inputs) != 1 || len(cg.Outputs) != 2 {
		return d, fmt.Errorf("graph %q has %d inputs and %d outputs; the context contract has 1 and 2", cg.Name, len(cg.Inputs), len(cg.Outputs))
	}
	cross := []int{keys[0], 1, cx[1], keys[3]}
	switch {
	case lat[0] != 1:
		return d, fmt.Errorf("graph %q input %q has batch %d, want 1", sg.Name, NameLatents, lat[0])
	case ts[0] != 1:
		return d, fmt.Errorf("graph %q input %q has %d elements, want 1", sg.Name, NameTimestep, ts[0])
	case keys[1] != 1:
		return d, fmt.Errorf("graph %q input %q has batch %d (axis 1), want 1", sg.Name, NameVideoKeys, keys[1])
	case !slices.Equal(keys, vals):
		return d, fmt.Errorf("graph %q: %q has shape %v but %q has %v; they must match", sg.Name, NameVideoKeys, keys, NameVideoValues, vals)
	case cx[0] != 1 || mask[0] != 1:
		return d, fmt.Errorf("graphs %q, %q: %q and %q must have batch 1, got %d and %d", cg.Name, sg.Name, NameContext, NameContextMask, cx[0], mask[0])
	case mask[1] != cx[1]:
		return d, fmt.Errorf("graph %q: %q has %d tokens but %q of %q has %d; they must match", sg.Name, NameContextMask, mask[1], NameContext, cg.Name, cx[1])
	case !slices.Equal(pred, lat):
		return d, fmt.Errorf("graph %q: output %q has shape %v but input %q has %v; they must match", sg.Name, NamePrediction, pred, NameLatents, lat)
	}
	for _, c := range []struct {
		g    string
		name string
		dims []int
	}{{sg.Name, NameCrossKeys, ck}, {sg.Name, NameCrossValues, cv}, {cg.Name, NameCrossKeys, ock}, {cg.Name, NameCrossValues, ocv}} {
		if !slices.Equal(c.dims, cross) {
			return d, fmt.Errorf("graph %q %q has shape %v, want %v ([layers,1,context tokens,width] of the video keys and the context)", c.g, c.name, c.dims, cross)
		}
	}
	d = expert.Dims{Layers: keys[0], VideoTokens: keys[2], ContextTokens: cx[1], TextDim: cx[2],
		ActionTokens: lat[1], ActionDim: lat[2]}
	return finishDims(sg.Name, d, keys[3], want, headDim)
}

// ContractDims derives the step contract from the graph's metadata:
//
//	latents_action [1,S,a]  timestep [1]
//	video_keys, video_values [N,1,Sv,H*D]
//	context [1,L,T]  context_mask [1,L]  ->  pred_noise [1,S,a]
//
// It checks the names, ranks and the consistency of the shapes, splits the
// key width into heads of headDim, and, when want is not nil, requires
// exactly that contract.
func ContractDims(g *qnnrt.GraphInfo, want *expert.Dims, headDim int) (expert.Dims, error) {
	find := func(ts []qnnrt.TensorInfo, kind, name string, rank int, pattern string) ([]int, error) {
		return findTensor(g, ts, kind, name, rank, pattern)
	}
	var d expert.Dims
	lat, err := find(g.Inputs, "input", NameLatents, 3, "[1,S,a]")
	if err != nil {
		return d, err
	}
	ts, err := find(g.Inputs, "input", NameTimestep, 1, "[1]")
	if err != nil {
		return d, err
	}
	keys, err := find(g.Inputs, "input", NameVideoKeys, 4, "[layers,1,video tokens,heads*head dim]")
	if err != nil {
		return d, err
	}
	vals, err := find(g.Inputs, "input", NameVideoValues, 4, "[layers,1,video tokens,heads*head dim]")
	if err != nil {
		return d, err
	}
	cx, err := find(g.Inputs, "input", NameContext, 3, "[1,L,T]")
	if err != nil {
		return d, err
	}
	mask, err := find(g.Inputs, "input", NameContextMask, 2, "[1,L]")
	if err != nil {
		return d, err
	}
	pred, err := find(g.Outputs, "output", NamePrediction, 3, "[1,S,a]")
	if err != nil {
		return d, err
	}
	if len(g.Inputs) != 6 || len(g.Outputs) != 1 {
		return d, fmt.Errorf("graph %q has %d inputs and %d outputs; the step contract has 6 and 1", g.Name, len(g.Inputs), len(g.Outputs))
	}
	switch {
	case lat[0] != 1:
		return d, fmt.Errorf("graph %q input %q has batch %d, want 1", g.Name, NameLatents, lat[0])
	case ts[0] != 1:
		return d, fmt.Errorf("graph %q input %q has %d elements, want 1", g.Name, NameTimestep, ts[0])
	case keys[1] != 1:
		return d, fmt.Errorf("graph %q input %q has batch %d (axis 1), want 1", g.Name, NameVideoKeys, keys[1])
	case !slices.Equal(keys, vals):
		return d, fmt.Errorf("graph %q: %q has shape %v but %q has %v; they must match", g.Name, NameVideoKeys, keys, NameVideoValues, vals)
	case cx[0] != 1 || mask[0] != 1:
		return d, fmt.Errorf("graph %q: %q and %q must have batch 1, got %d and %d", g.Name, NameContext, NameContextMask, cx[0], mask[0])
	case mask[1] != cx[1]:
		return d, fmt.Errorf("graph %q: %q has %d tokens but %q has %d; they must match", g.Name, NameContextMask, mask[1], NameContext, cx[1])
	case !slices.Equal(pred, lat):
		return d, fmt.Errorf("graph %q: output %q has shape %v but input %q has %v; they must match", g.Name, NamePrediction, pred, NameLatents, lat)
	}
	d = expert.Dims{Layers: keys[0], VideoTokens: keys[2], ContextTokens: cx[1], TextDim: cx[2],
		ActionTokens: lat[1], ActionDim: lat[2]}
	return finishDims(g.Name, d, keys[3], want, headDim)
}

// finishDims splits the key width into heads (from want, or of headDim),
// requires want exactly when given, and validates d.
func finishDims(graph string, d expert.Dims, width int, want *expert.Dims, headDim int) (expert.Dims, error) {
	if want != nil {
		if want.AttnWidth() == width {
			d.Heads, d.HeadDim = want.Heads, want.HeadDim
		}
		if d != *want {
			return d, fmt.Errorf("graph %q implements S=%d a=%d N=%d Sv=%d width=%d L=%d T=%d; the contract is S=%d a=%d N=%d Sv=%d width=%d (%d heads x %d) L=%d T=%d",
				graph, d.ActionTokens, d.ActionDim, d.Layers, d.VideoTokens, width, d.ContextTokens, d.TextDim,
				want.ActionTokens, want.ActionDim, want.Layers, want.VideoTokens, want.AttnWidth(), want.Heads, want.HeadDim,
				want.ContextTokens, want.TextDim)
		}
	} else {
		if headDim <= 0 || width%headDim != 0 {
			return d, fmt.Errorf("graph %q has key width %d, not a multiple of the head dim %d; set Options.Dims or HeadDim", graph, width, headDim)
		}
		d.Heads, d.HeadDim = width/headDim, headDim
	}
	if err := d.Validate(); err != nil {
		return d, fmt.Errorf("graph %q: %w", graph, err)
	}
	return d, nil
}

// Dims reports the contract the graph implements.
func (b *Backend) Dims() expert.Dims { return b.dims }

// SharedBuffers reports whether the per-chunk constants live in registered
// shared memory (false when not asked for or after a fallback).
func (b *Backend) SharedBuffers() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.shared
}

// Warnings returns the runtime's warnings so far (such as the shared-buffer
// fallback), each reported once.
func (b *Backend) Warnings() []string { return b.lib.Warnings() }

// Info returns the metadata of the loaded context binary, or nil after
// Close.
func (b *Backend) Info() *qnnrt.ContextInfo {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sess == nil {
		return nil
	}
	return b.sess.Info()
}

// BindChunk validates c and converts its constants into the graph's input
// buffers. The backend keeps c to rebind it after a Reload, until the next
// BindChunk or Close. A chunk that fails validation changes nothing; a bind
// that fails part way (cancelled, say) leaves no chunk bound.
func (b *Backend) BindChunk(ctx context.Context, c *expert.Chunk) error {
	if err := b.dims.ValidateChunk(c); err != nil {
		return fmt.Errorf("htp: %w", err)
	}
	if err := b.checkVisible(c.VisibleVideo); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return err
	}
	b.chunk, b.bound, b.views = nil, false, false
	if err := b.bind(ctx, c); err != nil {
		return err
	}
	b.chunk, b.bound = c, true
	return nil
}

// Inputs implements expert.InputBinder. A FLOAT_32 or FLOAT_16 input is
// exposed in place, in its shared (or RAW) buffer, so the caller's write is
// the only pass over the data; an input of another type (BFLOAT_16,
// quantized) gets a float32 staging buffer, allocated once, that
// BindInputs converts. It unbinds the bound chunk.
func (b *Backend) Inputs() (expert.InputViews, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return expert.InputViews{}, err
	}
	b.chunk, b.bound, b.views = nil, false, false
	var v [3]expert.TensorView
	for k := range v {
		g, idx := b.chunkInput(k)
		buf, dt, err := g.InputBuffer(idx)
		if err != nil {
			return expert.InputViews{}, fmt.Errorf("htp: inputs: %w", err)
		}
		switch dt {
		case qnnrt.Float32:
			v[k].F32 = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf)/4)
		case qnnrt.Float16:
			v[k].F16 = unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(buf))), len(buf)/2)
		}
		b.staged[k] = v[k].Len() == 0
		if b.staged[k] {
			n := []int{b.dims.KVLen(), b.dims.KVLen(), b.dims.ContextLen()}[k]
			if len(b.stage[k]) != n {
				b.stage[k] = make([]float32, n)
			}
			v[k].F32 = b.stage[k]
		}
	}
	b.views = true
	return expert.InputViews{VideoKeys: v[0], VideoValues: v[1], Context: v[2]}, nil
}

// BindInputs implements expert.InputBinder: it checks the mask and the
// visible video count as BindChunk does, then binds what the views of the
// last Inputs hold. A chunk bound this way is not rebound by Reload.
func (b *Backend) BindInputs(ctx context.Context, mask []bool, visibleVideo int) error {
	if err := b.dims.ValidateMask(mask, visibleVideo); err != nil {
		return fmt.Errorf("htp: %w", err)
	}
	if err := b.checkVisible(visibleVideo); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return err
	}
	if !b.views {
		return errors.New("htp: BindInputs without Inputs: no views were written since the last bind")
	}
	b.views = false
	b.setMask(mask)
	b.times = b.times[:0]
	for k := range b.staged {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("htp: bind inputs: %w", err)
		}
		g, idx := b.chunkInput(k)
		var err error
		if b.staged[k] {
			err = g.SetInput(idx, b.stage[k])
		} else {
			err = g.InputWritten(idx)
		}
		if err != nil {
			return fmt.Errorf("htp: bind inputs: %w", err)
		}
	}
	if err := b.graph.SetInput(b.idx.mask, b.mask); err != nil {
		return fmt.Errorf("htp: bind inputs: %w", err)
	}
	if err := b.runContext(ctx); err != nil {
		return fmt.Errorf("htp: bind inputs: %w", err)
	}
	b.bound = true
	return nil
}

// checkVisible refuses a partial video visibility, which the compiled
// graph cannot express.
func (b *Backend) checkVisible(visible int) error {
	if visible != 0 && visible != b.dims.VideoTokens {
		return fmt.Errorf("htp: %w", expert.InvalidInput("visible_video", "chunk attends to %d of %d video tokens; the compiled graph has no visibility input, so VisibleVideo must be 0 or %d",
			visible, b.dims.VideoTokens, b.dims.VideoTokens))
	}
	return nil
}

// setMask converts the context mask to the graph's 1/0 values; b.mu is
// held.
func (b *Backend) setMask(mask []bool) {
	for i, m := range mask {
		b.mask[i] = 0
		if m {
			b.mask[i] = 1
		}
	}
}

// bind writes the chunk's constants and, for the split bundle, runs
// action_context on them; b.mu is held.
func (b *Backend) bind(ctx context.Context, c *expert.Chunk) error {
	b.setMask(c.ContextMask)
	b.times = b.times[:0]
	for k, data := range [][]float32{c.VideoKeys, c.VideoValues, c.Context, b.mask} {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("htp: bind chunk: %w", err)
		}
		g, idx := b.graph, b.idx.mask
		if k < 3 {
			g, idx = b.chunkInput(k)
		}
		if err := g.SetInput(idx, data); err != nil {
			return fmt.Errorf("htp: bind chunk: %w", err)
		}
	}
	if err := b.runContext(ctx); err != nil {
		return fmt.Errorf("htp: bind chunk: %w", err)
	}
	return nil
}

func (b *Backend) usable() error {
	if b.closed {
		return errors.New("htp: backend is closed")
	}
	if b.sess == nil {
		return errors.New("htp: backend has no session (a Reload failed); call Reload again")
	}
	return nil
}

// Step runs the graph once on latents and the timestep tau and writes the
// predicted velocity into pred. A DSP subsystem restart gives an error
// matching qnnrt.ErrSubsystemRestart: call Reload and step again.
func (b *Backend) Step(ctx context.Context, latents []float32, tau float32, pred []float32) error {
	if err := b.dims.CheckLatents("latents", latents); err != nil {
		return fmt.Errorf("htp: %w", err)
	}
	if len(pred) != b.dims.LatentLen() {
		return fmt.Errorf("htp: pred has %d elements, want %d", len(pred), b.dims.LatentLen())
	}
	if math.IsNaN(float64(tau)) || math.IsInf(float64(tau), 0) {
		return fmt.Errorf("htp: timestep %v is not finite", tau)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.usable(); err != nil {
		return err
	}
	if !b.bound {
		return errors.New("htp: Step before BindChunk: no chunk is bound")
	}
	b.tau[0] = tau
	b.in[b.idx.latents], b.in[b.idx.timestep] = latents, b.tau[:]
	b.out[b.idx.pred] = pred
	tm, err := b.graph.Run(ctx, b.in, b.out)
	b.in[b.idx.latents], b.out[b.idx.pred] = nil, nil
	if err != nil {
		if errors.Is(err, qnnrt.ErrSubsystemRestart) {
			return fmt.Errorf("htp: step: %w (the DSP restarted: Reload the backend)", err)
		}
		return fmt.Errorf("htp: step: %w", err)
	}
	if len(b.times) < maxStepTimes {
		b.times = append(b.times, tm)
	}
	return nil
}

// StepTimes returns the timing of every step since the last BindChunk (the
// first 1000).
func (b *Backend) StepTimes() []qnnrt.Timing {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.times)
}

// Profile returns the device execute time of every step since the last
// BindChunk, and false when profiling is off. A step whose profile could
// not be read (the step itself succeeded; qnnrt warns once) has 0 here
// and Profiled false in StepTimes.
func (b *Backend) Profile() ([]time.Duration, bool) {
	if !b.opts.Profiling {
		return nil, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]time.Duration, len(b.times))
	for i, t := range b.times {
		out[i] = t.Device
	}
	return out, true
}

// PerfStatus returns what became of the current session's performance
// vote (each part applied, failed or skipped), or the zero status when
// there is no session.
func (b *Backend) PerfStatus() qnnrt.PerfStatus {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.sess == nil {
		return qnnrt.PerfStatus{}
	}
	return b.sess.PerfStatus()
}

// ContextStats returns action_context's traffic counters (split bundle;
// the zero value otherwise).
func (b *Backend) ContextStats() qnnrt.GraphStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctxGraph == nil {
		return qnnrt.GraphStats{}
	}
	return b.ctxGraph.Stats()
}

// Stats returns the per-step graph's traffic counters (bytes converted
// into inputs, executes) of the current session.
func (b *Backend) Stats() qnnrt.GraphStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.graph == nil {
		return qnnrt.GraphStats{}
	}
	return b.graph.Stats()
}

// Reload closes the session and loads the context binary again, then
// rebinds the last chunk: the way on after a DSP subsystem restart. The
// libraries stay loaded. Errors from tearing down the dead session are
// not returned when the new one comes up.
func (b *Backend) Reload(ctx context.Context) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.New("htp: backend is closed")
	}
	if b.sess != nil {
		_ = b.sess.Close() // the DSP side is gone; freeing may fail and that is expected
		b.sess, b.graph, b.ctxGraph = nil, nil, nil
	}
	if err := b.open(ctx); err != nil {
		b.sess, b.graph, b.ctxGraph = nil, nil, nil
		return fmt.Errorf("htp: reload: %w", err)
	}
	// The views of Inputs pointed into the old session's buffers, and a
	// chunk bound through them lived only there.
	b.bound, b.views = false, false
	if b.chunk != nil {
		if err := b.bind(ctx, b.chunk); err != nil {
			b.chunk = nil
			return fmt.Errorf("htp: reload: rebind chunk: %w", err)
		}
		b.bound = true
	}
	return nil
}

// Close releases the session and the libraries. It is safe to call more
// than once.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	var errs []error
	if b.sess != nil {
		errs = append(errs, b.sess.Close())
	}
	b.sess, b.graph, b.ctxGraph, b.chunk, b.bound, b.views = nil, nil, nil, nil, false, false
	errs = append(errs, b.lib.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("htp: close: %w", err)
	}
	return nil
}

// HardwareID names the device for diagnostics: "htp", with the SoC model
// and the HTP (DSP) architecture that the loaded context binary reports
// when it carries them.
func (b *Backend) HardwareID() string {
	info := b.Info()
	switch {
	case info == nil || (info.SocModel == 0 && info.DSPArch == 0):
		return "htp"
	case info.DSPArch == 0:
		return fmt.Sprintf("htp: SoC model %d", info.SocModel)
	case info.SocModel == 0:
		return fmt.Sprintf("htp: DSP arch v%d", info.DSPArch)
	}
	return fmt.Sprintf("htp: SoC model %d, DSP arch v%d", info.SocModel, info.DSPArch)
}
