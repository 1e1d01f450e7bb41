// Package asyncsim is a closed-loop timing simulation of the action expert
// and the chunk executor without ROS: `fastwam async-sim`.
//
// One simulation runs the action-expert Node (any expert.Backend; the CPU
// backend with the tiny weights in the command) and the chunk Executor on
// one in-process node.Bus and one executor.VirtualClock, which is also the
// node's clock. Time advances only when the simulation says so, so the
// node's real compute time does not matter and a run is deterministic.
//
// The timing model, at control instants T_k = Start + k*dt:
//
//  1. A held chunk whose delivery time is at or before T_k is delivered to
//     the executor, the clock reading its delivery time.
//  2. If the node is idle (no chunk of it is held), the observation of
//     instant k (stamp T_k, seq k) is published on the bus and the node
//     computes a chunk from it; the clock does not move meanwhile. The
//     chunk is held until T_k + Latency*dt: the node is busy until then.
//     A latency of 0 delivers it at once (step 1 again).
//  3. The executor executes instant T_k (Executor.Step).
//
// So the node takes its next observation at the first control instant at
// or after the delivery of its previous chunk: chunks come one per
// ceil(Latency) control periods (one per period at latency 0), each
// observation ceil(Latency) periods after the previous one, so the shift
// s of RTC is ceil(Latency). The executor plays rows 0 .. ceil(Latency)-1
// of a new chunk's time span from the previous chunk (they are past when
// it arrives) and switches at row ceil(Latency): the seam.
//
// The node publishes on a topic only the simulation listens to; the
// simulation forwards each chunk, at its delivery time, on the topic the
// executor subscribes to (both on the same bus).
//
// The device cycle model (Board.Estimate, RunCycles; `fastwam cycle`)
// estimates the latency of each graph of one observation-to-chunk cycle on
// the IQ-9075's NPU from its bytes and FLOPs, and runs the simulation with
// that cycle as the latency (docs/cycle.md).
package asyncsim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/fastwam/actionexpert/executor"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
)

// Defaults of Options.
const (
	DefaultLatency = 8.0 // control periods: 0.4 s at 20 Hz, within the IQ-9075's 8-14
	DefaultPeriods = 400
	// DefaultStartUnix is the stamp (Unix seconds) of instant 0.
	DefaultStartUnix = 1_700_000_000
	// DefaultChunkTimeout bounds the real time one chunk may take.
	DefaultChunkTimeout = time.Minute
	// MaxPeriods bounds Options.Periods.
	MaxPeriods = 1_000_000
)

// Topics of the simulation's bus.
const (
	computedTopic = "asyncsim/action_chunk_computed" // the node publishes here
	chunksTopic   = "action_chunk"                   // the executor subscribes here
	actionTopic   = "action"                         // the executor publishes here
)

// Modes are the RTC modes a simulation runs, in order.
func Modes() []expert.RTCMode {
	return []expert.RTCMode{expert.RTCOff, expert.RTCReplace, expert.RTCGuided}
}

// Options configure Run.
type Options struct {
	// Pairs are the observations' inputs, used in turn by the observations
	// the node takes (its j-th takes pair j mod len(Pairs), so that
	// consecutive chunks see different inputs whatever the latency),
	// unless Drift is set.
	Pairs []Pair
	// Drift, when set, replaces the cycle by a seeded drift of Pairs[0]
	// (DriftSeed): every value moves on its own slow sine of amplitude
	// DriftAmplitude times its tensor's RMS, as a function of the
	// instant k (of the time, not of the observations taken).
	Drift     bool
	DriftSeed uint64

	// Backend denoises; the caller closes it after Run. Params are the
	// node's (a backend, its weights parameter, steps, shift, noise seed);
	// Run sets the control period, the RTC parameters of each mode, the
	// topics and the self-test (skipped) and input age (0) itself.
	Backend expert.Backend
	Params  params.Params

	ControlPeriod time.Duration // dt; 0: params.Default' (0.05 s)
	// Latency is the inference latency in control periods, >= 0 and
	// below the chunk's rows; it may be fractional.
	Latency float64
	// Delay is rtc.inference_delay (d); a negative value means
	// ceil(Latency).
	Delay       int
	Horizon     int // rtc.execution_horizon (H)
	Schedule    expert.MaskSchedule
	MaxGuidance float64 // rtc.max_guidance (beta)
	Aggregation executor.Aggregation
	Periods     int // control instants simulated
	// StampJitter, in [0, 1), puts the observations' stamps off the
	// control grid: observation k is stamped T_k - u_k*StampJitter*dt,
	// u_k in [0, 1) drawn from k alone (the same in every mode), as a
	// real producer's stamps are (issue 16). 0: on the grid.
	StampJitter float64

	Start        time.Time     // instant 0; zero: DefaultStartUnix
	ChunkTimeout time.Duration // real time allowed per chunk; 0: DefaultChunkTimeout
	Logger       node.Logger   // the node's and the executor's log; nil discards it
}

// Executed is one action the executor published.
type Executed struct {
	K        int // control instant
	Values   []float32
	ChunkSeq uint64
	Row      uint32
	Held     bool
}

// Chunk is one chunk the node published, as delivered to the executor.
type Chunk struct {
	K         int       // instant of its observation
	Delivered time.Time // when the executor received it
	Msg       msgs.ActionChunk
}

// ModeResult is what one RTC mode's run gave.
type ModeResult struct {
	Mode   expert.RTCMode
	Chunks []Chunk // published, in order
	// Tied counts the chunks of Chunks the node tied to their predecessor
	// (rtc_mode replace or guided); Resets are the node's RTC resets.
	Tied   int
	Resets uint64
	// Seams are the executor's seam jumps (Executor.SeamJumps), Stats its
	// counters.
	Seams []float64
	Stats executor.Stats
	// FrozenMax is max |A_new[i] - Y[i]| over every chunk after the first
	// and its frozen rows i < d with a row of the previous chunk
	// (Y[i] = A_prev[s+i], s the chunks' stamp difference in periods);
	// FrozenRows counts those rows. NaN when there are none.
	FrozenMax  float64
	FrozenRows int
	Executed   []Executed
}

// Result is a simulation's outcome: one ModeResult per mode of Modes.
type Result struct {
	Start         time.Time     // instant 0
	ControlPeriod time.Duration // dt used
	Delay         int           // d used
	Horizon       int
	Modes         []ModeResult
}

// Quantiles is the p50, p95 and max of a sample (NaN without one).
type Quantiles struct{ P50, P95, Max float64 }

// SeamQuantiles summarises the seam jumps.
func (m *ModeResult) SeamQuantiles() Quantiles { return quantiles(m.Seams) }

func quantiles(v []float64) Quantiles {
	if len(v) == 0 {
		return Quantiles{math.NaN(), math.NaN(), math.NaN()}
	}
	s := slices.Sorted(slices.Values(v))
	at := func(q float64) float64 { return s[int(q*float64(len(s)-1)+0.5)] }
	return Quantiles{at(0.5), at(0.95), s[len(s)-1]}
}

// Mode returns the result of mode m.
func (r *Result) Mode(m expert.RTCMode) *ModeResult {
	for i := range r.Modes {
		if r.Modes[i].Mode == m {
			return &r.Modes[i]
		}
	}
	return nil
}

// check validates o against the backend's contract and fills in defaults.
func (o *Options) check() error {
	if o.Backend == nil {
		return errors.New("asyncsim: no backend")
	}
	if len(o.Pairs) == 0 {
		return errNoPairs
	}
	rows := o.Backend.Dims().ActionTokens
	if o.ControlPeriod == 0 {
		o.ControlPeriod = params.Default().ControlPeriod
	}
	if o.ControlPeriod < time.Millisecond || o.ControlPeriod > time.Minute {
		return fmt.Errorf("asyncsim: control period %v; want 1 ms to 1 min", o.ControlPeriod)
	}
	if !(o.Latency >= 0 && o.Latency <= float64(rows-1)) {
		return fmt.Errorf("asyncsim: latency %v control periods; want 0 to %d (a chunk of %d rows arriving later has no row left to execute)", o.Latency, rows-1, rows)
	}
	if o.Horizon < 1 || o.Horizon > rows {
		return fmt.Errorf("asyncsim: horizon %d; want 1 to %d (the backend's action_tokens)", o.Horizon, rows)
	}
	if o.Delay < 0 {
		o.Delay = int(math.Ceil(o.Latency))
	}
	if o.Delay > o.Horizon {
		return fmt.Errorf("asyncsim: delay %d exceeds the horizon %d; want a delay of at most the horizon (raise the horizon or lower the delay)", o.Delay, o.Horizon)
	}
	if !(o.MaxGuidance >= 0) || o.MaxGuidance > math.MaxFloat32 {
		return fmt.Errorf("asyncsim: max guidance %v; want a finite number >= 0", o.MaxGuidance)
	}
	if !(o.StampJitter >= 0 && o.StampJitter < 1) {
		return fmt.Errorf("asyncsim: stamp jitter %v control periods; want 0 to below 1", o.StampJitter)
	}
	if o.Periods < 1 || o.Periods > MaxPeriods {
		return fmt.Errorf("asyncsim: %d periods; want 1 to %d", o.Periods, MaxPeriods)
	}
	if o.Start.IsZero() {
		o.Start = time.Unix(DefaultStartUnix, 0)
	}
	if o.ChunkTimeout <= 0 {
		o.ChunkTimeout = DefaultChunkTimeout
	}
	return nil
}

// Run simulates o.Periods control instants once per mode of Modes, with
// the same inputs and the same noise, and returns their results. An error
// is a simulation that could not run as modelled: bad options, a node or
// executor that refused its configuration, a chunk not produced or
// refused by the executor, or ctx done.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	res := &Result{Start: o.Start, ControlPeriod: o.ControlPeriod, Delay: o.Delay, Horizon: o.Horizon}
	for _, m := range Modes() {
		mr, err := runMode(ctx, &o, m)
		if err != nil {
			return nil, fmt.Errorf("asyncsim: rtc %v: %w", m, err)
		}
		res.Modes = append(res.Modes, *mr)
	}
	return res, nil
}

// sim is one mode's run.
type sim struct {
	o     *Options
	mode  expert.RTCMode
	clock *executor.VirtualClock
	node  *node.Node
	exec  *executor.Executor

	kvPub, ctxPub, chunkPub node.Publisher
	computed                chan []byte // the node's chunks, as published

	mu       sync.Mutex
	executed []Executed
	k        int   // instant being executed (for the executed actions)
	badOut   error // an executed action that did not decode
}

func (s *sim) nodeParams() params.Params {
	p := s.o.Params
	p.ControlPeriod = s.o.ControlPeriod
	p.RTC = params.RTCParams{Mode: s.mode, InferenceDelay: s.o.Delay, ExecutionHorizon: s.o.Horizon,
		MaxGuidance: s.o.MaxGuidance, Schedule: s.o.Schedule}
	p.Topics.Actions = computedTopic
	p.SelfTest.Skip = true
	p.MaxInputAge = 0
	return p
}

func runMode(ctx context.Context, o *Options, mode expert.RTCMode) (*ModeResult, error) {
	s := &sim{o: o, mode: mode, clock: executor.NewVirtualClock(o.Start), computed: make(chan []byte, 4)}
	bus := node.NewBus()
	if err := bus.Subscribe(node.Topic{Name: computedTopic, Type: msgs.TypeActionChunk}, func(b []byte) {
		select {
		case s.computed <- b:
		default: // more chunks than observations: compute finds the channel not empty
		}
	}); err != nil {
		return nil, err
	}
	if err := bus.Subscribe(node.Topic{Name: actionTopic, Type: msgs.TypeStampedAction}, s.onAction); err != nil {
		return nil, err
	}
	n, err := node.New(node.Config{Params: s.nodeParams(), Logger: o.Logger, Now: s.clock.Now, Tick: make(chan time.Time)}, o.Backend, bus)
	if err != nil {
		return nil, err
	}
	s.node = n
	ep := executor.DefaultParams()
	ep.ControlPeriod = o.ControlPeriod
	ep.Aggregation = o.Aggregation
	ep.ActionDim = o.Backend.Dims().ActionDim
	ep.Topics = executor.Topics{Chunks: chunksTopic, Action: actionTopic, Diagnostics: ep.Topics.Diagnostics}
	if s.exec, err = executor.New(executor.Config{Params: ep, Logger: o.Logger, Clock: s.clock}, bus); err != nil {
		return nil, err
	}
	p := s.nodeParams()
	for _, t := range []struct {
		pub *node.Publisher
		top node.Topic
	}{
		{&s.kvPub, node.Topic{Name: p.Topics.KVCache, Type: msgs.TypeVideoKVCache, QoS: p.QoS.KVCache}},
		{&s.ctxPub, node.Topic{Name: p.Topics.Context, Type: msgs.TypeTextContext, QoS: p.QoS.Context}},
		{&s.chunkPub, node.Topic{Name: chunksTopic, Type: msgs.TypeActionChunk, QoS: p.QoS.Actions}},
	} {
		if *t.pub, err = bus.Advertise(t.top); err != nil {
			return nil, err
		}
	}

	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(runCtx) }()
	stop := func() error {
		cancel()
		return <-done
	}
	mr, err := s.loop(ctx)
	if serr := stop(); err == nil && serr != nil {
		err = fmt.Errorf("node: %w", serr)
	}
	if err != nil {
		return nil, err
	}
	return mr, nil
}

// advance moves the virtual clock to t (never back).
func (s *sim) advance(t time.Time) {
	if d := t.Sub(s.clock.Now()); d > 0 {
		s.clock.Advance(d)
	}
}

// loop runs the instants; see the package comment for the model.
func (s *sim) loop(ctx context.Context) (*ModeResult, error) {
	o := s.o
	dt := o.ControlPeriod
	lat := time.Duration(math.Round(o.Latency * float64(dt)))
	var dr *drift
	if o.Drift {
		dr = newDrift(o.Pairs[0], o.DriftSeed)
	}
	for s.node.State() != node.StateActive {
		if st := s.node.State(); st == node.StateSelfTestFailed || st == node.StateStopped {
			return nil, fmt.Errorf("the node did not become active (state %s)", st)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	mr := &ModeResult{Mode: s.mode}
	var (
		pending   []byte // the chunk in flight
		pendingAt time.Time
		pendingK  int
		taken     int // observations the node took
	)
	deliver := func(t time.Time) error {
		if pending == nil || pendingAt.After(t) {
			return nil
		}
		s.advance(pendingAt)
		var m msgs.ActionChunk
		if err := m.UnmarshalCDR(pending); err != nil {
			return fmt.Errorf("the node's chunk of instant %d does not decode: %w", pendingK, err)
		}
		before := s.exec.Stats()
		if err := s.chunkPub.Publish(pending); err != nil {
			return fmt.Errorf("deliver the chunk of instant %d: %w", pendingK, err)
		}
		if after := s.exec.Stats(); after.Accepted != before.Accepted+1 {
			return fmt.Errorf("the executor refused the chunk of instant %d (seq %d) delivered at %v: %v",
				pendingK, m.Seq, pendingAt.Sub(o.Start), after.Dropped)
		}
		mr.Chunks = append(mr.Chunks, Chunk{K: pendingK, Delivered: pendingAt, Msg: m})
		pending = nil
		return nil
	}
	for k := range o.Periods {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t := o.Start.Add(time.Duration(k) * dt)
		if err := deliver(t); err != nil {
			return nil, err
		}
		s.advance(t)
		if pending == nil {
			obs := &o.Pairs[taken%len(o.Pairs)]
			taken++
			if dr != nil {
				obs = dr.at(k)
			}
			b, err := s.compute(ctx, obs, t.Add(-stampOffset(k, o.StampJitter, dt)), uint64(k))
			if err != nil {
				return nil, fmt.Errorf("instant %d: %w", k, err)
			}
			pending, pendingAt, pendingK = b, t.Add(lat), k
			if err := deliver(t); err != nil {
				return nil, err
			}
		}
		s.mu.Lock()
		s.k = k
		s.mu.Unlock()
		s.exec.Step(t)
	}
	s.mu.Lock()
	mr.Executed, s.executed = s.executed, nil
	bad := s.badOut
	s.mu.Unlock()
	if bad != nil {
		return nil, bad
	}
	mr.Seams = s.exec.SeamJumps()
	mr.Stats = s.exec.Stats()
	for _, c := range mr.Chunks {
		if c.Msg.RTCMode != expert.RTCOff.String() {
			mr.Tied++
		}
	}
	st := s.node.Stats()
	for _, v := range st.RTCResets {
		mr.Resets += v
	}
	if err := s.frozen(mr); err != nil {
		return nil, err
	}
	return mr, nil
}

// compute feeds one observation to the node and waits (in real time) for
// its chunk.
func (s *sim) compute(ctx context.Context, obs *Pair, t time.Time, seq uint64) ([]byte, error) {
	if n := len(s.computed); n > 0 {
		return nil, fmt.Errorf("the node published %d chunk(s) no observation was waiting for", n)
	}
	c, kv := obs.messages(t, seq)
	before := s.node.Stats()
	for _, in := range []struct {
		pub node.Publisher
		m   interface{ MarshalCDR() ([]byte, error) }
	}{{s.ctxPub, &c}, {s.kvPub, &kv}} {
		b, err := in.m.MarshalCDR()
		if err != nil {
			return nil, fmt.Errorf("encode the observation: %w", err)
		}
		if err := in.pub.Publish(b); err != nil {
			return nil, fmt.Errorf("publish the observation: %w", err)
		}
	}
	if st := s.node.Stats(); st.Paired != before.Paired+1 {
		return nil, fmt.Errorf("the node did not pair the observation (rejected %v)", st.Rejected)
	}
	deadline := time.NewTimer(s.o.ChunkTimeout)
	defer deadline.Stop()
	poll := time.NewTicker(2 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case b := <-s.computed:
			return b, nil
		case <-poll.C:
			if st := s.node.Stats(); st.Failed != before.Failed || st.RejectedPairs != before.RejectedPairs {
				return nil, fmt.Errorf("the node published no chunk: %d failed, %d rejected (%v)",
					st.Failed-before.Failed, st.RejectedPairs-before.RejectedPairs, st.Rejected)
			}
		case <-deadline.C:
			return nil, fmt.Errorf("no chunk within %v", s.o.ChunkTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (s *sim) onAction(b []byte) {
	var a msgs.StampedAction
	err := a.UnmarshalCDR(b)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.badOut == nil {
			s.badOut = fmt.Errorf("instant %d: the executor's action does not decode: %w", s.k, err)
		}
		return
	}
	s.executed = append(s.executed, Executed{K: s.k, Values: a.Values, ChunkSeq: a.ChunkSeq, Row: a.Row, Held: a.Held})
}

// stampOffset is how far before T_k observation k is stamped: u_k *
// jitter * dt, u_k in [0, 1) a hash of k (SplitMix64).
func stampOffset(k int, jitter float64, dt time.Duration) time.Duration {
	if jitter == 0 {
		return 0
	}
	z := uint64(k) + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	z ^= z >> 31
	u := float64(z>>11) / (1 << 53)
	return time.Duration(u * jitter * float64(dt))
}

// frozen computes the frozen-row error of every chunk after the first
// and checks that a tied chunk's rtc_ fields say what the simulation
// expects. A tied chunk's s counts from the previous chunk's place on the
// control grid, as the node counts it: its stamp when it was untied, its
// predecessor's place + its s*dt when tied. An untied chunk's s (for the
// frozen rows of rtc off) is the stamps' difference.
func (s *sim) frozen(mr *ModeResult) error {
	mr.FrozenMax = math.NaN()
	dt := s.o.ControlPeriod
	periods := func(d time.Duration) int { return int(math.Round(float64(d) / float64(dt))) }
	var grid time.Time
	for j := range mr.Chunks {
		cur := &mr.Chunks[j].Msg
		stamp := stampTime(cur.Header.Stamp)
		tied := cur.RTCMode != expert.RTCOff.String()
		if j == 0 {
			grid = stamp
			continue
		}
		prev := &mr.Chunks[j-1].Msg
		shift := periods(stamp.Sub(stampTime(prev.Header.Stamp)))
		if tied {
			shift = periods(stamp.Sub(grid))
			if cur.RTCMode != s.mode.String() || cur.RTCPrevSeq != prev.Seq || int(cur.RTCShift) != shift || int(cur.RTCDelay) != s.o.Delay {
				return fmt.Errorf("chunk %d records rtc_mode %s, prev_seq %d, shift %d, delay %d; want %v, %d, %d, %d",
					cur.Seq, cur.RTCMode, cur.RTCPrevSeq, cur.RTCShift, cur.RTCDelay, s.mode, prev.Seq, shift, s.o.Delay)
			}
			grid = grid.Add(time.Duration(shift) * dt)
		} else {
			grid = stamp
		}
		for i := 0; i < s.o.Delay && shift+i < len(prev.Actions) && i < len(cur.Actions); i++ {
			y, a := prev.Actions[shift+i].Values, cur.Actions[i].Values
			for c := range min(len(y), len(a)) {
				e := math.Abs(float64(a[c]) - float64(y[c]))
				if math.IsNaN(mr.FrozenMax) || e > mr.FrozenMax {
					mr.FrozenMax = e
				}
			}
			mr.FrozenRows++
		}
	}
	return nil
}

func stampTime(t msgs.Time) time.Time { return time.Unix(int64(t.Sec), int64(t.Nanosec)) }
