// Package node is the Fast-WAM action-expert ROS 2 node without ROS: it
// reads its configuration from ROS parameters, receives serialized
// VideoKVCache and TextContext messages, pairs and validates them, denoises
// an action chunk on an expert.Backend in one worker goroutine and publishes
// serialized ActionChunk messages and diagnostics.
//
// The node talks to the world through a Transport: the rclgo adapter in
// package node/rosnode (build tag rclgo) on a robot, or the in-process Bus
// in tests and in `fastwam replay`.
//
// The receive path (Transport callbacks) decodes without copying payloads,
// checks shapes, types and stamps, pairs the inputs and puts the pair in a
// one-element latest-wins slot; it never waits for the backend. The worker
// takes pairs from the slot, converts the tensors once into the backend's
// input buffers, rejects non-finite values, runs the flow-matching loop,
// clips, encodes and publishes.
package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fastwam/actionexpert/actions"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/kvshm"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
)

// Logger receives the node's log lines. The rclgo adapter logs through the
// ROS node's logger (console and /rosout).
type Logger interface {
	Debugf(format string, args ...any)
	Infof(format string, args ...any)
	Warnf(format string, args ...any)
	Errorf(format string, args ...any)
}

type nopLogger struct{}

func (nopLogger) Debugf(string, ...any) {}
func (nopLogger) Infof(string, ...any)  {}
func (nopLogger) Warnf(string, ...any)  {}
func (nopLogger) Errorf(string, ...any) {}

// State is the node's lifecycle state, reported in the diagnostics.
type State string

// Node states.
const (
	StateStarting       State = "starting"         // created, Run not called
	StateSelfTest       State = "self_test"        // running the golden through the backend
	StateActive         State = "active"           // processing inputs
	StateInactive       State = "inactive"         // self-tested and ready, inputs counted but not processed (see Activate)
	StateSelfTestFailed State = "self_test_failed" // refusing inputs; see the diagnostics
	StateStopped        State = "stopped"          // Run returned
)

// Config is what New needs besides the backend and the transport.
type Config struct {
	Params params.Params
	Logger Logger // nil discards the log
	// Name is the node's fully qualified name, for its diagnostic status
	// name (StatusName); DefaultNodeName when empty.
	Name string

	// Now is the node's ROS clock, for input ages, stale checks, pairing
	// timeouts and the time jumps of the inputs: time.Now when nil, the
	// simulated time of /clock with use_sim_time.
	Now func() time.Time
	// Mono measures latencies (decode, denoise, receive to publish): Now
	// when nil (a test's fake clock then drives both), else the
	// monotonic reading of time.Now.
	Mono func() time.Time
	// Tick paces the diagnostics; a 1 Hz ticker when nil.
	Tick <-chan time.Time
	// Golden, when not nil, is used instead of loading
	// Params.SelfTest.Golden.
	Golden *golden.Case
	// StartInactive ends Run's start-up (the self-test) in StateInactive
	// instead of StateActive: a managed node's configure transition.
	// Activate and Deactivate then switch between the two.
	StartInactive bool
	// RTCPlan, when not nil, is asked on the worker goroutine for the RTC
	// plan of every pair (by its VideoKVCache's seq and stamp) before it
	// is denoised: with ok, the chunk is tied to plan.Prev as the plan
	// says instead of as the node's own state would (a replay reproducing
	// recorded chunks). plan.Prev must stay unchanged until the chunk is
	// published.
	RTCPlan func(kvSeq uint64, stamp time.Time) (plan RTCPlan, ok bool)
}

// Node is one action-expert node. Create it with New, then call Run.
type Node struct {
	p       params.Params
	dims    expert.Dims
	backend expert.Backend
	log     Logger
	// Identity in the diagnostics: the fully qualified name, the device
	// (hardwareID) and the binary's build.
	name, hardware, build string
	now                   func() time.Time // ROS time (Config.Now)
	mono                  func() time.Time // latencies (Config.Mono)
	tick                  <-chan time.Time
	sched                 expert.Schedule
	golden                *golden.Case

	actions Publisher
	diag    Publisher

	// The actions.* post-processing (nil when off) and its output.
	post     *actions.Post
	robot    Publisher
	robotX   []float32
	robotOut msgs.ActionChunk
	robotBuf []byte

	running       sync.Mutex                 // held by Run
	startInactive bool                       // Config.StartInactive
	pending       atomic.Pointer[liveParams] // left by UpdateLive for the worker's next chunk
	started       chan struct{}              // closed when Run's start-up has ended (see Started)

	// Receive path.
	mu         sync.Mutex // pairer and stamp checks
	pairer     *pairer
	recvMaxAge time.Duration // max_input_age as the receive path applies it (under mu; see UpdateLive)
	kvStamp    stampCheck
	ctxStamp   stampCheck
	jumps      timeJumps // time jumps backwards (timejump.go)
	stale      staleWatch
	slot       *slot
	stats      *stats
	recycle    *recycler // the receive path's inputs and pairs, reused

	// Reported state.
	stateMu      sync.Mutex
	state        State
	selfTest     SelfTestResult
	backendState string
	lastReport   Snapshot // counters at the previous diagnostics

	// kv_transport shm (shm.go): the segments' reader and the receive
	// path's descriptor (its callbacks never overlap).
	shm     *kvshm.Reader
	handoff msgs.KVHandoff

	// Worker-owned.
	chunk  expert.Chunk // the inputs of a backend that is not an expert.InputBinder
	x      []float32    // latents: the initial noise, then the actions
	pred   []float32    // the backend's prediction at a step
	seq    uint64
	out    msgs.ActionChunk
	outBuf []byte
	host   hostTimes // the last published chunk's host path
	rtc    rtcState
	// rtcPlan is Config.RTCPlan.
	rtcPlan func(kvSeq uint64, stamp time.Time) (RTCPlan, bool)
}

// hostTimes splits the host's work on one published chunk into its parts,
// on the node's clock: what the robot waits for besides the device.
type hostTimes struct {
	Decode time.Duration // receive path: decoding and checking both messages
	Input  time.Duration // worker: decoding and checking the tensors into the backend's inputs
	Bind   time.Duration // the backend's BindChunk or BindInputs
	Steps  time.Duration // the denoise steps
	Encode time.Duration // encoding the ActionChunk
}

// New checks the configuration against the backend's contract, loads the
// self-test golden and creates the node's publishers and subscriptions on
// t. The caller keeps ownership of b and closes it after Run returns.
func New(cfg Config, b expert.Backend, t Transport) (*Node, error) {
	p := cfg.Params
	if _, err := p.Resolve(cfg.Name); err != nil {
		return nil, err
	}
	if b == nil {
		return nil, errors.New("node: no backend")
	}
	d := b.Dims()
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("node: backend contract: %w", err)
	}
	if n := len(p.ClipMin); n != 0 && n != 1 && n != d.ActionDim {
		return nil, fmt.Errorf("node: clip.min and clip.max have %d values; want 1 or %d (the action dimension)", n, d.ActionDim)
	}
	if err := checkRTC(p, d); err != nil {
		return nil, err
	}
	sched, err := expert.NewSchedule(p.Steps, float32(p.Shift))
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	rc := newRecycler()
	n := &Node{
		name: cfg.Name, hardware: hardwareID(b, p.Backend), build: Build(),
		p: p, dims: d, backend: b, log: cfg.Logger, now: cfg.Now, tick: cfg.Tick, sched: sched,
		golden:  cfg.Golden,
		recycle: rc,
		pairer: &pairer{rc: rc, policy: p.Sync.Policy, capacity: p.Sync.Buffer, timeout: p.Sync.Timeout,
			kvTopic: p.KVInputTopic(), ctxTopic: p.Topics.Context},
		slot: newSlot(), stats: newStats(), state: StateStarting, backendState: "ready",
		startInactive: cfg.StartInactive, started: make(chan struct{}), recvMaxAge: p.MaxInputAge,
		x: make([]float32, d.LatentLen()), pred: make([]float32, d.LatentLen()),
		rtc: newRTCState(p, d), rtcPlan: cfg.RTCPlan,
	}
	if _, ok := b.(expert.InputBinder); !ok {
		// The backend keeps no input buffers the node could write into.
		n.chunk = expert.Chunk{
			VideoKeys:   make([]float32, d.KVLen()),
			VideoValues: make([]float32, d.KVLen()),
			Context:     make([]float32, d.ContextLen()),
			ContextMask: make([]bool, d.ContextTokens),
		}
		// Written once now, so that the first chunk's copy does not take
		// the page faults of fresh memory: 72 MB of them made the first
		// full-size pair's copy 200 ms instead of 5 ms.
		clear(n.chunk.VideoKeys)
		clear(n.chunk.VideoValues)
		clear(n.chunk.Context)
	}
	if n.log == nil {
		n.log = nopLogger{}
	}
	if n.now == nil {
		n.now = time.Now
	}
	n.mono = cfg.Mono
	if n.mono == nil {
		n.mono = n.now
	}
	n.selfTest = SelfTestResult{Status: "none"}
	if p.SelfTest.Skip {
		n.selfTest.Status = "skipped"
	} else if n.golden == nil && p.SelfTest.Golden != "" {
		// New takes no context: the golden is read to its end (its size
		// is bounded by the file, see golden.Load).
		g, err := LoadGolden(context.Background(), p.SelfTest.Golden, d)
		if err != nil {
			return nil, fmt.Errorf("node: self_test.golden: %w", err)
		}
		n.golden = g
	}
	n.out.Actions = make([]msgs.ActionRow, d.ActionTokens)

	if n.actions, err = t.Advertise(Topic{Name: p.Topics.Actions, Type: msgs.TypeActionChunk, QoS: p.QoS.Actions}); err != nil {
		return nil, fmt.Errorf("node: advertise %s: %w", p.Topics.Actions, err)
	}
	if p.Actions.Post.Enabled() {
		if n.post, err = actions.New(p.Actions.Post, d.ActionTokens, d.ActionDim); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
		n.robotX = make([]float32, d.ActionTokens*d.ActionDim)
		n.robotOut.Actions = make([]msgs.ActionRow, d.ActionTokens)
		if n.robot, err = t.Advertise(Topic{Name: p.Actions.Topic, Type: msgs.TypeActionChunk, QoS: p.QoS.Actions}); err != nil {
			return nil, fmt.Errorf("node: advertise %s: %w", p.Actions.Topic, err)
		}
	}
	if n.diag, err = t.Advertise(Topic{Name: p.Topics.Diagnostics, Type: msgs.TypeDiagnosticArray, QoS: params.DiagnosticsQoS()}); err != nil {
		return nil, fmt.Errorf("node: advertise %s: %w", p.Topics.Diagnostics, err)
	}
	// A transport that recycles message buffers gets every input's bytes
	// back once the node is done with them: a stream of 72 MB caches then
	// leaves no garbage.
	subscribe := t.Subscribe
	if r, ok := t.(Recycler); ok {
		subscribe, n.recycle.give = r.SubscribeRecycled, r.Recycle
	}
	if p.KVTransport == params.KVTransportSHM {
		// The descriptors are small: no recycling.
		kvBytes := 4 * int64(d.KVLen()) // float32, the larger dtype
		n.shm = kvshm.NewReader(kvshm.Policy{Dir: p.SHM.Dir, AllowedUIDs: p.SHM.AllowedUIDs, MaxSlotSize: kvshm.SlotSizeFor(kvBytes, kvBytes)})
		if err := t.Subscribe(Topic{Name: p.SHM.Topic, Type: msgs.TypeKVHandoff, QoS: p.QoS.KVCache}, n.onKVHandoff); err != nil {
			return nil, fmt.Errorf("node: subscribe %s: %w", p.SHM.Topic, err)
		}
	} else if err := subscribe(Topic{Name: p.Topics.KVCache, Type: msgs.TypeVideoKVCache, QoS: p.QoS.KVCache}, n.onKV); err != nil {
		return nil, fmt.Errorf("node: subscribe %s: %w", p.Topics.KVCache, err)
	}
	if err := subscribe(Topic{Name: p.Topics.Context, Type: msgs.TypeTextContext, QoS: p.QoS.Context}, n.onContext); err != nil {
		return nil, fmt.Errorf("node: subscribe %s: %w", p.Topics.Context, err)
	}
	return n, nil
}

// Dims is the contract of the node's backend.
func (n *Node) Dims() expert.Dims { return n.dims }

// State reports the node's lifecycle state.
func (n *Node) State() State {
	n.stateMu.Lock()
	defer n.stateMu.Unlock()
	return n.state
}

func (n *Node) setState(s State) {
	n.stateMu.Lock()
	n.state = s
	n.stateMu.Unlock()
}

// Started returns a channel closed when Run's start-up has ended: the
// self-test has passed (the node is active, or inactive with
// Config.StartInactive) or failed, or Run has returned.
func (n *Node) Started() <-chan struct{} { return n.started }

// Activate makes an inactive node take inputs (a managed node's activate
// transition). It is a no-op on an active node, and an error in any other
// state (before the self-test has passed, after it failed, once stopped).
func (n *Node) Activate() error {
	n.stateMu.Lock()
	st := n.state
	if st == StateInactive {
		n.state = StateActive
	}
	n.stateMu.Unlock()
	switch st {
	case StateActive:
		return nil
	case StateInactive:
		n.activated()
		return nil
	}
	return fmt.Errorf("node: cannot activate a node that is %s (want %s)", st, StateInactive)
}

// activated starts counting the time without inputs (diagnostics.stale_after)
// from now. stateMu must not be held (Node.mu is taken after it elsewhere).
func (n *Node) activated() {
	n.mu.Lock()
	n.stale.active = true
	n.stale.mark(n.now(), n.mono(), "none since the node became active")
	n.mu.Unlock()
}

// Deactivate stops an active node taking inputs without releasing its
// backend (a managed node's deactivate transition): inputs arriving from
// then on are counted as dropped (inactive), and the pair waiting for the
// worker, if any, is dropped. A chunk being denoised is still published.
// It is a no-op on an inactive node, and an error in any other state.
func (n *Node) Deactivate() error {
	n.stateMu.Lock()
	switch n.state {
	case StateInactive:
		n.stateMu.Unlock()
		return nil
	case StateActive:
		n.state = StateInactive
		n.stateMu.Unlock()
	default:
		st := n.state
		n.stateMu.Unlock()
		return fmt.Errorf("node: cannot deactivate a node that is %s (want %s)", st, StateActive)
	}
	n.mu.Lock()
	n.stale.active = false
	n.mu.Unlock()
	if p := n.slot.Clear(); p != nil {
		n.recycle.freePair(p)
		n.dropped(n.p.KVInputTopic(), DropInactive)
	}
	return nil
}

// SelfTest reports the start-up self-test's result.
func (n *Node) SelfTest() SelfTestResult {
	n.stateMu.Lock()
	defer n.stateMu.Unlock()
	return n.selfTest
}

func (n *Node) setBackendState(s string) {
	n.stateMu.Lock()
	n.backendState = s
	n.stateMu.Unlock()
}

// Stats returns a copy of the node's counters and latency summaries.
func (n *Node) Stats() Snapshot { return n.stats.snapshot() }

// Run runs the self-test, then processes inputs until ctx is done, and
// publishes diagnostics all along. A failed self-test leaves the node up
// but inactive: inputs are dropped and the diagnostics report the failure
// at ERROR level. Run returns after the worker has stopped using the
// backend, so the caller may close the backend then. Run may be called
// once.
func (n *Node) Run(ctx context.Context) error {
	if !n.running.TryLock() {
		return errors.New("node: Run called twice")
	}
	tick := n.tick
	if tick == nil {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C
	}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { n.diagLoop(runCtx, tick) })
	var startOnce sync.Once
	endStart := func() { startOnce.Do(func() { close(n.started) }) }
	defer func() {
		endStart()
		cancel()
		wg.Wait()
		n.setState(StateStopped)
		if p := n.slot.Clear(); p != nil {
			n.recycle.freePair(p)
			n.dropped(n.p.KVInputTopic(), DropShutdown)
		}
		if n.shm != nil {
			_ = n.shm.Close() // unmapped once the pairing buffer lets go
		}
		n.publishDiagnostics(n.now())
		n.log.Infof("stopped: %s", n.summary())
	}()

	clip := "none"
	if len(n.p.ClipMin) > 0 {
		clip = fmt.Sprintf("%v..%v", n.p.ClipMin, n.p.ClipMax)
	}
	n.log.Infof("backend %s, contract %v; %d steps, shift %g, noise seed %d, sync %s (buffer %d, timeout %v), max input age %v, clip %s, dry_run %v, control period %v, rtc %v",
		n.p.Backend, n.dims, n.p.Steps, n.p.Shift, n.p.NoiseSeed, n.p.Sync.Policy, n.p.Sync.Buffer, n.p.Sync.Timeout,
		n.p.MaxInputAge, clip, n.p.DryRun, n.p.ControlPeriod, n.p.RTC.Mode)
	if n.golden != nil && !n.p.SelfTest.Skip {
		n.setState(StateSelfTest)
		n.log.Infof("self-test: running the golden step through the backend")
		res := RunSelfTest(runCtx, n.backend, n.golden, n.p.SelfTest.MinCosine)
		if ctx.Err() != nil {
			return nil
		}
		n.stateMu.Lock()
		n.selfTest = res
		n.stateMu.Unlock()
		if !res.Passed() {
			n.setState(StateSelfTestFailed)
			n.log.Errorf("self-test %s; refusing to go active (inputs are dropped until restart)", res)
			endStart()
			<-ctx.Done()
			return nil
		}
		n.log.Infof("self-test %s", res)
	}
	if n.startInactive {
		n.setState(StateInactive)
		n.log.Infof("inactive (configured): %s + %s -> %s once activated", n.p.KVInputTopic(), n.p.Topics.Context, n.p.Topics.Actions)
	} else {
		n.setState(StateActive)
		n.activated()
		n.log.Infof("active: %s + %s -> %s", n.p.KVInputTopic(), n.p.Topics.Context, n.p.Topics.Actions)
	}
	endStart()
	for {
		p := n.slot.Take(runCtx)
		if p == nil {
			return nil
		}
		n.process(runCtx, p)
		n.recycle.freePair(p)
	}
}

func (n *Node) summary() string {
	s := n.stats.snapshot()
	out := fmt.Sprintf("%d chunks published, %d backend errors", s.Out, s.Failed)
	for _, group := range []struct {
		name   string
		counts map[string]uint64
	}{{"rejected", stringKeys(s.Rejected)}, {"dropped", stringKeys(s.Dropped)}} {
		if len(group.counts) == 0 {
			out += ", 0 " + group.name
			continue
		}
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(group.counts)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, group.counts[k]))
		}
		out += fmt.Sprintf("; %s: %s", group.name, strings.Join(parts, ", "))
	}
	return out
}

func stringKeys[K ~string](m map[K]uint64) map[string]uint64 {
	out := make(map[string]uint64, len(m))
	for k, v := range m {
		out[string(k)] = v
	}
	return out
}

// onKV is the receive path of the VideoKVCache topic.
func (n *Node) onKV(data []byte) {
	now, mono := n.now(), n.mono()
	topic := n.p.Topics.KVCache
	n.stats.received(topic)
	in := n.recycle.newKV()
	in.raw = data
	if n.State() != StateActive {
		n.recycle.freeKV(in)
		n.dropped(topic, DropInactive)
		return
	}
	if rej := decodeKV(in, topic, data, n.dims); rej != nil {
		n.recycle.freeKV(in)
		n.rejected(rej)
		return
	}
	n.acceptKV(in, topic, now, mono)
}

// acceptKV checks a decoded cache's stamp and pairs it.
func (n *Node) acceptKV(in *kvInput, topic string, now, mono time.Time) {
	in.recv, in.mono, in.decode = now, mono, n.mono().Sub(mono)
	n.mu.Lock()
	n.observeClock(now)
	if rej := n.checkStamp(topic, &n.kvStamp, &n.jumps.kvSeq, in.stamp, in.msg.Seq, now); rej != nil {
		n.mu.Unlock()
		n.recycle.freeKV(in)
		n.rejected(rej)
		return
	}
	p := n.pairer.addKV(in, now, n.dropped)
	n.paired(p, now, mono)
	n.mu.Unlock()
	n.offer(p)
}

// onContext is the receive path of the TextContext topic. With the latest
// policy a context's stamp is not checked: the newest one received wins.
func (n *Node) onContext(data []byte) {
	now, mono := n.now(), n.mono()
	topic := n.p.Topics.Context
	n.stats.received(topic)
	in := n.recycle.newCtx()
	in.raw = data
	if n.State() != StateActive {
		n.recycle.freeCtx(in)
		n.dropped(topic, DropInactive)
		return
	}
	if rej := decodeContext(in, topic, data, n.dims); rej != nil {
		n.recycle.freeCtx(in)
		n.rejected(rej)
		return
	}
	in.recv, in.mono, in.decode = now, mono, n.mono().Sub(mono)
	n.mu.Lock()
	n.observeClock(now)
	if n.p.Sync.Policy == params.SyncExact {
		if rej := n.checkStamp(topic, &n.ctxStamp, &n.jumps.ctxSeq, in.stamp, in.msg.Seq, now); rej != nil {
			n.mu.Unlock()
			n.recycle.freeCtx(in)
			n.rejected(rej)
			return
		}
	}
	p := n.pairer.addContext(in, now, n.dropped)
	n.paired(p, now, mono)
	n.mu.Unlock()
	n.offer(p)
}

// paired notes a pair p (when not nil) completed at now (node's clock)
// and mono: its timeline (the time jumps so far) and the restart of the
// count of diagnostics.stale_after. n.mu is held.
func (n *Node) paired(p *pair, now, mono time.Time) {
	if p != nil {
		p.timeline = n.jumps.count.Load()
		n.stale.mark(now, mono, "since the last one")
	}
}

// offer hands a completed pair to the worker.
func (n *Node) offer(p *pair) {
	if p == nil {
		return
	}
	n.stats.pair()
	if old := n.slot.Put(p); old != nil {
		n.recycle.freePair(old)
		n.dropped(n.p.KVInputTopic(), DropSuperseded)
	}
}

// rejected counts an invalid input and logs the first of each kind.
func (n *Node) rejected(e *inputError) { n.logRejected(e, n.stats.reject(e.reason)) }

// rejectedPair counts and logs an input of a pair that the worker rejects.
func (n *Node) rejectedPair(e *inputError) { n.logRejected(e, n.stats.rejectPair(e.reason)) }

// logRejected logs the first rejection of each reason.
func (n *Node) logRejected(e *inputError, count uint64) {
	if count == 1 {
		n.log.Warnf("%v (logged once; further %q rejections are counted in %s)", e, e.reason, n.p.Topics.Diagnostics)
	}
}

// dropped counts a valid input that will not be processed and logs the
// first of each kind.
func (n *Node) dropped(topic string, why Drop) {
	if n.stats.drop(why) != 1 {
		return
	}
	var msg string
	switch why {
	case DropSuperseded:
		msg = "inputs arrive faster than the backend denoises; the newest pair wins"
	case DropUnpaired:
		msg = "a message's partner can no longer arrive in stamp order"
	case DropPairTimeout:
		msg = fmt.Sprintf("no partner with the same stamp within sync.timeout %v", n.pairer.timeout)
	case DropOverflow:
		msg = fmt.Sprintf("more than sync.buffer %d messages waiting for a partner", n.p.Sync.Buffer)
	case DropInactive:
		msg = fmt.Sprintf("the node is %s", n.State())
	case DropShutdown:
		msg = "shutting down"
	case DropTimeJump:
		msg = "it belongs to the timeline before a time jump backwards"
	}
	n.log.Infof("dropping %s input (%s): %s (logged once; counted in %s)", topic, why, msg, n.p.Topics.Diagnostics)
}
