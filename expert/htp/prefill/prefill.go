// Package prefill runs the world model's graphs on the HTP: the VAE
// encoder and the prefill chain over contiguous layer ranges, each its own
// context binary, all in one qnnrt session (one spill-fill group), chained
// in place, writing every layer's video keys and values into caller
// buffers laid out [layers, 1, video tokens, width] (the hand-off slot's
// layout).
//
// The contracts (names fixed, shapes read from the binaries):
//
//	vae_encoder: image [1,3,H,W] -> latent [1,C,h,w]
//	prefill_0:   latent, context [1,L,T] -> ctx_v [1,L,A],
//	             video_keys, video_values [n_0,1,Sv,A], hidden_out [1,Sv,A]
//	prefill_i:   hidden [1,Sv,A], ctx_v [1,L,A] -> video_keys, video_values
//	             [n_i,1,Sv,A], and hidden_out except for the last range
//
// vae_encoder's latent feeds prefill_0's, prefill_0's ctx_v feeds every
// later range's, and each range's hidden_out the next one's hidden.
//
// A Chain is the world model's HTP K/V stage: worldmodel.ModelOptions.KV
// takes it (RunKV). New opens the chain in its own session (the world
// model in a process of its own); Attach builds it on the action expert's
// session when both share a process, so that every context is in one
// spill-fill group.
package prefill

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/x448/float16"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/qnnrt"
)

// Graph and tensor names of the world model's contracts.
const (
	EncoderGraph = "vae_encoder"
	// PrefillPrefix names the ranges: prefill_0, prefill_1, ...
	PrefillPrefix = "prefill_"

	NameImage       = "image"
	NameLatent      = "latent"
	NameContext     = "context"
	NameCtxV        = "ctx_v"
	NameVideoKeys   = "video_keys"
	NameVideoValues = "video_values"
	NameHidden      = "hidden"
	NameHiddenOut   = "hidden_out"
)

// maxRanges bounds the prefill ranges of one chain.
const maxRanges = 30

// Runner runs the world model's prefill into K/V buffers: it encodes image
// (the VAE graph's input, flattened), runs the prefill chain over the text
// context and writes every layer's keys and values into keys and values
// ([layers,1,Sv,A] each, float32).
type Runner interface {
	Run(ctx context.Context, image, text, keys, values []float32) error
}

// Options configure a Chain.
type Options struct {
	// ContextPaths are the binaries holding vae_encoder and prefill_0 ..
	// prefill_{k-1}, in any order and grouping (required).
	ContextPaths []string
	// BackendLib, SystemLib and RPCMemLib are the QNN libraries (empty:
	// qnnrt's defaults); ADSPLibraryPath is exported before loading.
	BackendLib, SystemLib, RPCMemLib, ADSPLibraryPath string
	// PerfMode is the HTP performance vote held while the chain is open.
	PerfMode qnnrt.PerfMode
	// SharedBuffers chains the graphs through rpcmem buffers registered
	// with both contexts of each link (qnnrt.Session.LinkShared), falling
	// back to RAW links with a warning.
	SharedBuffers bool
	// LogLevel, LogSink and Logf are passed to qnnrt.
	LogLevel int
	LogSink  func(qnnrt.LogLine)
	Logf     func(format string, args ...any)
}

// Chain is the resident world-model graph chain. It implements Runner;
// Run calls are serialised.
type Chain struct {
	mu      sync.Mutex // serialises Run and Close
	lib     *qnnrt.Library
	sess    *qnnrt.Session
	enc     *qnnrt.Graph
	ranges  []*qnnrt.Graph
	layers  []int // per range
	kvLen   int   // elements of one layer's keys: Sv*A
	imgLen  int
	ctxLen  int
	keysIdx []int // per range: output positions of video_keys
	valsIdx []int
	owned   bool      // lib and sess are the chain's own (New), not a host's (Attach)
	shared  bool      // links through rpcmem buffers (Options.SharedBuffers)
	f16     bool      // every range gives its K/V in F16: RunKV copies them as they are
	f32     bool      // every range gives its K/V in F32: Run's float32 buffers may be the bound memory
	scratch []float32 // the F32 staging of F16 K/V views (RunKV)
	bind    kvBinding // the K/V outputs written in place into another graph's inputs (BindKV)
}

// kvBinding records BindKV: the consumer's graph and inputs, which
// outputs are bound, and where the consumer's inputs live.
type kvBinding struct {
	graph, keys, values string
	logf                func(format string, args ...any)
	keysOK, valsOK      []bool  // per range: its output is written in place
	keysAt, valsAt      uintptr // the consumer's input buffers
}

var _ Runner = (*Chain)(nil)

// New loads the binaries in one session, checks the contracts and links
// the graphs.
func New(ctx context.Context, o Options) (*Chain, error) {
	if len(o.ContextPaths) == 0 {
		return nil, errors.New("prefill: Options.ContextPaths names no binary")
	}
	lib, err := qnnrt.Open(qnnrt.Options{
		BackendPath: o.BackendLib, SystemPath: o.SystemLib, RPCMemPath: o.RPCMemLib,
		ADSPLibraryPath: o.ADSPLibraryPath, Logf: o.Logf, LogSink: o.LogSink,
	})
	if err != nil {
		return nil, fmt.Errorf("prefill: %w", err)
	}
	c := &Chain{lib: lib, owned: true}
	if err := c.open(ctx, o); err != nil {
		return nil, errors.Join(err, c.Close())
	}
	return c, nil
}

// Attach builds the chain on a session another component opened and
// owns (the action expert's, when the world model shares its process:
// every context then sits in that session's one spill-fill group). The
// session must have retrieved vae_encoder and prefill_0 .. prefill_{k-1}
// (GraphNames lists them). Close releases only the chain's links; the
// session stays the host's. After the host rebuilds its session, Reattach
// moves the chain to the new one; after the host closes it, the chain's
// runs fail.
func Attach(sess *qnnrt.Session, sharedBuffers bool) (*Chain, error) {
	var infos []*qnnrt.ContextInfo
	if sess != nil {
		infos = sess.Infos()
	}
	names, err := GraphNames(infos)
	if err != nil {
		return nil, err
	}
	c := &Chain{sess: sess}
	if err := c.attach(names, sharedBuffers); err != nil {
		c.sess = nil
		return nil, err
	}
	return c, nil
}

// GraphNames returns the world model's graphs the binaries hold, in chain
// order (vae_encoder, prefill_0, prefill_1, ...), or an error naming what
// is missing.
func GraphNames(infos []*qnnrt.ContextInfo) ([]string, error) {
	found := map[string]bool{}
	var paths []string
	for _, info := range infos {
		paths = append(paths, info.Path)
		for _, g := range info.GraphNames() {
			found[g] = true
		}
	}
	if !found[EncoderGraph] {
		return nil, fmt.Errorf("prefill: no binary of %q holds %q", paths, EncoderGraph)
	}
	names := []string{EncoderGraph}
	for i := 0; found[fmt.Sprintf("%s%d", PrefillPrefix, i)]; i++ {
		if i == maxRanges {
			return nil, fmt.Errorf("prefill: more than %d prefill ranges", maxRanges)
		}
		names = append(names, fmt.Sprintf("%s%d", PrefillPrefix, i))
	}
	if len(names) == 1 {
		return nil, fmt.Errorf("prefill: no binary of %q holds %s0", paths, PrefillPrefix)
	}
	return names, nil
}

func (c *Chain) open(ctx context.Context, o Options) error {
	c.sess = nil
	var infos []*qnnrt.ContextInfo
	for _, p := range o.ContextPaths {
		info, err := c.lib.ReadContextInfo(p)
		if err != nil {
			return fmt.Errorf("prefill: %w", err)
		}
		info.Path = p
		infos = append(infos, info)
	}
	names, err := GraphNames(infos)
	if err != nil {
		return err
	}
	sess, err := c.lib.NewSession(ctx, qnnrt.SessionOptions{
		ContextPaths: o.ContextPaths, Graphs: names, PerfMode: o.PerfMode, LogLevel: o.LogLevel,
	})
	if err != nil {
		return fmt.Errorf("prefill: %w", err)
	}
	c.sess = sess
	return c.attach(names, o.SharedBuffers)
}

// Reattach rebuilds an attached chain (Attach) on the host's new session,
// after the host rebuilt its own (htp.Backend.Reload after a DSP
// restart). A chain opened with New has its own session and refuses.
func (c *Chain) Reattach(sess *qnnrt.Session) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owned {
		return errors.New("prefill: Reattach on a chain with its own session (New); only an attached one follows its host")
	}
	if sess == nil {
		return errors.New("prefill: Reattach: no session")
	}
	names, err := GraphNames(sess.Infos())
	if err != nil {
		return err
	}
	c.sess, c.enc, c.ranges, c.layers, c.keysIdx, c.valsIdx = sess, nil, nil, nil, nil, nil
	bind := c.bind
	c.bind = kvBinding{}
	if err := c.attach(names, c.shared); err != nil {
		c.sess = nil
		return err
	}
	if bind.graph != "" {
		dst, err := sess.Graph(bind.graph)
		if err != nil {
			return fmt.Errorf("prefill: Reattach: the K/V consumer: %w", err)
		}
		if _, err := c.bindKV(dst, bind.keys, bind.values, bind.logf); err != nil {
			return fmt.Errorf("prefill: Reattach: %w", err)
		}
	}
	return nil
}

// BindKV makes every range write its video_keys and video_values straight
// into its layers of inputs keys and values of graph dst, a graph of the
// chain's session (the action expert's step graph when the world model
// shares its process, htp.Backend.KVGraph): each output is registered as
// a region of the input's rpcmem allocation (qnnrt.Session.BindOutput),
// so no host copy of the K/V is left. It needs dst's inputs in shared
// buffers of their own (the expert's htp.shared_buffers) of the ranges'
// data type, laid out [layers,1,Sv,A] with every range's first layer on a
// 64-byte boundary.
//
// An output that cannot be bound keeps today's copy in RunKV and Run; the
// outcome is reported through logf (nil: not reported) in one line, naming
// what did not match. It returns whether every output is bound. An error
// is for a dst outside the session or without those inputs.
//
// Once bound, every run of the chain writes into dst's inputs, whatever
// buffers it is given: run it only to fill them (between the expert's
// Inputs and BindInputs). RunKV into views of exactly those inputs copies
// nothing; into other buffers it copies from them. The binding follows
// the chain through Reattach and lasts until the session closes.
func (c *Chain) BindKV(dst *qnnrt.Graph, keys, values string, logf func(format string, args ...any)) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == nil {
		return false, errors.New("prefill: BindKV: chain is closed")
	}
	return c.bindKV(dst, keys, values, logf)
}

// bindKV is BindKV with c.mu held.
func (c *Chain) bindKV(dst *qnnrt.Graph, keys, values string, logf func(format string, args ...any)) (bool, error) {
	if dst == nil {
		return false, errors.New("prefill: BindKV: no graph to write into")
	}
	ki, vi := dst.InputIndex(keys), dst.InputIndex(values)
	if ki < 0 || vi < 0 {
		return false, fmt.Errorf("prefill: BindKV: graph %q has no inputs %q and %q", dst.Name(), keys, values)
	}
	if c.bind.graph != "" {
		return false, fmt.Errorf("prefill: BindKV: the chain's K/V are already bound to graph %q", c.bind.graph)
	}
	b := kvBinding{graph: dst.Name(), keys: keys, values: values, logf: logf,
		keysOK: make([]bool, len(c.ranges)), valsOK: make([]bool, len(c.ranges))}
	var reasons []string
	at := 0
	for i, g := range c.ranges {
		for _, o := range []struct {
			out, in string
			ok      *bool
		}{{NameVideoKeys, keys, &b.keysOK[i]}, {NameVideoValues, values, &b.valsOK[i]}} {
			if err := c.sess.BindOutput(g, o.out, dst, o.in, at); err != nil {
				reasons = append(reasons, err.Error())
			} else {
				*o.ok = true
			}
		}
		at += c.layers[i]
	}
	n := 0
	for i := range c.ranges {
		n += btoi(b.keysOK[i]) + btoi(b.valsOK[i])
	}
	if n > 0 {
		ka, err := dst.InputAddress(ki)
		if err != nil {
			return false, fmt.Errorf("prefill: BindKV: %w", err)
		}
		va, err := dst.InputAddress(vi)
		if err != nil {
			return false, fmt.Errorf("prefill: BindKV: %w", err)
		}
		b.keysAt, b.valsAt = ka, va
	}
	c.bind = b
	all := n == 2*len(c.ranges)
	if logf != nil {
		switch {
		case all:
			logf("prefill: world-model K/V written in place into %q %s and %s (%d ranges, no host copy)", dst.Name(), keys, values, len(c.ranges))
		case n == 0:
			logf("prefill: world-model K/V copied on the host into %q %s and %s: %s", dst.Name(), keys, values, reasons[0])
		default:
			logf("prefill: world-model K/V: %d of %d outputs written in place into %q, the others copied on the host: %s",
				n, 2*len(c.ranges), dst.Name(), strings.Join(reasons, "; "))
		}
	}
	return all, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// inPlace reports whether output k (0 keys, 1 values) of range i is
// already at its place in dst, a buffer at address at: bound (BindKV) and
// dst is the consumer's input. c.mu is held.
func (c *Chain) inPlace(i, k int, at uintptr) bool {
	b := &c.bind
	if b.graph == "" || at == 0 {
		return false
	}
	if k == 0 {
		return b.keysOK[i] && at == b.keysAt
	}
	return b.valsOK[i] && at == b.valsAt
}

// addr is the address of x's first element (0 when empty).
func addr[T any](x []T) uintptr {
	if len(x) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(unsafe.SliceData(x)))
}

// attach finds the named graphs in c.sess, checks the contracts and links
// them.
func (c *Chain) attach(names []string, sharedBuffers bool) error {
	c.shared = sharedBuffers
	sess := c.sess
	var err error
	if c.enc, err = sess.Graph(EncoderGraph); err != nil {
		return fmt.Errorf("prefill: %w", err)
	}
	for _, n := range names[1:] {
		g, err := sess.Graph(n)
		if err != nil {
			return fmt.Errorf("prefill: %w", err)
		}
		c.ranges = append(c.ranges, g)
	}
	if err := c.check(); err != nil {
		return fmt.Errorf("prefill: %w", err)
	}
	link := func(src *qnnrt.Graph, out string, dst *qnnrt.Graph, in string) error {
		if sharedBuffers {
			_, err := sess.LinkShared(src, out, dst, in) // false: a RAW link, reported once
			return err
		}
		return sess.Link(src, out, dst, in)
	}
	if err := link(c.enc, NameLatent, c.ranges[0], NameLatent); err != nil {
		return fmt.Errorf("prefill: %w", err)
	}
	for i := 1; i < len(c.ranges); i++ {
		if err := link(c.ranges[i-1], NameHiddenOut, c.ranges[i], NameHidden); err != nil {
			return fmt.Errorf("prefill: %w", err)
		}
		if err := link(c.ranges[0], NameCtxV, c.ranges[i], NameCtxV); err != nil {
			return fmt.Errorf("prefill: %w", err)
		}
	}
	return nil
}

// shape returns the dims of the tensor named name among ts, or nil.
func shape(ts []qnnrt.TensorInfo, name string) []uint32 {
	i := slices.IndexFunc(ts, func(t qnnrt.TensorInfo) bool { return t.Name == name })
	if i < 0 {
		return nil
	}
	return ts[i].Dims
}

// check verifies the contracts and records the layer counts.
func (c *Chain) check() error {
	ein, eout := c.enc.Inputs(), c.enc.Outputs()
	img, lat := shape(ein, NameImage), shape(eout, NameLatent)
	if len(ein) != 1 || len(eout) != 1 || len(img) != 4 || len(lat) != 4 {
		return fmt.Errorf("graph %q must take %q [1,3,H,W] and give %q [1,C,h,w]", EncoderGraph, NameImage, NameLatent)
	}
	p0 := c.ranges[0]
	cx, ctxV := shape(p0.Inputs(), NameContext), shape(p0.Outputs(), NameCtxV)
	if len(cx) != 3 || len(ctxV) != 3 || cx[0] != 1 || ctxV[0] != 1 || ctxV[1] != cx[1] {
		return fmt.Errorf("graph %q must take %q [1,L,T] and give %q [1,L,A]", p0.Name(), NameContext, NameCtxV)
	}
	var sv, width uint32
	for i, g := range c.ranges {
		last := i == len(c.ranges)-1
		k, v := shape(g.Outputs(), NameVideoKeys), shape(g.Outputs(), NameVideoValues)
		if len(k) != 4 || !slices.Equal(k, v) || k[0] == 0 || k[1] != 1 {
			return fmt.Errorf("graph %q must give %q and %q of one shape [n,1,Sv,A]", g.Name(), NameVideoKeys, NameVideoValues)
		}
		if i == 0 {
			sv, width = k[2], k[3]
			if ctxV[2] != width {
				return fmt.Errorf("graph %q: %q width %d differs from the keys' %d", g.Name(), NameCtxV, ctxV[2], width)
			}
		} else if k[2] != sv || k[3] != width {
			return fmt.Errorf("graph %q keys are %v; the chain's are [n,1,%d,%d]", g.Name(), k, sv, width)
		}
		hid := []uint32{1, sv, width}
		wantIn, wantOut := 2, 4
		if last {
			wantOut = 3
		}
		if !last && !slices.Equal(shape(g.Outputs(), NameHiddenOut), hid) {
			return fmt.Errorf("graph %q must give %q %v", g.Name(), NameHiddenOut, hid)
		}
		if last && shape(g.Outputs(), NameHiddenOut) != nil {
			return fmt.Errorf("graph %q is the last range and must not give %q", g.Name(), NameHiddenOut)
		}
		if i > 0 && (!slices.Equal(shape(g.Inputs(), NameHidden), hid) || !slices.Equal(shape(g.Inputs(), NameCtxV), ctxV)) {
			return fmt.Errorf("graph %q must take %q %v and %q %v", g.Name(), NameHidden, hid, NameCtxV, ctxV)
		}
		if i == 0 && !slices.Equal(shape(g.Inputs(), NameLatent), lat) {
			return fmt.Errorf("graph %q must take %q %v", g.Name(), NameLatent, lat)
		}
		if i > 0 {
			wantOut--
		}
		if len(g.Inputs()) != wantIn || len(g.Outputs()) != wantOut {
			return fmt.Errorf("graph %q has %d inputs and %d outputs, want %d and %d", g.Name(), len(g.Inputs()), len(g.Outputs()), wantIn, wantOut)
		}
		outs := g.Outputs()
		kt, vt := outs[g.OutputIndex(NameVideoKeys)].DataType, outs[g.OutputIndex(NameVideoValues)].DataType
		f16 := kt == qnnrt.Float16 && vt == qnnrt.Float16
		c.f16 = f16 && (i == 0 || c.f16)
		f32 := kt == qnnrt.Float32 && vt == qnnrt.Float32
		c.f32 = f32 && (i == 0 || c.f32)
		c.layers = append(c.layers, int(k[0]))
		c.keysIdx = append(c.keysIdx, g.OutputIndex(NameVideoKeys))
		c.valsIdx = append(c.valsIdx, g.OutputIndex(NameVideoValues))
	}
	c.kvLen = int(sv) * int(width)
	c.imgLen = ein[0].Elements()
	c.ctxLen = int(cx[1]) * int(cx[2])
	return nil
}

// Layers returns the layer count of every prefill range, in chain order.
func (c *Chain) Layers() []int { return slices.Clone(c.layers) }

// KVLen is the number of float32 values keys (and values) must hold.
func (c *Chain) KVLen() int {
	n := 0
	for _, l := range c.layers {
		n += l
	}
	return n * c.kvLen
}

// ImageLen is the number of values Run's image must hold: the VAE
// graph's input, [1,3,H,W].
func (c *Chain) ImageLen() int { return c.imgLen }

// ContextLen is the number of values Run's text context must hold:
// prefill_0's context input, [1,L,T].
func (c *Chain) ContextLen() int { return c.ctxLen }

// RunKV is Run into expert.TensorView buffers (both F32 or both F16), so
// a Chain is a worldmodel.KVStage. qnnrt binds no output to caller
// memory, so there is one copy from each graph's output buffer into the
// caller's: F32 views take ReadOutput's decode; F16 views from F16 graphs
// (the device's case) a byte copy (ReadOutputBytes); F16 views from other
// graphs a second pass, through a staging buffer the chain keeps.
func (c *Chain) RunKV(ctx context.Context, image, text []float32, keys, values expert.TensorView) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case keys.F32 != nil && values.F32 != nil && keys.F16 == nil && values.F16 == nil:
		return c.run(ctx, image, text, keys.F32, values.F32)
	case keys.F16 != nil && values.F16 != nil && keys.F32 == nil && values.F32 == nil:
	default:
		return errors.New("prefill: keys and values must be both F32 or both F16 views, one type each")
	}
	n := c.KVLen()
	if len(keys.F16) != n || len(values.F16) != n {
		return fmt.Errorf("prefill: keys and values have %d and %d values, want %d each", len(keys.F16), len(values.F16), n)
	}
	if c.f16 {
		return c.runF16(ctx, image, text, keys.F16, values.F16)
	}
	if len(c.scratch) != 2*n {
		c.scratch = make([]float32, 2*n)
	}
	k, v := c.scratch[:n], c.scratch[n:]
	if err := c.run(ctx, image, text, k, v); err != nil {
		return err
	}
	for i := range k {
		keys.F16[i] = float16.Fromfloat32(k[i]).Bits()
		values.F16[i] = float16.Fromfloat32(v[i]).Bits()
	}
	return nil
}

// runF16 runs the chain of F16 K/V outputs into F16 buffers: one byte
// copy per output (qnnrt.Graph.ReadOutputBytes; QNN's F16 and the host's
// uint16 are both little-endian on the targets). c.mu is held.
func (c *Chain) runF16(ctx context.Context, image, text []float32, keys, values []uint16) error {
	if err := c.execute(ctx, image, text); err != nil {
		return err
	}
	asBytes := func(x []uint16) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(x))), 2*len(x)) }
	ka, va := addr(keys), addr(values)
	off := 0
	for i, g := range c.ranges {
		n := c.layers[i] * c.kvLen
		if !c.inPlace(i, 0, ka) {
			if _, err := g.ReadOutputBytes(c.keysIdx[i], asBytes(keys[off:off+n])); err != nil {
				return fmt.Errorf("prefill: %w", err)
			}
		}
		if !c.inPlace(i, 1, va) {
			if _, err := g.ReadOutputBytes(c.valsIdx[i], asBytes(values[off:off+n])); err != nil {
				return fmt.Errorf("prefill: %w", err)
			}
		}
		off += n
	}
	return nil
}

// Session returns the chain's qnnrt session (its spill-fill group and
// graphs), for diagnostics.
func (c *Chain) Session() *qnnrt.Session { return c.sess }

// Run implements Runner. A cancelled ctx stops the chain between graphs;
// keys and values are then left partly written.
func (c *Chain) Run(ctx context.Context, image, text, keys, values []float32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.run(ctx, image, text, keys, values)
}

// run is Run with c.mu held.
func (c *Chain) run(ctx context.Context, image, text, keys, values []float32) error {
	switch {
	case c.sess == nil:
		return errors.New("prefill: chain is closed")
	case len(image) != c.imgLen:
		return fmt.Errorf("prefill: image has %d values, want %d", len(image), c.imgLen)
	case len(text) != c.ctxLen:
		return fmt.Errorf("prefill: context has %d values, want %d", len(text), c.ctxLen)
	case len(keys) != c.KVLen() || len(values) != c.KVLen():
		return fmt.Errorf("prefill: keys and values have %d and %d values, want %d each (%d layers x %d)",
			len(keys), len(values), c.KVLen(), c.KVLen()/max(c.kvLen, 1), c.kvLen)
	}
	if err := c.execute(ctx, image, text); err != nil {
		return err
	}
	// F32 buffers that are the consumer's own inputs (BindKV on F32
	// graphs) already hold the bound outputs.
	ka, va := addr(keys), addr(values)
	off := 0
	for i, g := range c.ranges {
		n := c.layers[i] * c.kvLen
		if !c.f32 || !c.inPlace(i, 0, ka) {
			if err := g.ReadOutput(c.keysIdx[i], keys[off:off+n]); err != nil {
				return fmt.Errorf("prefill: %w", err)
			}
		}
		if !c.f32 || !c.inPlace(i, 1, va) {
			if err := g.ReadOutput(c.valsIdx[i], values[off:off+n]); err != nil {
				return fmt.Errorf("prefill: %w", err)
			}
		}
		off += n
	}
	return nil
}

// execute checks the sizes, sets the inputs and runs the chain; c.mu is
// held.
func (c *Chain) execute(ctx context.Context, image, text []float32) error {
	switch {
	case c.sess == nil:
		return errors.New("prefill: chain is closed")
	case len(image) != c.imgLen:
		return fmt.Errorf("prefill: image has %d values, want %d", len(image), c.imgLen)
	case len(text) != c.ctxLen:
		return fmt.Errorf("prefill: context has %d values, want %d", len(text), c.ctxLen)
	}
	if err := c.enc.SetInput(c.enc.InputIndex(NameImage), image); err != nil {
		return fmt.Errorf("prefill: %w", err)
	}
	p0 := c.ranges[0]
	if err := p0.SetInput(p0.InputIndex(NameContext), text); err != nil {
		return fmt.Errorf("prefill: %w", err)
	}
	if _, err := c.sess.RunChain(ctx, append([]*qnnrt.Graph{c.enc}, c.ranges...)...); err != nil {
		return fmt.Errorf("prefill: %w", err)
	}
	return nil
}

// Close releases the session and the libraries; safe to call more than
// once.
func (c *Chain) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	if c.sess != nil && c.owned {
		errs = append(errs, c.sess.Close())
	}
	c.sess = nil
	if c.lib != nil && c.owned {
		errs = append(errs, c.lib.Close())
	}
	c.lib = nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("prefill: close: %w", err)
	}
	return nil
}

// describe names the ranges and their layer counts, for errors and logs.
func (c *Chain) describe() string {
	parts := make([]string, len(c.ranges))
	for i, g := range c.ranges {
		parts[i] = fmt.Sprintf("%s (%d layers)", g.Name(), c.layers[i])
	}
	return strings.Join(parts, ", ")
}

// String describes the chain.
func (c *Chain) String() string {
	return fmt.Sprintf("%s -> %s", EncoderGraph, c.describe())
}
