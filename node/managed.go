package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/lifecycle"
	"github.com/fastwam/actionexpert/node/params"
)

// Opener opens the backend that p names: backends.Open in the binaries.
type Opener func(ctx context.Context, p params.Params) (expert.Backend, error)

// ManagedConfig is what NewManaged needs besides the transport.
type ManagedConfig struct {
	Params params.Params
	Logger Logger           // nil discards the log
	Now    func() time.Time // as Config.Now: ROS time (sim time with use_sim_time)
	Mono   func() time.Time // as Config.Mono: latencies
	Open   Opener           // opens the backend at configure
	Name   string           // as Config.Name: the node's fully qualified name
	// Tick paces the diagnostics (Run's loop publishes them while
	// unconfigured and hands the ticks to the configured Node); a 1 Hz
	// ticker when nil.
	Tick <-chan time.Time
}

// Managed is the action-expert node with a managed (ROS 2 lifecycle)
// life. Its topics exist from NewManaged on, because a ROS node's
// subscriptions are created before it spins; what the transitions change
// is what stands behind them:
//
//   - Configure opens the backend (the HTP backend loads the context
//     binary and votes its performance mode), reads the self-test golden,
//     creates the Node and runs the self-test: the node is then inactive.
//   - Activate makes the node take inputs; Deactivate stops it without
//     releasing the backend (inputs are counted as dropped, inactive).
//   - Cleanup stops the Node and closes the backend (the NPU is released),
//     back to unconfigured; Shutdown does the same from any state.
//
// While unconfigured, inputs are counted and dropped, and the diagnostics
// report the state and the reason of the last failed transition. The
// methods are safe for concurrent use; transitions run one at a time.
type Managed struct {
	cfg  ManagedConfig
	log  Logger
	now  func() time.Time
	t    Transport
	give func([]byte) // hands a message's buffer back to a recycling transport

	actions, diag Publisher
	kv, ctx       atomic.Pointer[Handler] // the configured Node's receive paths

	unconfiguredIn atomic.Uint64  // inputs received while no Node is configured
	nodeTick       chan time.Time // Run's ticks, handed to the configured Node

	// mu serialises transitions (a configure may take minutes: loading a
	// 2 GB context) and guards the fields up to done; readers of the
	// parameters and the state never wait for it.
	mu      sync.Mutex
	backend expert.Backend
	node    *Node
	stop    context.CancelFunc // ends the Node's Run
	done    chan error         // the Node's Run result

	cur atomic.Pointer[Node] // node, for readers

	robotMu sync.Mutex
	robot   map[string]Publisher // executable-chunk publishers, by topic (managedTransport.Advertise)

	pmu     sync.Mutex         // guards the fields below
	p       params.Params      // the parameters the next configure uses
	lastErr string             // why the last transition failed
	machine *lifecycle.Machine // set by Serve: the lifecycle state reported while unconfigured
}

// NewManaged validates the parameters and creates the node's publishers
// and subscriptions on t. Nothing is loaded until Configure.
func NewManaged(cfg ManagedConfig, t Transport) (*Managed, error) {
	ignoredQoS, err := cfg.Params.Resolve(cfg.Name)
	if err != nil {
		return nil, err
	}
	if cfg.Open == nil {
		return nil, errors.New("node: managed node without a backend opener")
	}
	m := &Managed{cfg: cfg, log: cfg.Logger, now: cfg.Now, t: t, p: cfg.Params, nodeTick: make(chan time.Time, 1)}
	if m.log == nil {
		m.log = nopLogger{}
	}
	if len(ignoredQoS) > 0 {
		m.log.Infof("qos_overrides for topics this node does not have, ignored: %s", strings.Join(ignoredQoS, ", "))
	}
	if m.now == nil {
		m.now = time.Now
	}
	p := cfg.Params
	if m.actions, err = t.Advertise(Topic{Name: p.Topics.Actions, Type: msgs.TypeActionChunk, QoS: p.QoS.Actions}); err != nil {
		return nil, fmt.Errorf("node: advertise %s: %w", p.Topics.Actions, err)
	}
	if m.diag, err = t.Advertise(Topic{Name: p.Topics.Diagnostics, Type: msgs.TypeDiagnosticArray, QoS: params.DiagnosticsQoS()}); err != nil {
		return nil, fmt.Errorf("node: advertise %s: %w", p.Topics.Diagnostics, err)
	}
	subscribe := t.Subscribe
	if r, ok := t.(Recycler); ok {
		subscribe, m.give = r.SubscribeRecycled, r.Recycle
	}
	if p.KVTransport == params.KVTransportSHM {
		// The Node subscribes to the descriptors without recycling
		// (New): their buffers are not the transport's to take back.
		if err := t.Subscribe(Topic{Name: p.SHM.Topic, Type: msgs.TypeKVHandoff, QoS: p.QoS.KVCache}, m.forwardTo(&m.kv, nil)); err != nil {
			return nil, fmt.Errorf("node: subscribe %s: %w", p.SHM.Topic, err)
		}
	} else if err := subscribe(Topic{Name: p.Topics.KVCache, Type: msgs.TypeVideoKVCache, QoS: p.QoS.KVCache}, m.forward(&m.kv)); err != nil {
		return nil, fmt.Errorf("node: subscribe %s: %w", p.Topics.KVCache, err)
	}
	if err := subscribe(Topic{Name: p.Topics.Context, Type: msgs.TypeTextContext, QoS: p.QoS.Context}, m.forward(&m.ctx)); err != nil {
		return nil, fmt.Errorf("node: subscribe %s: %w", p.Topics.Context, err)
	}
	return m, nil
}

// forward returns the transport's handler of one topic: it hands every
// message to the configured Node's handler, or counts and releases it.
func (m *Managed) forward(h *atomic.Pointer[Handler]) Handler {
	return m.forwardTo(h, m.give)
}

// forwardTo is forward with the release of an unhandled message's
// buffer given (nil: none).
func (m *Managed) forwardTo(h *atomic.Pointer[Handler], give func([]byte)) Handler {
	return func(data []byte) {
		if f := h.Load(); f != nil {
			(*f)(data)
			return
		}
		m.unconfiguredIn.Add(1)
		if give != nil {
			give(data)
		}
	}
}

// Params returns the parameters the next configure uses.
func (m *Managed) Params() params.Params {
	m.pmu.Lock()
	defer m.pmu.Unlock()
	return m.p
}

// errTransitioning refuses a parameter change while a transition runs.
var errTransitioning = errors.New("node: a lifecycle transition is running; set the parameter when it is done")

// Node returns the configured Node, or nil while unconfigured.
func (m *Managed) Node() *Node { return m.cur.Load() }

// LastError is the reason the last transition failed ("" if none did).
func (m *Managed) LastError() string {
	m.pmu.Lock()
	defer m.pmu.Unlock()
	return m.lastErr
}

func (m *Managed) setLastError(why string) {
	m.pmu.Lock()
	m.lastErr = why
	m.pmu.Unlock()
}

func (m *Managed) fail(err error) error {
	m.setLastError(err.Error())
	m.log.Errorf("%v", err)
	return err
}

// Configure opens the backend, creates the Node and runs its self-test
// under ctx. On any failure everything it opened is released, the node
// stays unconfigured and the error says why.
func (m *Managed) Configure(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.node != nil {
		return errors.New("node: configure: already configured")
	}
	p := m.Params()
	m.log.Infof("configure: opening the %s backend", p.Backend)
	b, err := m.cfg.Open(ctx, p)
	if err != nil {
		return m.fail(fmt.Errorf("configure: %w", err))
	}
	cfg := Config{Params: p, Logger: m.log, Name: m.cfg.Name, Now: m.cfg.Now, Mono: m.cfg.Mono, Tick: m.nodeTick, StartInactive: true}
	if !p.SelfTest.Skip && p.SelfTest.Golden != "" {
		if cfg.Golden, err = LoadGolden(ctx, p.SelfTest.Golden, b.Dims()); err != nil {
			return m.fail(errors.Join(fmt.Errorf("configure: self_test.golden: %w", err), closeBackend(b)))
		}
	}
	n, err := New(cfg, b, managedTransport{m})
	if err != nil {
		return m.fail(errors.Join(fmt.Errorf("configure: %w", err), closeBackend(b)))
	}
	// The Node runs until Cleanup or Shutdown (Run's end) stops it.
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(runCtx) }()
	select {
	case <-n.Started():
	case <-ctx.Done():
	}
	if st := n.State(); st != StateInactive {
		stop()
		runErr := <-done
		why := fmt.Errorf("configure: the node is %s, not ready", st)
		if st == StateSelfTestFailed {
			why = fmt.Errorf("configure: self-test %s", n.SelfTest())
		} else if ctx.Err() != nil {
			why = fmt.Errorf("configure: %w", ctx.Err())
		}
		return m.fail(errors.Join(why, runErr, closeBackend(b)))
	}
	m.backend, m.node, m.stop, m.done = b, n, stop, done
	m.cur.Store(n)
	m.setLastError("")
	m.log.Infof("configured: %s backend open, self-test %s", p.Backend, n.SelfTest())
	return nil
}

// Activate makes the configured node take inputs.
func (m *Managed) Activate() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.node == nil {
		return m.fail(errors.New("activate: the node is not configured"))
	}
	if err := m.node.Activate(); err != nil {
		return m.fail(fmt.Errorf("activate: %w", err))
	}
	p := m.cfg.Params
	m.log.Infof("active: %s + %s -> %s", p.KVInputTopic(), p.Topics.Context, p.Topics.Actions)
	return nil
}

// Deactivate stops the node taking inputs; the backend stays open.
func (m *Managed) Deactivate() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.node == nil {
		return m.fail(errors.New("deactivate: the node is not configured"))
	}
	if err := m.node.Deactivate(); err != nil {
		return m.fail(fmt.Errorf("deactivate: %w", err))
	}
	m.log.Infof("inactive: inputs are counted, not processed; the backend stays loaded")
	return nil
}

// Cleanup stops the Node (a chunk being denoised is abandoned) and closes
// the backend: the node is unconfigured again.
func (m *Managed) Cleanup() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cleanup()
}

func (m *Managed) cleanup() error {
	if m.node == nil {
		return nil
	}
	m.kv.Store(nil)
	m.ctx.Store(nil)
	m.cur.Store(nil)
	m.stop()
	runErr := <-m.done
	err := errors.Join(runErr, closeBackend(m.backend))
	m.node, m.backend, m.stop, m.done = nil, nil, nil, nil
	if err != nil {
		return m.fail(fmt.Errorf("cleanup: %w", err))
	}
	m.log.Infof("unconfigured: backend closed")
	return nil
}

// Shutdown releases everything from any state (the shutdown transition).
func (m *Managed) Shutdown() error { return m.Cleanup() }

func closeBackend(b expert.Backend) error {
	if err := b.Close(); err != nil {
		return fmt.Errorf("close backend: %w", err)
	}
	return nil
}

// Run publishes the diagnostics while the node is unconfigured (a
// configured Node publishes its own) until ctx is done, then shuts down:
// the configured Node, if any, stops and the backend is closed.
func (m *Managed) Run(ctx context.Context) error {
	tick := m.cfg.Tick
	if tick == nil {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return m.Shutdown()
		case now := <-tick:
			if m.cur.Load() == nil {
				m.publishDiagnostics()
				continue
			}
			select { // a Node still busy with the previous tick skips this one
			case m.nodeTick <- now:
			default:
			}
		}
	}
}

// UnconfiguredDiagnostics is the status the managed node publishes while
// no Node is configured.
func (m *Managed) UnconfiguredDiagnostics() msgs.DiagnosticArray {
	now := m.now()
	m.pmu.Lock()
	p, why, mach := m.p, m.lastErr, m.machine
	m.pmu.Unlock()
	state := "unconfigured"
	if mach != nil {
		state = mach.State().Label // finalized after shutdown, or a transition state
	}
	level, message := msgs.LevelOK, state
	if why != "" {
		level, message = msgs.LevelError, state+": "+why
	}
	return msgs.DiagnosticArray{
		Header: msgs.Header{Stamp: msgs.Time{Sec: int32(now.Unix()), Nanosec: uint32(now.Nanosecond())}},
		Status: []msgs.DiagnosticStatus{{
			Level: level, Name: StatusName(m.cfg.Name), Message: message, HardwareID: p.Backend,
			Values: []msgs.KeyValue{
				{Key: "state", Value: state},
				{Key: "build", Value: Build()},
				{Key: "backend", Value: p.Backend},
				{Key: "last_error", Value: why},
				{Key: "dropped.unconfigured", Value: strconv.FormatUint(m.unconfiguredIn.Load(), 10)},
			},
		}},
	}
}

func (m *Managed) publishDiagnostics() {
	arr := m.UnconfiguredDiagnostics()
	buf, err := arr.MarshalCDR()
	if err == nil {
		err = m.diag.Publish(buf)
	}
	if err != nil {
		m.log.Warnf("diagnostics: %v", err)
	}
}

// managedTransport is the Transport a configured Node sees: its
// subscriptions are the managed node's (created once), its publishers
// the managed node's.
type managedTransport struct{ m *Managed }

func (t managedTransport) Subscribe(topic Topic, h Handler) error {
	p := t.m.cfg.Params
	switch {
	case p.KVTransport == params.KVTransportSHM && topic.Name == p.SHM.Topic && topic.Type == msgs.TypeKVHandoff,
		p.KVTransport != params.KVTransportSHM && topic.Name == p.Topics.KVCache:
		t.m.kv.Store(&h)
	case topic.Name == p.Topics.Context:
		t.m.ctx.Store(&h)
	default:
		return fmt.Errorf("node: managed node has no subscription %s", topic.Name)
	}
	return nil
}

func (t managedTransport) SubscribeRecycled(topic Topic, h Handler) error {
	return t.Subscribe(topic, h)
}

func (t managedTransport) Recycle(data []byte) {
	if t.m.give != nil {
		t.m.give(data)
	}
}

func (t managedTransport) Advertise(topic Topic) (Publisher, error) {
	switch topic.Name {
	case t.m.cfg.Params.Topics.Actions:
		return t.m.actions, nil
	case t.m.cfg.Params.Topics.Diagnostics:
		return t.m.diag, nil
	}
	if topic.Type == msgs.TypeActionChunk {
		// The executable chunks (actions.*): created on the first
		// configure that enables them (the parameters may enable them
		// while unconfigured), then kept for the managed node's lifetime.
		t.m.robotMu.Lock()
		defer t.m.robotMu.Unlock()
		if pub, ok := t.m.robot[topic.Name]; ok {
			return pub, nil
		}
		pub, err := t.m.t.Advertise(topic)
		if err != nil {
			return nil, err
		}
		if t.m.robot == nil {
			t.m.robot = map[string]Publisher{}
		}
		t.m.robot[topic.Name] = pub
		return pub, nil
	}
	return nil, fmt.Errorf("node: managed node has no publisher %s", topic.Name)
}
