package node

import (
	"context"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
)

// testParams are the defaults with the CPU backend named (the tests inject
// the backend itself), 3 steps, and no age limit.
func testParams() params.Params {
	p := params.Default()
	p.Backend = params.BackendCPU
	p.CPU.Weights = "injected-by-the-test"
	p.Steps = 3
	p.MaxInputAge = 0
	return p
}

// harness runs a Node on an in-process Bus and collects what it publishes.
type harness struct {
	t       *testing.T
	bus     *Bus
	node    *Node
	log     *captureLogger
	tick    chan time.Time
	kvPub   Publisher
	ctxPub  Publisher
	chunks  chan msgs.ActionChunk
	diags   chan msgs.DiagnosticArray
	cancel  context.CancelFunc
	done    chan error
	stopped bool
}

type harnessOpt func(*Config)

func withClock(c *fakeClock) harnessOpt    { return func(cfg *Config) { cfg.Now = c.Now } }
func withMono(c *fakeClock) harnessOpt     { return func(cfg *Config) { cfg.Mono = c.Now } }
func withGolden(g *golden.Case) harnessOpt { return func(cfg *Config) { cfg.Golden = g } }

// newHarness creates the node and starts Run.
func newHarness(t *testing.T, p params.Params, b expert.Backend, opts ...harnessOpt) *harness {
	t.Helper()
	h := &harness{
		t: t, bus: NewBus(), log: &captureLogger{}, tick: make(chan time.Time),
		chunks: make(chan msgs.ActionChunk, 4096), diags: make(chan msgs.DiagnosticArray, 64),
		done: make(chan error, 1),
	}
	cfg := Config{Params: p, Logger: h.log, Tick: h.tick}
	for _, o := range opts {
		o(&cfg)
	}
	var err error
	if err = h.bus.Subscribe(Topic{Name: p.Topics.Actions, Type: msgs.TypeActionChunk}, func(data []byte) {
		var m msgs.ActionChunk
		if err := m.UnmarshalCDR(data); err != nil {
			t.Errorf("published ActionChunk does not decode: %v", err)
			return
		}
		select {
		case h.chunks <- m:
		default:
			t.Errorf("harness: too many chunks")
		}
	}); err != nil {
		t.Fatal(err)
	}
	if err = h.bus.Subscribe(Topic{Name: p.Topics.Diagnostics, Type: msgs.TypeDiagnosticArray}, func(data []byte) {
		var m msgs.DiagnosticArray
		if err := m.UnmarshalCDR(data); err != nil {
			t.Errorf("published DiagnosticArray does not decode: %v", err)
			return
		}
		select {
		case h.diags <- m:
		default:
		}
	}); err != nil {
		t.Fatal(err)
	}
	h.node, err = New(cfg, b, h.bus)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if h.kvPub, err = h.bus.Advertise(Topic{Name: p.Topics.KVCache, Type: msgs.TypeVideoKVCache}); err != nil {
		t.Fatal(err)
	}
	if h.ctxPub, err = h.bus.Advertise(Topic{Name: p.Topics.Context, Type: msgs.TypeTextContext}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.node.Run(ctx) }()
	t.Cleanup(func() {
		if !h.stopped {
			h.stop()
		}
	})
	return h
}

// stop cancels Run and waits for it.
func (h *harness) stop() {
	h.t.Helper()
	h.stopped = true
	h.cancel()
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		h.t.Fatal("Run did not return within 10 s of cancellation")
	}
}

func (h *harness) waitState(want State) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for h.node.State() != want {
		if time.Now().After(deadline) {
			h.t.Fatalf("state %s, want %s", h.node.State(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *harness) sendKV(m msgs.VideoKVCache) {
	h.t.Helper()
	if err := h.kvPub.Publish(mustCDR(h.t, &m)); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) sendCtx(m msgs.TextContext) {
	h.t.Helper()
	if err := h.ctxPub.Publish(mustCDR(h.t, &m)); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) sendRaw(p Publisher, b []byte) {
	h.t.Helper()
	if err := p.Publish(b); err != nil {
		h.t.Fatal(err)
	}
}

// send publishes the context, then the cache.
func (h *harness) send(in inputs) {
	h.t.Helper()
	h.sendCtx(in.ctx)
	h.sendKV(in.kv)
}

func (h *harness) waitChunk() msgs.ActionChunk {
	h.t.Helper()
	select {
	case m := <-h.chunks:
		return m
	case <-time.After(10 * time.Second):
		h.t.Fatalf("no ActionChunk within 10 s; log:\n%s", h.log)
	}
	return msgs.ActionChunk{}
}

// noChunk checks that nothing is published within d.
func (h *harness) noChunk(d time.Duration) {
	h.t.Helper()
	select {
	case m := <-h.chunks:
		h.t.Fatalf("unexpected ActionChunk seq %d (kv_seq %d)", m.Seq, m.KVSeq)
	case <-time.After(d):
	}
}

// diag ticks the diagnostics and returns the published status.
func (h *harness) diag() msgs.DiagnosticStatus {
	h.t.Helper()
	select {
	case h.tick <- time.Now():
	case <-time.After(10 * time.Second):
		h.t.Fatal("diagnostics loop does not take ticks")
	}
	select {
	case a := <-h.diags:
		if len(a.Status) != 1 {
			h.t.Fatalf("diagnostics has %d statuses, want 1", len(a.Status))
		}
		return a.Status[0]
	case <-time.After(10 * time.Second):
		h.t.Fatal("no diagnostics published after a tick")
	}
	return msgs.DiagnosticStatus{}
}

// diagValue returns the value of key in s, failing when absent.
func diagValue(t *testing.T, s msgs.DiagnosticStatus, key string) string {
	t.Helper()
	for _, kv := range s.Values {
		if kv.Key == key {
			return kv.Value
		}
	}
	t.Fatalf("diagnostics has no key %q; keys: %v", key, keys(s))
	return ""
}

func keys(s msgs.DiagnosticStatus) []string {
	var k []string
	for _, kv := range s.Values {
		k = append(k, kv.Key)
	}
	return k
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
