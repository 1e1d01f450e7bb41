package node

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
)

// managedRig runs a Managed node on a Bus with test backends it counts.
type managedRig struct {
	t      *testing.T
	bus    *Bus
	m      *Managed
	log    *captureLogger
	tick   chan time.Time
	kvPub  Publisher
	ctxPub Publisher
	chunks chan msgs.ActionChunk
	diags  chan msgs.DiagnosticArray

	mu      sync.Mutex
	opened  []*testBackend
	openErr error
	cancel  context.CancelFunc
	done    chan error
}

func newManagedRig(t *testing.T, p params.Params) *managedRig {
	t.Helper()
	r := &managedRig{t: t, bus: NewBus(), log: &captureLogger{}, tick: make(chan time.Time),
		chunks: make(chan msgs.ActionChunk, 64), diags: make(chan msgs.DiagnosticArray, 64), done: make(chan error, 1)}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(r.bus.Subscribe(Topic{Name: p.Topics.Actions, Type: msgs.TypeActionChunk}, func(b []byte) {
		var c msgs.ActionChunk
		if err := c.UnmarshalCDR(b); err != nil {
			t.Errorf("chunk: %v", err)
		}
		r.chunks <- c
	}))
	must(r.bus.Subscribe(Topic{Name: p.Topics.Diagnostics, Type: msgs.TypeDiagnosticArray}, func(b []byte) {
		var d msgs.DiagnosticArray
		if err := d.UnmarshalCDR(b); err != nil {
			t.Errorf("diagnostics: %v", err)
		}
		select {
		case r.diags <- d:
		default:
		}
	}))
	open := func(ctx context.Context, p params.Params) (expert.Backend, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.openErr != nil {
			return nil, r.openErr
		}
		b := newTestBackend(tinyDims())
		r.opened = append(r.opened, b)
		return b, nil
	}
	var err error
	r.m, err = NewManaged(ManagedConfig{Params: p, Logger: r.log, Open: open, Tick: r.tick}, r.bus)
	must(err)
	r.kvPub, err = r.bus.Advertise(Topic{Name: p.Topics.KVCache, Type: msgs.TypeVideoKVCache})
	must(err)
	r.ctxPub, err = r.bus.Advertise(Topic{Name: p.Topics.Context, Type: msgs.TypeTextContext})
	must(err)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.m.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-r.done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Run did not return within 10 s")
		}
	})
	return r
}

func (r *managedRig) send(in inputs) {
	r.t.Helper()
	if err := r.kvPub.Publish(mustCDR(r.t, &in.kv)); err != nil {
		r.t.Fatal(err)
	}
	if err := r.ctxPub.Publish(mustCDR(r.t, &in.ctx)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *managedRig) chunk() msgs.ActionChunk {
	r.t.Helper()
	select {
	case c := <-r.chunks:
		return c
	case <-time.After(10 * time.Second):
		r.t.Fatal("no chunk within 10 s")
	}
	return msgs.ActionChunk{}
}

func (r *managedRig) noChunk() {
	r.t.Helper()
	select {
	case c := <-r.chunks:
		r.t.Fatalf("unexpected chunk seq %d", c.Seq)
	case <-time.After(100 * time.Millisecond):
	}
}

// diag ticks once and returns the status published for it.
func (r *managedRig) diag() msgs.DiagnosticStatus {
	r.t.Helper()
	for len(r.diags) > 0 {
		<-r.diags
	}
	r.tick <- time.Now()
	select {
	case d := <-r.diags:
		return d.Status[0]
	case <-time.After(10 * time.Second):
		r.t.Fatal("no diagnostics within 10 s")
	}
	return msgs.DiagnosticStatus{}
}

func (r *managedRig) backends() []*testBackend {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*testBackend(nil), r.opened...)
}

func TestManagedTransitions(t *testing.T) {
	p := testParams()
	p.SelfTest.Skip = true
	r := newManagedRig(t, p)
	d := tinyDims()
	base := time.Unix(1_700_000_000, 0)

	// Unconfigured: nothing is opened, inputs are counted and dropped.
	r.send(makeInputs(d, 1, base))
	r.noChunk()
	if st := r.diag(); diagValue(t, st, "state") != "unconfigured" || diagValue(t, st, "dropped.unconfigured") != "2" {
		t.Fatalf("unconfigured diagnostics: %+v", st)
	}
	if len(r.backends()) != 0 {
		t.Fatal("a backend was opened before configure")
	}

	// Configure: the backend is open, the node inactive.
	if err := r.m.Configure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := r.m.Node(); n == nil || n.State() != StateInactive {
		t.Fatalf("after configure: node %v", n)
	}
	r.send(makeInputs(d, 2, base.Add(time.Second)))
	r.noChunk()
	if st := r.diag(); diagValue(t, st, "state") != string(StateInactive) || diagValue(t, st, "dropped.inactive") != "2" {
		t.Fatalf("inactive diagnostics: %+v", st)
	}

	// Activate: chunks flow.
	if err := r.m.Activate(); err != nil {
		t.Fatal(err)
	}
	r.send(makeInputs(d, 3, base.Add(2*time.Second)))
	if c := r.chunk(); c.KVSeq != 3 {
		t.Fatalf("chunk of kv seq %d, want 3", c.KVSeq)
	}

	// Deactivate keeps the backend: no new one is opened, none is closed.
	if err := r.m.Deactivate(); err != nil {
		t.Fatal(err)
	}
	r.send(makeInputs(d, 4, base.Add(3*time.Second)))
	r.noChunk()
	bs := r.backends()
	if len(bs) != 1 || bs[0].closed {
		t.Fatalf("after deactivate: %d backends opened, first closed %v", len(bs), len(bs) > 0 && bs[0].closed)
	}
	if err := r.m.Activate(); err != nil {
		t.Fatal(err)
	}
	r.send(makeInputs(d, 5, base.Add(4*time.Second)))
	if c := r.chunk(); c.KVSeq != 5 {
		t.Fatalf("chunk of kv seq %d after reactivation, want 5", c.KVSeq)
	}

	// Cleanup releases the backend; a second configure opens a new one.
	if err := r.m.Deactivate(); err != nil {
		t.Fatal(err)
	}
	if err := r.m.Cleanup(); err != nil {
		t.Fatal(err)
	}
	if bs := r.backends(); !bs[0].closed || r.m.Node() != nil {
		t.Fatal("cleanup left the backend open or the node configured")
	}
	if err := r.m.Configure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.m.Activate(); err != nil {
		t.Fatal(err)
	}
	r.send(makeInputs(d, 6, base.Add(5*time.Second)))
	if c := r.chunk(); c.KVSeq != 6 {
		t.Fatalf("chunk of kv seq %d after reconfigure, want 6", c.KVSeq)
	}
	if err := r.m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for i, b := range r.backends() {
		if !b.closed {
			t.Errorf("backend %d not closed after shutdown", i)
		}
		if m := b.Misuse(); len(m) > 0 {
			t.Errorf("backend %d misused: %v", i, m)
		}
	}
}

func TestManagedConfigureFailure(t *testing.T) {
	p := testParams()
	p.SelfTest.Skip = true
	r := newManagedRig(t, p)
	r.mu.Lock()
	r.openErr = errors.New("htp: context binary /models/missing.bin: no such file or directory")
	r.mu.Unlock()
	err := r.m.Configure(context.Background())
	if err == nil || !strings.Contains(err.Error(), "missing.bin") {
		t.Fatalf("Configure: %v, want the opener's error", err)
	}
	if r.m.Node() != nil {
		t.Fatal("a failed configure left a node configured")
	}
	st := r.diag()
	if st.Level != msgs.LevelError || !strings.Contains(st.Message, "missing.bin") || diagValue(t, st, "state") != "unconfigured" {
		t.Fatalf("diagnostics after a failed configure: level %d, %q", st.Level, st.Message)
	}
	if r.log.count("ERROR", "missing.bin") == 0 {
		t.Fatalf("the failure is not in the log:\n%s", r.log)
	}
	if err := r.m.Activate(); err == nil {
		t.Fatal("Activate of an unconfigured node succeeded")
	}
	// Fixed, it configures, and the error is gone from the diagnostics.
	r.mu.Lock()
	r.openErr = nil
	r.mu.Unlock()
	if err := r.m.Configure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r.m.LastError() != "" {
		t.Fatalf("last error %q after a good configure", r.m.LastError())
	}
}

func TestManagedSetParameters(t *testing.T) {
	p := testParams()
	p.SelfTest.Skip = true
	r := newManagedRig(t, p)
	set := func(name string, v msgs.ParameterValue) error {
		return r.m.SetParameters(context.Background(), []msgs.Parameter{{Name: name, Value: v}})
	}
	if err := set("steps", msgs.ParameterValue{Type: msgs.ParameterInteger, IntegerValue: 7}); err != nil {
		t.Fatal(err)
	}
	err := set("topics.actions", msgs.ParameterValue{Type: msgs.ParameterString, StringValue: "elsewhere"})
	if err == nil || !strings.Contains(err.Error(), "topics") {
		t.Fatalf("changing a topic: %v", err)
	}
	if err := r.m.Configure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if q := r.m.Params(); q.Steps != 7 {
		t.Fatalf("steps %d, want 7", q.Steps)
	}
	err = set("cpu.weights", msgs.ParameterValue{Type: msgs.ParameterString, StringValue: "other.safetensors"})
	if err == nil || !strings.Contains(err.Error(), "cleanup") {
		t.Fatalf("changing the backend while configured: %v", err)
	}
	// All or none: a live one with a reload one changes nothing.
	err = r.m.SetParameters(context.Background(), []msgs.Parameter{
		{Name: "steps", Value: msgs.ParameterValue{Type: msgs.ParameterInteger, IntegerValue: 3}},
		{Name: "cpu.threads", Value: msgs.ParameterValue{Type: msgs.ParameterInteger, IntegerValue: 1}},
	})
	if err == nil || r.m.Params().Steps != 7 {
		t.Fatalf("mixed set: %v, steps %d; want a refusal and steps 7", err, r.m.Params().Steps)
	}
}

// TestNewManagedResolvesTopicsInItsName checks that NewManaged compares the
// topic names resolved in the node's own name (the rules themselves are
// package params' TestTopicParameters).
func TestNewManagedResolvesTopicsInItsName(t *testing.T) {
	p := params.Default()
	p.Backend, p.CPU.Weights = params.BackendCPU, "unused.safetensors"
	p.Topics.Context = "/action_chunk"
	open := func(context.Context, params.Params) (expert.Backend, error) {
		return nil, errors.New("not opened in this test")
	}
	if _, err := NewManaged(ManagedConfig{Params: p, Name: fqn, Open: open}, NewBus()); err == nil || !strings.Contains(err.Error(), `"topics.context" and "topics.actions"`) {
		t.Errorf("NewManaged with topics.context /action_chunk: %v", err)
	}
	if _, err := NewManaged(ManagedConfig{Params: p, Name: "/arm/fastwam_action_expert", Open: open}, NewBus()); err != nil {
		t.Errorf("NewManaged in /arm with topics.context /action_chunk: %v", err)
	}
}
