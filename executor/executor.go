// Package executor is the chunk executor of the fastwam_action_expert
// package (the fastwam_executor node, in-process form): it subscribes to the
// action expert's ActionChunk messages and, on its own timer, publishes one
// StampedAction per control period.
//
// Timing follows the ActionChunk contract: row i of a chunk is the command
// for header.stamp + i*dt. At every control instant T the executor chooses
// the newest chunk (by stamp, then seq) that covers T, that is whose row
// i = round((T - stamp)/dt) lies in [0, rows). Where several chunks cover T
// their rows are combined as the aggregation parameter says (latest,
// average, weighted_average: LeRobot's async-inference choices). When none
// covers T (starvation) the executor holds the last action (held=true) or
// publishes nothing, and counts it.
//
// A chunk RTC tied to its predecessor (rtc_mode replace or guided) is
// indexed on that chunk's control grid: its stamp is taken as the
// predecessor's + rtc_shift*dt (within half a period of header.stamp),
// the instant the node tied its row 0 to (issue 16).
//
// The seam jump is the L2 distance, at the instant the newest covering
// chunk changes, between the outgoing chunk's row and the incoming chunk's
// row for that instant; a switch where the outgoing chunk no longer covers
// the instant (after a starvation) is counted as a gap and has no jump.
//
// Chunks are hostile input: one that does not decode, whose dt is not a
// positive number equal to control_period, whose stamp is invalid, whose
// rows are empty, of the wrong width or not finite, that lies wholly in the
// past or starts more than its own length in the future, or that repeats
// one held, is refused with its reason (counted in the
// diagnostics, logged) and never executed.
package executor

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
)

// DropReason says why a chunk was refused.
type DropReason string

// Reasons a chunk is refused or dropped.
const (
	DropDecode     DropReason = "decode"      // not a valid ActionChunk CDR message
	DropDtInvalid  DropReason = "dt_invalid"  // dt is not a positive finite number of seconds
	DropDtMismatch DropReason = "dt_mismatch" // dt differs from control_period
	DropStamp      DropReason = "stamp"       // header.stamp is not a valid time
	DropEmpty      DropReason = "empty"       // no rows
	DropWidth      DropReason = "width"       // a row's width is not action_dim
	DropNonFinite  DropReason = "non_finite"  // a NaN or infinite value
	DropStale      DropReason = "stale"       // every row's instant is already past
	DropFuture     DropReason = "future"      // the first row's instant is more than a chunk's length ahead
	DropDuplicate  DropReason = "duplicate"   // same stamp and seq as a chunk held
	DropEvicted    DropReason = "evicted"     // an accepted chunk pushed out by newer ones (maxChunks)
)

// DiagnosticName is the executor's diagnostic status name under its
// default name, StatusName("/fastwam_executor").
const DiagnosticName = DefaultNodeName + ": executor"

// StatusName is the diagnostic status name of the executor whose fully
// qualified name is fqn ("/arm_left/fastwam_executor: executor"); an empty
// fqn is the default name.
func StatusName(fqn string) string {
	if fqn == "" {
		return DiagnosticName
	}
	return fqn + ": executor"
}

// maxChunks bounds the chunks held at once; more than a few overlap only
// when chunks come much faster than they are consumed.
const maxChunks = 16

// maxSeamSamples bounds the seam jumps kept for the percentiles.
const maxSeamSamples = 4096

// dtTolerance is the relative difference between a chunk's dt and the
// control period still taken as equal (float64 seconds vs nanoseconds).
const dtTolerance = 1e-6

// Config is what New needs besides the transport.
type Config struct {
	Params Params
	Logger node.Logger // nil discards the log
	Clock  Clock       // nil: the wall clock
	Name   string      // the node's fully qualified name, for StatusName
}

// chunk is one accepted ActionChunk.
type chunk struct {
	// stamp is the instant of row 0 the executor indexes by: the
	// message's header.stamp, or for a chunk RTC tied to a recently seen
	// predecessor, that one's stamp + rtc_shift*dt (onGrid).
	stamp    time.Time
	msgStamp time.Time // header.stamp as received
	seq      uint64
	frameID  string
	rows     [][]float32
}

// gridRec is where a chunk seen lies on the control grid.
type gridRec struct {
	seq     uint64
	frameID string
	grid    time.Time // chunk.stamp
}

// onGrid puts c, tied by RTC to the chunk seq prev with shift s, on its
// predecessor's grid when that chunk was seen (accepted or not: the
// node counts the next chunk's s from this one's grid either way): the
// node tied c's row i to the predecessor's row s+i, so c's row i is for
// the predecessor's grid + (s+i)*dt. Indexed by its own stamp instead,
// off that grid by up to half a period whenever the observations' stamps
// are not whole periods apart, c's row at an instant is the predecessor's
// row s+i±1 there for the timer phases near a half period, and the seam
// compares neighbouring rows (issue 16: 8 of 15 seams 2.5-7.0 on the
// Humble build). A grid more than half a period (plus the stamps'
// rounding) off c's own stamp is not the node's (another producer, a
// restart): c keeps its stamp. Then it records c's grid. The caller holds
// mu.
func (e *Executor) onGrid(c *chunk, tied bool, prev uint64, s uint32) {
	if tied {
		for _, h := range e.grids {
			if h.seq != prev || h.frameID != c.frameID || h.grid.IsZero() {
				continue
			}
			g := h.grid.Add(time.Duration(s) * e.p.ControlPeriod)
			if c.stamp.Sub(g).Abs() <= e.p.ControlPeriod/2+time.Microsecond {
				c.stamp = g
			}
			break
		}
	}
	e.grids[e.gridNext] = gridRec{seq: c.seq, frameID: c.frameID, grid: c.stamp}
	e.gridNext = (e.gridNext + 1) % len(e.grids)
}

// row returns the row index of c for instant t (possibly out of range).
func (c *chunk) row(t time.Time, period time.Duration) int64 {
	return int64(math.Round(float64(t.Sub(c.stamp)) / float64(period)))
}

func (c *chunk) covers(t time.Time, period time.Duration) bool {
	i := c.row(t, period)
	return i >= 0 && i < int64(len(c.rows))
}

// newer orders chunks by stamp, then seq.
func (c *chunk) newer(o *chunk) bool {
	if !c.stamp.Equal(o.stamp) {
		return c.stamp.After(o.stamp)
	}
	return c.seq > o.seq
}

// Executor is one chunk executor. Create it with New, then call Run (or
// drive it with Step in a simulation).
type Executor struct {
	name, hardware, build string // the fully qualified name, the CPU and the binary's build, for the diagnostics
	p                     Params
	log                   node.Logger
	clock                 Clock

	outp *output // the control output (output.go)
	diag Publisher

	running sync.Mutex // held by Run
	stepMu  sync.Mutex // one Step at a time: it owns out and buf

	mu          sync.Mutex
	dim         int      // row width; 0 until the first chunk when action_dim is 0
	chunks      []*chunk // accepted, oldest first (by stamp, then seq)
	current     *chunk   // the newest covering chunk at the last executed instant
	last        msgs.StampedAction
	hasLast     bool
	starving    bool
	holding     bool // the hold input is true
	stopped     bool
	lastRefusal string
	st          Stats
	reported    Stats // at the previous diagnostics
	jumps       []float64
	jumpNext    int                // ring position once jumps is full
	grids       [maxChunks]gridRec // the last chunks seen, for onGrid
	gridNext    int

	// Step's buffers, reused: no allocation per control instant.
	out msgs.StampedAction
	agg []float64
	cov []*chunk // guarded by mu
}

// Publisher is the node.Publisher the executor publishes with.
type Publisher = node.Publisher

// Stats are the executor's counters.
type Stats struct {
	In          uint64 // chunks received
	Accepted    uint64
	Out         uint64 // actions published, held ones included
	Held        uint64 // held actions published
	Starvations uint64 // instants no chunk covered (after the first action)
	Seams       uint64 // changes of the newest covering chunk
	SeamGaps    uint64 // of which the outgoing chunk no longer covered the instant
	Dropped     map[DropReason]uint64
	MaxSeamJump float64 // since start

	Holds        uint64 // times the hold input became true
	HoldInstants uint64 // control instants spent held by it
	HoldRefused  uint64 // hold messages that did not decode
	ChunksHeld   int    // chunks held now
}

// TotalDropped sums the drops over reasons.
func (s Stats) TotalDropped() uint64 {
	var n uint64
	for _, v := range s.Dropped {
		n += v
	}
	return n
}

// New checks the parameters and creates the executor's publishers and its
// chunk subscription on t.
func New(cfg Config, t node.Transport) (*Executor, error) {
	p := cfg.Params
	name := cfg.Name
	if name == "" {
		name = DefaultNodeName
	}
	if err := p.ValidateAs(name); err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	if t == nil {
		return nil, errors.New("executor: no transport")
	}
	e := &Executor{p: p, log: cfg.Logger, clock: cfg.Clock, dim: p.ActionDim, name: cfg.Name, hardware: "cpu: " + node.CPUModel(), build: node.Build()}
	if e.log == nil {
		e.log = nopLogger{}
	}
	if e.clock == nil {
		e.clock = WallClock{}
	}
	e.st.Dropped = map[DropReason]uint64{}
	var err error
	if e.outp, err = newOutput(p, t); err != nil {
		return nil, err
	}
	if e.diag, err = t.Advertise(node.Topic{Name: p.Topics.Diagnostics, Type: msgs.TypeDiagnosticArray, QoS: params.DiagnosticsQoS()}); err != nil {
		return nil, fmt.Errorf("executor: advertise %s: %w", p.Topics.Diagnostics, err)
	}
	if err := t.Subscribe(node.Topic{Name: p.Topics.Chunks, Type: msgs.TypeActionChunk, QoS: p.QoS.Chunks}, e.onChunk); err != nil {
		return nil, fmt.Errorf("executor: subscribe %s: %w", p.Topics.Chunks, err)
	}
	if p.Topics.Hold != "" {
		// As a latched command would be sent: reliable, the last one kept.
		q := params.QoS{Reliability: params.ReliabilityReliable, Durability: params.DurabilityVolatile, History: params.HistoryKeepLast, Depth: 1}
		if err := t.Subscribe(node.Topic{Name: p.Topics.Hold, Type: msgs.TypeBool, QoS: q}, e.onHold); err != nil {
			return nil, fmt.Errorf("executor: subscribe %s: %w", p.Topics.Hold, err)
		}
	}
	return e, nil
}

type nopLogger struct{}

func (nopLogger) Debugf(string, ...any) {}
func (nopLogger) Infof(string, ...any)  {}
func (nopLogger) Warnf(string, ...any)  {}
func (nopLogger) Errorf(string, ...any) {}

// Run executes one action per control period and reports diagnostics
// every diagnostics period, on the executor's clock, until ctx is done;
// it then publishes a last (STALE) report and returns nil. It starts no
// goroutine. Run may be called once at a time.
func (e *Executor) Run(ctx context.Context) error {
	if !e.running.TryLock() {
		return errors.New("executor: Run is already running")
	}
	defer e.running.Unlock()
	e.mu.Lock()
	e.stopped = false
	e.mu.Unlock()
	ctl := e.clock.NewTicker(e.p.ControlPeriod)
	defer ctl.Stop()
	diag := e.clock.NewTicker(e.p.DiagnosticsPeriod)
	defer diag.Stop()
	e.log.Infof("executing %s every %v (dt must match), aggregation %s (w %g), on starvation %s, action_dim %d",
		e.p.Topics.Chunks, e.p.ControlPeriod, e.p.Aggregation, e.p.AggregationWeight, e.p.OnStarvation, e.p.ActionDim)
	for {
		select {
		case <-ctx.Done():
			e.mu.Lock()
			e.stopped = true
			e.mu.Unlock()
			e.PublishDiagnostics()
			s := e.Stats()
			e.log.Infof("stopped: %d chunks in, %d accepted, %d dropped, %d actions out (%d held), %d starvations, %d seams",
				s.In, s.Accepted, s.TotalDropped(), s.Out, s.Held, s.Starvations, s.Seams)
			return nil
		case t := <-ctl.C():
			e.Step(t)
		case <-diag.C():
			e.PublishDiagnostics()
		}
	}
}

// refuse counts and logs a refused chunk.
func (e *Executor) refuse(reason DropReason, seq uint64, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	e.mu.Lock()
	e.st.Dropped[reason]++
	e.lastRefusal = fmt.Sprintf("chunk %d: %s", seq, msg)
	e.mu.Unlock()
	e.log.Warnf("refused chunk %d (%s): %s", seq, reason, msg)
}

// onChunk checks one ActionChunk and keeps it for execution.
func (e *Executor) onChunk(data []byte) {
	e.mu.Lock()
	e.st.In++
	e.mu.Unlock()
	var m msgs.ActionChunk
	if err := m.UnmarshalCDR(data); err != nil {
		e.refuse(DropDecode, 0, "%v", err)
		return
	}
	if !(m.Dt > 0) || math.IsInf(m.Dt, 0) {
		e.refuse(DropDtInvalid, m.Seq, "dt %v is not a positive number of seconds (want control_period %v)", m.Dt, e.p.ControlPeriod.Seconds())
		return
	}
	if want := e.p.ControlPeriod.Seconds(); math.Abs(m.Dt-want) > dtTolerance*want {
		e.refuse(DropDtMismatch, m.Seq, "dt %v s differs from control_period %v s", m.Dt, want)
		return
	}
	if m.Header.Stamp.Nanosec >= 1e9 {
		e.refuse(DropStamp, m.Seq, "header.stamp nanosec %d is not below 1e9", m.Header.Stamp.Nanosec)
		return
	}
	if len(m.Actions) == 0 {
		e.refuse(DropEmpty, m.Seq, "no actions")
		return
	}
	c := &chunk{
		stamp:   time.Unix(int64(m.Header.Stamp.Sec), int64(m.Header.Stamp.Nanosec)),
		seq:     m.Seq,
		frameID: m.Header.FrameID,
		rows:    make([][]float32, len(m.Actions)),
	}
	c.msgStamp = c.stamp
	e.mu.Lock()
	dim := e.dim
	e.mu.Unlock()
	if dim == 0 {
		dim = len(m.Actions[0].Values)
	}
	for i, r := range m.Actions {
		if len(r.Values) != dim || dim == 0 {
			e.refuse(DropWidth, m.Seq, "row %d has %d values, want %d (action_dim)", i, len(r.Values), dim)
			return
		}
		for j, v := range r.Values {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				e.refuse(DropNonFinite, m.Seq, "row %d value %d is %v", i, j, v)
				return
			}
		}
		c.rows[i] = r.Values
	}
	e.mu.Lock()
	e.onGrid(c, m.RTCMode != "" && m.RTCMode != "off", m.RTCPrevSeq, m.RTCShift)
	e.mu.Unlock()
	now := e.clock.Now()
	if c.row(now, e.p.ControlPeriod) >= int64(len(c.rows)) {
		lastAt := c.stamp.Add(time.Duration(len(c.rows)-1) * e.p.ControlPeriod)
		e.refuse(DropStale, m.Seq, "its last action was for %s, %v before now", lastAt.UTC().Format(time.RFC3339Nano), now.Sub(lastAt))
		return
	}
	// A chunk far ahead (clocks out of step, or a hostile stamp) would be
	// held without ever running and outlive the real ones at eviction.
	if ahead := c.stamp.Sub(now); ahead > time.Duration(len(c.rows))*e.p.ControlPeriod {
		e.refuse(DropFuture, m.Seq, "its first action is for %s, %v after now, more than its %d rows of %v (clocks out of step?)",
			c.stamp.UTC().Format(time.RFC3339Nano), ahead, len(c.rows), e.p.ControlPeriod)
		return
	}

	e.mu.Lock()
	for _, h := range e.chunks {
		if h.seq == c.seq && h.msgStamp.Equal(c.msgStamp) {
			e.mu.Unlock()
			e.refuse(DropDuplicate, m.Seq, "a chunk with this seq and stamp is already held")
			return
		}
	}
	if e.dim == 0 {
		e.dim = dim
		defer e.log.Infof("action_dim %d, from chunk %d", dim, m.Seq)
	}
	i, _ := slices.BinarySearchFunc(e.chunks, c, func(a, b *chunk) int {
		switch {
		case b.newer(a):
			return -1
		case a.newer(b):
			return 1
		}
		return 0
	})
	e.chunks = slices.Insert(e.chunks, i, c)
	e.st.Accepted++
	if len(e.chunks) > maxChunks {
		old := e.chunks[0]
		e.chunks = slices.Delete(e.chunks, 0, 1)
		e.st.Dropped[DropEvicted]++
		e.lastRefusal = fmt.Sprintf("chunk %d: evicted, more than %d chunks held", old.seq, maxChunks)
	}
	e.mu.Unlock()
}

// Step executes the control instant t: it publishes the action for t (or
// nothing, on a starvation with on_starvation stop). Run calls it at every
// tick; a simulation may call it directly instead of Run.
func (e *Executor) Step(t time.Time) {
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	period := e.p.ControlPeriod

	e.mu.Lock()
	// Chunks whose every row is past t can no longer be executed.
	e.chunks = slices.DeleteFunc(e.chunks, func(c *chunk) bool { return c.row(t, period) >= int64(len(c.rows)) })
	covering := e.cov[:0]
	for _, c := range e.chunks {
		if c.covers(t, period) {
			covering = append(covering, c)
		}
	}
	e.cov = covering
	stamp := msgs.Time{Sec: int32(t.Unix()), Nanosec: uint32(t.Nanosecond())}
	if e.holding {
		// The hold input: nothing new is executed until it is released.
		if !e.hasLast {
			e.mu.Unlock()
			return
		}
		e.st.HoldInstants++
		e.current = nil // after the hold, the newest chunk starts afresh (no seam jump counted)
		if e.p.HoldMode == HoldStop {
			e.mu.Unlock()
			return
		}
		e.heldAction(stamp)
		e.mu.Unlock()
		e.publish(nil, 0)
		return
	}
	if len(covering) == 0 {
		if !e.hasLast {
			e.mu.Unlock()
			return // waiting for the first chunk
		}
		e.st.Starvations++
		if !e.starving {
			e.log.Warnf("starvation at %s: no chunk covers the instant (%s)", t.UTC().Format(time.RFC3339Nano), e.p.OnStarvation)
		}
		e.starving = true
		if e.p.OnStarvation == StarveStop {
			e.mu.Unlock()
			return
		}
		e.heldAction(stamp)
		e.mu.Unlock()
		e.publish(nil, 0)
		return
	}
	e.starving = false
	newest := covering[len(covering)-1]
	row := newest.rows[newest.row(t, period)]
	if prev := e.current; prev != nil && prev != newest {
		e.st.Seams++
		if prev.covers(t, period) {
			e.addJump(l2(prev.rows[prev.row(t, period)], row))
		} else {
			e.st.SeamGaps++
		}
	}
	e.current = newest

	e.out.Header.Stamp = stamp
	e.out.Header.FrameID = newest.frameID
	e.out.ChunkSeq = newest.seq
	e.out.Row = uint32(newest.row(t, period))
	e.out.Held = false
	e.out.Aggregated = 1
	switch {
	case e.p.Aggregation == AggregateLatest || len(covering) == 1:
		e.out.Values = append(e.out.Values[:0], row...)
	default:
		e.agg = e.agg[:0]
		first := covering[0].rows[covering[0].row(t, period)]
		for _, v := range first {
			e.agg = append(e.agg, float64(v))
		}
		w := e.p.AggregationWeight
		for k, c := range covering[1:] {
			r := c.rows[c.row(t, period)]
			for j, v := range r {
				if e.p.Aggregation == AggregateAverage {
					// Running mean over k+2 rows.
					e.agg[j] += (float64(v) - e.agg[j]) / float64(k+2)
				} else {
					e.agg[j] = e.agg[j]*(1-w) + float64(v)*w
				}
			}
		}
		e.out.Values = e.out.Values[:0]
		for _, v := range e.agg {
			e.out.Values = append(e.out.Values, float32(v))
		}
		e.out.Aggregated = uint32(len(covering))
	}
	rowIdx := int(newest.row(t, period))
	e.mu.Unlock()
	e.publish(newest, rowIdx)
}

// heldAction makes e.out the last action again, flagged held, for the
// instant stamp; the caller holds mu.
func (e *Executor) heldAction(stamp msgs.Time) {
	e.out.Header.Stamp = stamp
	e.out.Header.FrameID = e.last.Header.FrameID
	e.out.Values = append(e.out.Values[:0], e.last.Values...)
	e.out.ChunkSeq, e.out.Row, e.out.Aggregated = e.last.ChunkSeq, e.last.Row, e.last.Aggregated
	e.out.Held = true
}

// publish sends e.out through the control output: cur and row are the
// chunk and row it comes from, nil for a held action. The caller holds
// stepMu.
func (e *Executor) publish(cur *chunk, row int) {
	held := cur == nil
	sent, err := e.outp.emit(&e.out, cur, row)
	e.mu.Lock()
	defer e.mu.Unlock()
	if err != nil {
		e.log.Warnf("publish %s: %v", e.p.Topics.Action, err)
		return
	}
	// A joint_trajectory output publishes only when the chunk changes;
	// the action is executed (and held from) all the same.
	if sent {
		e.st.Out++
		if held {
			e.st.Held++
		}
	}
	e.last.Header = e.out.Header
	e.last.Values = append(e.last.Values[:0], e.out.Values...)
	e.last.ChunkSeq, e.last.Row, e.last.Aggregated, e.last.Held = e.out.ChunkSeq, e.out.Row, e.out.Aggregated, e.out.Held
	e.hasLast = true
}

// addJump records one seam jump; the caller holds mu.
func (e *Executor) addJump(d float64) {
	e.st.MaxSeamJump = max(e.st.MaxSeamJump, d)
	if len(e.jumps) < maxSeamSamples {
		e.jumps = append(e.jumps, d)
		return
	}
	e.jumps[e.jumpNext] = d
	e.jumpNext = (e.jumpNext + 1) % maxSeamSamples
}

// l2 is the Euclidean distance of two rows of one width.
func l2(a, b []float32) float64 {
	var s float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		s += d * d
	}
	return math.Sqrt(s)
}

// Stats returns a snapshot of the counters.
func (e *Executor) Stats() Stats {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.statsLocked()
}

func (e *Executor) statsLocked() Stats {
	s := e.st
	s.Dropped = make(map[DropReason]uint64, len(e.st.Dropped))
	for k, v := range e.st.Dropped {
		s.Dropped[k] = v
	}
	s.ChunksHeld = len(e.chunks)
	return s
}

// SeamJumps returns the seam jumps recorded, oldest first: every one, up
// to the last 4096.
func (e *Executor) SeamJumps() []float64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.jumps) < maxSeamSamples {
		return slices.Clone(e.jumps)
	}
	return append(slices.Clone(e.jumps[e.jumpNext:]), e.jumps[:e.jumpNext]...)
}
