package node

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/htp"
	"github.com/fastwam/actionexpert/internal/qnnfake"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/qnnrt"
)

// tinyDims is the contract of golden/tiny: 2 layers, 2x16 heads, 8 video
// tokens, 5 context tokens of width 32, 32 actions of 7.
func tinyDims() expert.Dims {
	return expert.Dims{Layers: 2, Heads: 2, HeadDim: 16, VideoTokens: 8, ContextTokens: 5,
		TextDim: 32, ActionTokens: 32, ActionDim: 7}
}

// testBackend is a TEST FIXTURE, not a model: an expert.Backend whose
// prediction is a simple deterministic function of every input, so that a
// wrongly routed, truncated or mis-decoded input changes the output. It can
// be slowed down, made to fail, and blocked, and it records misuse.
type testBackend struct {
	dims expert.Dims

	mu        sync.Mutex
	summary   float64 // from the bound chunk
	bound     bool
	binds     int
	steps     int
	closed    bool
	misuse    []string // calls after Close, steps without a bound chunk
	failNext  int      // fail this many following steps
	stepDelay time.Duration
	onStep    func()        // called at every step, outside the lock
	gate      chan struct{} // when set, every step waits for a receive (or ctx)
	reloads   int
	active    int // calls in progress, to detect overlap
}

func newTestBackend(d expert.Dims) *testBackend { return &testBackend{dims: d} }

func (b *testBackend) Dims() expert.Dims { return b.dims }

func (b *testBackend) enter(op string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		b.misuse = append(b.misuse, op+" after Close")
	}
	b.active++
	if b.active > 1 {
		b.misuse = append(b.misuse, op+" concurrently with another call")
	}
}

func (b *testBackend) leave() {
	b.mu.Lock()
	b.active--
	b.mu.Unlock()
}

// BindChunk summarises the chunk: weighted sums that depend on the order
// and position of every element.
func (b *testBackend) BindChunk(ctx context.Context, c *expert.Chunk) error {
	b.enter("BindChunk")
	defer b.leave()
	if err := b.dims.ValidateChunk(c); err != nil {
		return err
	}
	s := 0.0
	for i, v := range c.VideoKeys {
		s += float64(v) * float64(i%13+1)
	}
	for i, v := range c.VideoValues {
		s -= float64(v) * float64(i%11+1)
	}
	for i, v := range c.Context {
		if c.ContextMask[i/b.dims.TextDim] {
			s += float64(v) * float64(i%7+1) * 0.5
		}
	}
	s = s/float64(len(c.VideoKeys)+len(c.Context)) + float64(c.VisibleVideo)*0.01
	b.mu.Lock()
	b.summary, b.bound = s, true
	b.binds++
	b.mu.Unlock()
	return nil
}

// Step predicts pred[i] = 0.5*latents[i] + summary + tau/1000 * (i%7)/7.
func (b *testBackend) Step(ctx context.Context, latents []float32, tau float32, pred []float32) error {
	b.enter("Step")
	defer b.leave()
	b.mu.Lock()
	delay, onStep, gate := b.stepDelay, b.onStep, b.gate
	b.steps++
	fail := b.failNext > 0
	if fail {
		b.failNext--
	}
	if !b.bound {
		b.misuse = append(b.misuse, "Step without a bound chunk")
	}
	s := b.summary
	b.mu.Unlock()
	if onStep != nil {
		onStep()
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if fail {
		return fmt.Errorf("test backend: injected failure")
	}
	for i, x := range latents {
		pred[i] = 0.5*x + float32(s) + tau/1000*float32(i%7)/7
	}
	return nil
}

func (b *testBackend) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

func (b *testBackend) Misuse() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.misuse...)
}

// reloadingBackend adds Reload to testBackend.
type reloadingBackend struct{ *testBackend }

func (b reloadingBackend) Reload(ctx context.Context) error {
	b.mu.Lock()
	b.reloads++
	b.mu.Unlock()
	return nil
}

// fakeClock is a settable clock for the node's Config.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set puts the clock at t (a /clock message).
func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// captureLogger records log lines.
type captureLogger struct {
	mu    sync.Mutex
	lines []string
}

func (l *captureLogger) add(level, format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, level+": "+fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *captureLogger) Debugf(f string, a ...any) { l.add("DEBUG", f, a...) }
func (l *captureLogger) Infof(f string, a ...any)  { l.add("INFO", f, a...) }
func (l *captureLogger) Warnf(f string, a ...any)  { l.add("WARN", f, a...) }
func (l *captureLogger) Errorf(f string, a ...any) { l.add("ERROR", f, a...) }

// count returns how many lines contain every one of parts.
func (l *captureLogger) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
outer:
	for _, line := range l.lines {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue outer
			}
		}
		n++
	}
	return n
}

func (l *captureLogger) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// inputs is one observation's two messages with deterministic contents.
type inputs struct {
	kv  msgs.VideoKVCache
	ctx msgs.TextContext
}

// makeInputs builds the messages of observation seq stamped at stamp.
func makeInputs(d expert.Dims, seq uint64, stamp time.Time) inputs {
	kvShape := []uint32{uint32(d.Layers), 1, uint32(d.VideoTokens), uint32(d.AttnWidth())}
	keys := pattern(d.KVLen(), float32(seq)+1, 0.01)
	values := pattern(d.KVLen(), float32(seq)+2, -0.02)
	context := pattern(d.ContextLen(), float32(seq)+3, 0.03)
	mask := make([]bool, d.ContextTokens)
	for i := range mask {
		mask[i] = i < d.ContextTokens-1
	}
	h := msgs.Header{Stamp: toMsgTime(stamp), FrameID: "camera"}
	return inputs{
		kv: msgs.VideoKVCache{Header: h, Seq: seq, Keys: msgs.NewTensorF32(kvShape, keys),
			Values: msgs.NewTensorF32(kvShape, values)},
		ctx: msgs.TextContext{Header: h, Seq: seq + 1000, Instruction: "pick up the bowl",
			Context:       msgs.NewTensorF32([]uint32{1, uint32(d.ContextTokens), uint32(d.TextDim)}, context),
			AttentionMask: mask},
	}
}

// pattern is a deterministic, position-dependent vector.
func pattern(n int, a, b float32) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.Sin(float64(a)*0.37+float64(i)*0.11)) + b*float32(i%5)
	}
	return x
}

func toMsgTime(t time.Time) msgs.Time {
	return msgs.Time{Sec: int32(t.Unix()), Nanosec: uint32(t.Nanosecond())}
}

func mustCDR(t testing.TB, m interface{ MarshalCDR() ([]byte, error) }) []byte {
	t.Helper()
	b, err := m.MarshalCDR()
	if err != nil {
		t.Fatalf("marshal: %v", err)
	}
	return b
}

// chunkOf returns the expert.Chunk the node should build from in.
func (in inputs) chunk(t testing.TB, d expert.Dims) *expert.Chunk {
	t.Helper()
	c := &expert.Chunk{
		VideoKeys: make([]float32, d.KVLen()), VideoValues: make([]float32, d.KVLen()),
		Context: make([]float32, d.ContextLen()), ContextMask: append([]bool(nil), in.ctx.AttentionMask...),
		VisibleVideo: int(in.kv.VisibleVideoTokens),
	}
	for _, p := range []struct {
		t   msgs.Tensor
		dst []float32
	}{{in.kv.Keys, c.VideoKeys}, {in.kv.Values, c.VideoValues}, {in.ctx.Context, c.Context}} {
		if err := p.t.DecodeF32Into(p.dst); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// openFakeHTP writes a context binary of one action_step graph of d with
// inputs of graphType and opens the HTP backend on it over the test double
// lib (shared buffers, burst vote); it returns the backend and the
// binary's path. The caller closes the backend.
func openFakeHTP(tb testing.TB, lib *qnnfake.Lib, d expert.Dims, graphType uint32) (*htp.Backend, string) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "action_step.bin")
	bin := qnnfake.Binary{SocModel: 60, Arch: 73, BuildID: "node-test", Graphs: []qnnfake.Graph{qnnfake.ActionStepGraph(graphType, d)}}
	if err := os.WriteFile(path, bin.Marshal(), 0o644); err != nil {
		tb.Fatal(err)
	}
	b, err := htp.New(context.Background(), htp.Options{
		ContextPath: path, BackendLib: lib.Path, SystemLib: lib.Path, RPCMemLib: lib.Path,
		PerfMode: qnnrt.PerfBurst, SharedBuffers: true, Dims: &d,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return b, path
}

// fqn is the node's fully qualified name in the tests.
const fqn = "/fastwam_action_expert"

// ros wraps rules in --ros-args ... -- with a non-ROS argument on each side
// (as package params' tests do).
func ros(rules ...string) []string {
	return append(append([]string{"--verbose", "--ros-args"}, rules...), "--", "-p", "steps:=999")
}
