package node

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
)

// RTCPlan is how one chunk is tied to the previous published chunk by
// real-time chunking: the values a chunk's rtc_ fields record. The
// worker makes one per chunk from its own state; a replay hands it the
// recorded one through Config.RTCPlan.
type RTCPlan struct {
	Mode    expert.RTCMode // RTCOff: an independent chunk, the other fields unused
	PrevSeq uint64         // seq of the previous chunk
	// Prev holds the previous chunk's published actions, action_tokens
	// rows of action_dim values; the target row i is its row Shift+i.
	Prev        []float32
	Shift       int // s: actions of the previous chunk behind this observation
	Delay       int // d: leading rows weighted 1
	Horizon     int // rows weighted 0 from here on
	Schedule    expert.MaskSchedule
	MaxGuidance float32 // beta (guided mode)
}

// RTCReset is why the worker dropped the previous chunk it tied chunks to.
type RTCReset string

// The reasons of an RTC reset; the chunk at hand is published untied
// (rtc_mode "off") and becomes the next chunk's predecessor.
const (
	RTCResetBackwards RTCReset = "time_backwards" // the observation is older than the previous chunk's (s < 0)
	RTCResetGap       RTCReset = "gap"            // s >= action_tokens control periods since the previous chunk: nothing of it is left
	RTCResetRejected  RTCReset = "rejected"       // the worker rejected a pair's inputs
	RTCResetFailed    RTCReset = "failed"         // a chunk failed in the backend, encoding or publishing
	RTCResetTimeJump  RTCReset = "time_jump"      // a time jump backwards (the stamps or /clock) since the previous chunk: another timeline's
)

// rtcResets lists the reasons in the diagnostics' order.
func rtcResets() []RTCReset {
	return []RTCReset{RTCResetBackwards, RTCResetGap, RTCResetRejected, RTCResetFailed, RTCResetTimeJump}
}

// rtcState is the worker's real-time chunking state and buffers; only the
// worker goroutine touches it, and nothing in it allocates per chunk.
type rtcState struct {
	p   params.RTCParams
	dt  time.Duration
	dim int // action_dim

	has bool // prev holds the last published chunk
	// timeline is the pair.timeline of the last pair planned: a pair of
	// a later one is not tied to prev.
	timeline uint64
	// prevGrid is the instant of its row 0 on the control grid the
	// executor indexes it by (gridStamp): its header stamp when it was
	// untied, its predecessor's grid + s*dt when it was tied.
	prevGrid time.Time
	prevSeq  uint64
	prev     []float32 // its published (clipped) actions

	plan    RTCPlan   // of the chunk being made
	eps     []float32 // the chunk's initial noise (replace mode)
	target  []float32 // Y
	weights []float32 // W
	guide   expert.Guide
	lat     [windowSize]time.Duration // scratch for the receive-to-publish p95
}

func newRTCState(p params.Params, d expert.Dims) rtcState {
	return rtcState{
		p: p.RTC, dt: p.ControlPeriod, dim: d.ActionDim,
		prev: make([]float32, d.LatentLen()), eps: make([]float32, d.LatentLen()),
		target: make([]float32, d.LatentLen()), weights: make([]float32, d.ActionTokens),
	}
}

// checkRTC checks the rtc parameters against the backend's contract.
func checkRTC(p params.Params, d expert.Dims) error {
	if h := p.RTC.ExecutionHorizon; h < 1 || h > d.ActionTokens {
		return fmt.Errorf("node: parameter \"rtc.execution_horizon\" is %d; want 1 to %d (the backend's action_tokens)", h, d.ActionTokens)
	}
	return nil
}

// delay is the d of the next chunk: the parameter, or with auto
// ceil(p95 of the input ages at publication / dt), 0 before the first
// sample; at most the horizon.
func (r *rtcState) delay(s *stats) int {
	d := r.p.InferenceDelay
	if d == params.AutoDelay {
		p95, ok := s.inputAgeP95(&r.lat)
		d = 0
		if ok {
			d = ceilPeriods(p95, r.dt, r.p.ExecutionHorizon)
		}
	}
	return min(d, r.p.ExecutionHorizon)
}

// ceilPeriods is ceil(t / dt) clamped to [0, limit].
func ceilPeriods(t, dt time.Duration, limit int) int {
	if t <= 0 {
		return 0
	}
	q := t / dt
	if t%dt != 0 {
		q++
	}
	return int(min(q, time.Duration(limit)))
}

// choose makes r.plan for the observation stamped t from the worker's own
// state and reports the reset it made, if any.
func (r *rtcState) choose(t time.Time, s *stats) (RTCReset, bool) {
	r.plan = RTCPlan{}
	if r.p.Mode == expert.RTCOff || !r.has {
		return "", false
	}
	// s counts from the previous chunk's grid, not its stamp: the
	// executor indexes a tied chunk from its predecessor's grid + s*dt
	// (executor.onGrid), and counting from the stamps would let the
	// grid drift from the stamps by the rounding of every tie.
	shift := math.Round(float64(t.Sub(r.prevGrid)) / float64(r.dt))
	switch {
	case shift < 0:
		r.has = false
		return RTCResetBackwards, true
	case shift >= float64(len(r.weights)):
		// Nothing of the previous chunk is left to tie to. With H <= s < T
		// its last T - s rows are still being executed when this chunk
		// arrives, and the ramp ends with them (PrefixWeights): resetting
		// there, as the node did at s >= H, published an untied chunk
		// whose seam was as large as with RTC off (issue 16).
		r.has = false
		return RTCResetGap, true
	}
	r.plan = RTCPlan{
		Mode: r.p.Mode, PrevSeq: r.prevSeq, Prev: r.prev, Shift: int(shift), Delay: r.delay(s),
		Horizon: r.p.ExecutionHorizon, Schedule: r.p.Schedule,
	}
	if r.p.Mode == expert.RTCGuided {
		r.plan.MaxGuidance = float32(r.p.MaxGuidance)
	}
	return "", false
}

// build turns r.plan into the Guide of the chunk whose initial noise is
// x, or nil for an untied chunk. An error is a plan that does not fit the
// chunk (a replay's recorded plan; the worker's own always fit).
func (r *rtcState) build(x []float32) (*expert.Guide, error) {
	pl := &r.plan
	if pl.Mode == expert.RTCOff {
		return nil, nil
	}
	rows := len(r.weights)
	switch {
	case pl.Mode > expert.RTCGuided:
		return nil, fmt.Errorf("rtc mode %v: want off, replace or guided", pl.Mode)
	case len(pl.Prev) != len(r.target):
		return nil, fmt.Errorf("rtc previous chunk %d has %d action values, want %d", pl.PrevSeq, len(pl.Prev), len(r.target))
	case pl.Shift < 0 || pl.Shift >= rows:
		return nil, fmt.Errorf("rtc shift %d: want 0 to %d (action_tokens - 1)", pl.Shift, rows-1)
	case pl.Horizon < 1 || pl.Horizon > rows:
		return nil, fmt.Errorf("rtc horizon %d: want 1 to %d (action_tokens)", pl.Horizon, rows)
	case pl.Delay < 0 || pl.Delay > pl.Horizon:
		return nil, fmt.Errorf("rtc delay %d: want 0 to the horizon %d", pl.Delay, pl.Horizon)
	}
	avail := rows - pl.Shift
	if err := expert.PrefixWeights(r.weights, pl.Delay, pl.Horizon, avail, pl.Schedule); err != nil {
		return nil, err
	}
	n := copy(r.target, pl.Prev[pl.Shift*r.dim:])
	clear(r.target[n:]) // rows past the previous chunk: weight 0, never read
	r.guide = expert.Guide{Mode: pl.Mode, Target: r.target, Weights: r.weights, MaxGuidance: pl.MaxGuidance}
	if pl.Mode == expert.RTCReplace {
		copy(r.eps, x)
		r.guide.Noise = r.eps
	}
	return &r.guide, nil
}

// gridStamp is the instant of row 0 of the chunk of r.plan, observed at
// stamp, on the control grid: the previous chunk's grid + s*dt for a
// chunk tied to it (its row i is tied to the previous row s+i, so it is
// for that row's instant), else stamp. A consumer indexing a tied chunk
// by its own stamp meets the previous chunk's row s+i±1 at the seam
// whenever the stamps are not whole periods apart (issue 16). A plan
// whose grid lies more than half a period off stamp (a replay's recorded
// plan counted from the stamps) keeps stamp.
func (r *rtcState) gridStamp(stamp time.Time) time.Time {
	if r.plan.Mode == expert.RTCOff || !r.has || r.plan.PrevSeq != r.prevSeq {
		return stamp
	}
	g := r.prevGrid.Add(time.Duration(r.plan.Shift) * r.dt)
	if stamp.Sub(g).Abs() > r.dt/2 {
		return stamp
	}
	return g
}

// published keeps the chunk just published, whose row 0 is for grid on
// the control grid (gridStamp), as the next one's predecessor: a target
// must be finite, so a chunk whose actions overflowed (no clip bounds)
// is no predecessor.
func (r *rtcState) published(grid time.Time, seq uint64, actions []float32) {
	if r.p.Mode == expert.RTCOff || expert.FirstNonFinite(actions) >= 0 {
		r.has = false
		return
	}
	r.has, r.prevGrid, r.prevSeq = true, grid, seq
	copy(r.prev, actions)
}

// fill writes the plan into the chunk's rtc_ fields.
func (pl *RTCPlan) fill(m *msgs.ActionChunk) {
	m.RTCMode = pl.Mode.String()
	if pl.Mode == expert.RTCOff {
		m.RTCPrevSeq, m.RTCShift, m.RTCDelay, m.RTCHorizon, m.RTCSchedule, m.RTCMaxGuidance = 0, 0, 0, 0, "", 0
		return
	}
	m.RTCPrevSeq, m.RTCShift, m.RTCDelay, m.RTCHorizon = pl.PrevSeq, uint32(pl.Shift), uint32(pl.Delay), uint32(pl.Horizon)
	m.RTCSchedule, m.RTCMaxGuidance = pl.Schedule.String(), pl.MaxGuidance
}

// inputAgeP95 is the 95th percentile of the input-age (stamp to publish)
// window, computed in buf without allocating; false without samples.
//
// The age, not the receive-to-publish time: the rows the robot executes
// before a chunk takes over run from its observation's stamp, and on a
// loaded machine the inputs reach the node well after it (on Fast DDS
// here, age 269 ms at publication against 43 ms from receipt: d 1 where
// the executor took the chunk over at row 7, issue 16).
func (s *stats) inputAgeP95(buf *[windowSize]time.Duration) (time.Duration, bool) {
	s.mu.Lock()
	n := s.age.n
	copy(buf[:n], s.age.buf[:n])
	s.mu.Unlock()
	if n == 0 {
		return 0, false
	}
	v := buf[:n]
	slices.Sort(v)
	return v[int(0.95*float64(n-1)+0.5)], true
}

// rtcReset counts an RTC reset.
func (s *stats) rtcReset(r RTCReset) {
	s.mu.Lock()
	s.rtcResets[r]++
	s.mu.Unlock()
}

// rtcGuide makes the RTC plan of pair p (Config.RTCPlan's, else the
// worker's own, counting a reset it makes) and its Guide over the initial
// noise in n.x: nil for an untied chunk. The error of a plan that does not
// fit is not an input's: the chunk fails.
func (n *Node) rtcGuide(p *pair) (*expert.Guide, error) {
	if p.timeline != n.rtc.timeline {
		// A time jump since the last pair: the previous chunk is another
		// timeline's, for the ties and for the step check across the seam.
		n.rtc.timeline = p.timeline
		n.rtcDrop(RTCResetTimeJump)
		if n.post != nil {
			n.post.Reset()
		}
	}
	if n.rtcPlan != nil {
		if pl, ok := n.rtcPlan(p.kv.msg.Seq, p.kv.stamp); ok {
			n.rtc.plan = pl
			g, err := n.rtc.build(n.x)
			if err == nil {
				err = g.Check(n.dims)
			}
			if err != nil {
				n.rtc.plan = RTCPlan{}
				// %v: the Guide's errors are expert.InputErrors, but
				// the plan is not an input of the pair.
				return nil, fmt.Errorf("rtc plan of kv_seq %d: %v", p.kv.msg.Seq, err)
			}
			return g, nil
		}
	}
	if why, reset := n.rtc.choose(p.kv.stamp, n.stats); reset {
		n.stats.rtcReset(why)
	}
	return n.rtc.build(n.x)
}

// rtcDrop clears the previous-chunk state after a rejected or failed
// chunk, counting the reset when there was one.
func (n *Node) rtcDrop(why RTCReset) {
	if n.rtc.has {
		n.rtc.has = false
		n.stats.rtcReset(why)
	}
}
