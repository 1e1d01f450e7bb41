//go:build rclgo

package rosnode

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tiiuae/rclgo/pkg/rclgo"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
)

type testLogger struct{ t *testing.T }

func (l testLogger) Debugf(f string, a ...any) { l.t.Logf("DEBUG "+f, a...) }
func (l testLogger) Infof(f string, a ...any)  { l.t.Logf("INFO "+f, a...) }
func (l testLogger) Warnf(f string, a ...any)  { l.t.Logf("WARN "+f, a...) }
func (l testLogger) Errorf(f string, a ...any) { l.t.Logf("ERROR "+f, a...) }

// needROS skips the test unless the message package's type support loads:
// a ROS 2 install (Jazzy or Humble) and this package's colcon install must
// be sourced.
func needROS(t *testing.T) {
	t.Helper()
	for _, ty := range []string{msgs.TypeVideoKVCache, msgs.TypeDiagnosticArray} {
		pkg, name, _ := strings.Cut(ty, "/msg/")
		if _, err := rclgo.LoadDynamicMessageTypeSupport(pkg, name); err != nil {
			t.Skipf("ROS 2 type support for %s not found (source ROS 2 and this package's install): %v", ty, err)
		}
	}
}

// rosRig runs a node behind this transport in a ROS context, with a
// second ROS node (the peer) that publishes its inputs and receives its
// outputs over the middleware.
type rosRig struct {
	t       *testing.T
	params  params.Params
	node    *node.Node
	kvPub   node.Publisher
	ctxPub  node.Publisher
	chunks  chan msgs.ActionChunk
	diags   chan msgs.DiagnosticArray
	tick    chan time.Time
	stopped bool
	stop    func()
}

func newRig(t *testing.T, b expert.Backend, g *golden.Case, rules ...string) *rosRig {
	t.Helper()
	needROS(t)
	rctx, err := rclgo.NewContext(rclgo.ClockTypeSystemTime, nil)
	if err != nil {
		t.Fatal(err)
	}
	ns := "/fastwam_test_" + strings.ReplaceAll(t.Name(), "/", "_")
	rn, err := rctx.NewNode("expert", ns)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := rctx.NewNode("peer", ns)
	if err != nil {
		t.Fatal(err)
	}
	log := testLogger{t}
	p, err := params.Load(append([]string{"--ros-args"}, rules...), rn.FullyQualifiedName())
	if err != nil {
		t.Fatal(err)
	}
	r := &rosRig{t: t, params: p, tick: make(chan time.Time),
		chunks: make(chan msgs.ActionChunk, 8), diags: make(chan msgs.DiagnosticArray, 8)}
	if r.node, err = node.New(node.Config{Params: p, Logger: log, Tick: r.tick, Golden: g}, b, NewTransport(rn, log)); err != nil {
		t.Fatal(err)
	}
	// The peer uses the same transport code; relative names resolve in ns.
	pt := NewTransport(peer, log)
	if r.kvPub, err = pt.Advertise(node.Topic{Name: p.Topics.KVCache, Type: msgs.TypeVideoKVCache, QoS: p.QoS.KVCache}); err != nil {
		t.Fatal(err)
	}
	if r.ctxPub, err = pt.Advertise(node.Topic{Name: p.Topics.Context, Type: msgs.TypeTextContext, QoS: p.QoS.Context}); err != nil {
		t.Fatal(err)
	}
	if err := pt.Subscribe(node.Topic{Name: p.Topics.Actions, Type: msgs.TypeActionChunk, QoS: p.QoS.Actions}, func(data []byte) {
		var m msgs.ActionChunk
		if err := m.UnmarshalCDR(data); err != nil {
			t.Errorf("ActionChunk from the middleware: %v", err)
			return
		}
		r.chunks <- m
	}); err != nil {
		t.Fatal(err)
	}
	if err := pt.Subscribe(node.Topic{Name: p.Topics.Diagnostics, Type: msgs.TypeDiagnosticArray, QoS: params.DiagnosticsQoS()}, func(data []byte) {
		var m msgs.DiagnosticArray
		if err := m.UnmarshalCDR(data); err != nil {
			t.Errorf("DiagnosticArray from the middleware: %v", err)
			return
		}
		select {
		case r.diags <- m:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}

	spinCtx, stopSpin := context.WithCancel(context.Background())
	spun := make(chan error, 1)
	go func() { spun <- rctx.Spin(spinCtx) }()
	runCtx, stopRun := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- r.node.Run(runCtx) }()
	// Orderly shutdown: the node stops, then spinning, then the context.
	r.stop = func() {
		if r.stopped {
			return
		}
		r.stopped = true
		stopRun()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
		stopSpin()
		if err := <-spun; err != nil && !strings.Contains(err.Error(), "context canceled") {
			t.Errorf("Spin: %v", err)
		}
		if err := rctx.Close(); err != nil {
			t.Errorf("close the ROS context: %v", err)
		}
	}
	t.Cleanup(r.stop)
	deadline := time.Now().Add(10 * time.Second)
	for r.node.State() != node.StateActive && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if r.node.State() != node.StateActive {
		t.Fatalf("state %s; self-test %s", r.node.State(), r.node.SelfTest())
	}
	return r
}

// observe publishes one observation every period until a chunk arrives
// (discovery takes a moment) and returns it with the time from the last
// publish to its arrival.
func (r *rosRig) observe(d expert.Dims, c *expert.Chunk, period time.Duration) (msgs.ActionChunk, time.Duration) {
	r.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	kvShape := []uint32{uint32(d.Layers), 1, uint32(d.VideoTokens), uint32(d.AttnWidth())}
	keys := msgs.NewTensorF32(kvShape, c.VideoKeys)
	values := msgs.NewTensorF32(kvShape, c.VideoValues)
	context := msgs.NewTensorF32([]uint32{1, uint32(d.ContextTokens), uint32(d.TextDim)}, c.Context)
	var kvBuf, ctxBuf []byte
	for seq := uint64(0); time.Now().Before(deadline); seq++ {
		now := time.Now()
		h := msgs.Header{FrameID: "cameras", Stamp: msgs.Time{Sec: int32(now.Unix()), Nanosec: uint32(now.Nanosecond())}}
		ctxMsg := msgs.TextContext{Header: h, Seq: seq, Instruction: "test", Context: context, AttentionMask: c.ContextMask}
		kvMsg := msgs.VideoKVCache{Header: h, Seq: seq, Keys: keys, Values: values}
		var err error
		if ctxBuf, err = ctxMsg.AppendCDR(ctxBuf[:0]); err != nil {
			r.t.Fatal(err)
		}
		if kvBuf, err = kvMsg.AppendCDR(kvBuf[:0]); err != nil {
			r.t.Fatal(err)
		}
		if err := r.ctxPub.Publish(ctxBuf); err != nil {
			r.t.Fatal(err)
		}
		sent := time.Now()
		if err := r.kvPub.Publish(kvBuf); err != nil {
			r.t.Fatal(err)
		}
		select {
		case m := <-r.chunks:
			return m, time.Since(sent)
		case <-time.After(period):
		}
	}
	r.t.Fatalf("no ActionChunk over ROS within 20 s; diagnostics: %v", r.node.Stats())
	return msgs.ActionChunk{}, 0
}

// TestNodeOverROS runs the node on the CPU backend behind this transport
// and talks to it from a second ROS node over the middleware: inputs in,
// an ActionChunk and diagnostics out, then an orderly shutdown.
func TestNodeOverROS(t *testing.T) {
	c, err := golden.LoadTiny(t.Context(), "tiny/case_all.npz")
	if err != nil {
		t.Fatal(err)
	}
	w, err := cpu.TinyWeights()
	if err != nil {
		t.Fatal(err)
	}
	if w, err = w.ForInputs(c.VideoTokens, c.ContextTokens); err != nil {
		t.Fatal(err)
	}
	b, err := cpu.New(w, cpu.Options{BLAS: "gonum"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	r := newRig(t, b, c, "-p", "backend:=cpu", "-p", "cpu.weights:=tiny", "-p", "max_input_age:=5.0")
	got, rtt := r.observe(b.Dims(), &c.Chunk, 100*time.Millisecond)
	if len(got.Actions) != c.ActionTokens || got.Backend != "cpu" || got.Steps != 10 {
		t.Errorf("chunk over ROS: %d rows, backend %q, steps %d", len(got.Actions), got.Backend, got.Steps)
	}
	t.Logf("chunk seq %d kv_seq %d: denoise %.1f ms, receive to publish %.1f ms, input age %.1f ms; publish to chunk %v",
		got.Seq, got.KVSeq, got.DenoiseMs, got.ReceiveToPublishMs, got.InputAgeMs, rtt)

	r.tick <- time.Now()
	select {
	case d := <-r.diags:
		if len(d.Status) != 1 || d.Status[0].Name != node.DiagnosticName {
			t.Errorf("diagnostics over ROS: %+v", d)
		}
	case <-time.After(5 * time.Second):
		t.Error("no diagnostics over ROS within 5 s of a tick")
	}
	r.stop()
}

// zeroBackend is a TEST FIXTURE for transport measurements: it accepts the
// full-size contract and predicts zero velocity.
type zeroBackend struct{ d expert.Dims }

func (z zeroBackend) Dims() expert.Dims { return z.d }
func (z zeroBackend) Close() error      { return nil }
func (z zeroBackend) BindChunk(_ context.Context, c *expert.Chunk) error {
	return z.d.ValidateChunk(c)
}
func (z zeroBackend) Step(_ context.Context, _ []float32, _ float32, pred []float32) error {
	clear(pred)
	return nil
}

// TestFullSizeMessagesOverROS sends production-size inputs (a 72 MiB
// VideoKVCache and a 2 MiB TextContext) through the middleware to the node
// and reports the time from publish to the returned chunk. It is skipped
// with -short.
func TestFullSizeMessagesOverROS(t *testing.T) {
	if testing.Short() {
		t.Skip("full-size messages: skipped with -short")
	}
	d := expert.FullDims()
	c := &expert.Chunk{
		VideoKeys: make([]float32, d.KVLen()), VideoValues: make([]float32, d.KVLen()),
		Context: make([]float32, d.ContextLen()), ContextMask: make([]bool, d.ContextTokens),
	}
	for i := range c.VideoKeys {
		c.VideoKeys[i] = float32(i%97) * 0.01
	}
	c.ContextMask[0] = true
	r := newRig(t, zeroBackend{d}, nil, "-p", "backend:=cpu", "-p", "cpu.weights:=none", "-p", "steps:=1",
		"-p", "max_input_age:=0.0", "-p", "sync.timeout:=5.0")
	var times []time.Duration
	for range 3 {
		m, took := r.observe(d, c, 2*time.Second)
		times = append(times, took)
		t.Logf("full-size observation: publish to chunk %v (node: receive to publish %.1f ms)", took, m.ReceiveToPublishMs)
	}
	t.Logf("full-size observations: slowest publish to chunk %v of %d", slices.Max(times), len(times))
	s := r.node.Stats()
	t.Logf("node: %d in, %d out, dropped %v", s.In[r.params.Topics.KVCache], s.Out, s.Dropped)
	r.stop()
}

func TestQoSProfile(t *testing.T) {
	q := QoSProfile(params.QoS{Reliability: params.ReliabilityBestEffort, Durability: params.DurabilityTransientLocal,
		History: params.HistoryKeepLast, Depth: 3})
	if q.Reliability != rclgo.ReliabilityBestEffort || q.Durability != rclgo.DurabilityTransientLocal ||
		q.History != rclgo.HistoryKeepLast || q.Depth != 3 {
		t.Errorf("mapped to %+v", q)
	}
	q = QoSProfile(params.QoS{Reliability: params.ReliabilityReliable, Durability: params.DurabilityVolatile,
		History: params.HistoryKeepAll})
	if q.Reliability != rclgo.ReliabilityReliable || q.Durability != rclgo.DurabilityVolatile || q.History != rclgo.HistoryKeepAll {
		t.Errorf("mapped to %+v", q)
	}
}

// TestUnknownMessageType checks that a message name missing from an
// existing package is an error, which rclgo's loader does not report.
func TestUnknownMessageType(t *testing.T) {
	needROS(t)
	rctx, err := rclgo.NewContext(rclgo.ClockTypeSystemTime, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rctx.Close()
	rn, err := rctx.NewNode("fastwam_type_probe", "")
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTransport(rn, testLogger{t})
	for _, ty := range []string{msgs.Package + "/msg/NoSuchMessage", "no_such_package/msg/Thing", "not-a-type"} {
		if _, err := tr.Advertise(node.Topic{Name: "probe", Type: ty}); err == nil {
			t.Errorf("Advertise of %s succeeded", ty)
		} else {
			t.Log(err)
		}
	}
}

// TestControlTypeSupport: the type support of every control output and of
// the hold input loads by name from the ROS install, as the executor's
// Advertise and Subscribe need it.
func TestControlTypeSupport(t *testing.T) {
	needROS(t)
	for _, ty := range []string{msgs.TypeJointTrajectory, msgs.TypeFloat64MultiArray, msgs.TypeTwistStamped, msgs.TypeFloat64, msgs.TypeBool} {
		pkg, name, _ := strings.Cut(ty, "/msg/")
		ts, err := rclgo.LoadDynamicMessageTypeSupport(pkg, name)
		if err != nil {
			t.Errorf("%s: %v", ty, err)
			continue
		}
		if ts.TypeSupport() == nil {
			t.Errorf("%s: nil type support", ty)
		}
	}
}
