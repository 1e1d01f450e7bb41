package executor

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fastwam/actionexpert/msgs"
)

// PublishDiagnostics publishes one DiagnosticArray on the diagnostics
// topic (see Diagnostics); Run calls it every diagnostics period.
func (e *Executor) PublishDiagnostics() {
	arr := e.Diagnostics(e.clock.Now())
	buf, err := arr.MarshalCDR()
	if err == nil {
		err = e.diag.Publish(buf)
	}
	if err != nil {
		e.log.Warnf("diagnostics: %v", err)
	}
}

// Diagnostics builds the executor's report at time now and makes it the
// reference of the next one: one status, STALE once stopped, WARN when
// chunks were refused or instants starved since the previous report, OK
// otherwise, whose values hold the configuration, the counters, the drops
// by reason and the seam jump's p50/p95 (over the last 4096 seams) and
// maximum (since start).
func (e *Executor) Diagnostics(now time.Time) msgs.DiagnosticArray {
	e.mu.Lock()
	s := e.statsLocked()
	prev := e.reported
	e.reported = s
	jumps := slices.Clone(e.jumps)
	stopped, starving, hasLast, dim, refusal := e.stopped, e.starving, e.hasLast, e.dim, e.lastRefusal
	holding := e.holding
	current := e.current
	e.mu.Unlock()

	state := "executing"
	switch {
	case stopped:
		state = "stopped"
	case holding:
		state = "held"
	case !hasLast:
		state = "waiting"
	case starving:
		state = "starving"
	}
	level, message := msgs.LevelOK, ""
	newDrops := s.TotalDropped() - prev.TotalDropped()
	newStarve := s.Starvations - prev.Starvations
	switch {
	case stopped:
		level, message = msgs.LevelStale, "stopped"
	case holding:
		level, message = msgs.LevelWarn, fmt.Sprintf("held by %s (%s) until released", e.p.Topics.Hold, e.p.HoldMode)
	case newDrops > 0 || newStarve > 0:
		level = msgs.LevelWarn
		var parts []string
		if newDrops > 0 {
			parts = append(parts, fmt.Sprintf("%d chunks refused", newDrops))
		}
		if newStarve > 0 {
			parts = append(parts, fmt.Sprintf("%d starved instants (%s)", newStarve, e.p.OnStarvation))
		}
		message = strings.Join(parts, ", ") + " since the last report"
	case !hasLast:
		message = "waiting for chunks on " + e.p.Topics.Chunks
	default:
		message = fmt.Sprintf("executing, %d actions published", s.Out)
	}

	u := func(v uint64) string { return strconv.FormatUint(v, 10) }
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }
	cur := "none"
	if current != nil {
		cur = u(current.seq)
	}
	if refusal == "" {
		refusal = "none"
	}
	kv := []msgs.KeyValue{
		{Key: "state", Value: state},
		{Key: "build", Value: e.build},
		{Key: "control_period_s", Value: g(e.p.ControlPeriod.Seconds())},
		{Key: "aggregation", Value: string(e.p.Aggregation)},
		{Key: "aggregation_weight", Value: g(e.p.AggregationWeight)},
		{Key: "on_starvation", Value: string(e.p.OnStarvation)},
		{Key: "action_dim", Value: strconv.Itoa(dim)},
		{Key: "in." + e.p.Topics.Chunks, Value: u(s.In)},
		{Key: "accepted", Value: u(s.Accepted)},
		{Key: "chunks_held", Value: strconv.Itoa(s.ChunksHeld)},
		{Key: "current_chunk", Value: cur},
		{Key: "out", Value: u(s.Out)},
		{Key: "out.held", Value: u(s.Held)},
		{Key: "starvations", Value: u(s.Starvations)},
		{Key: "dropped", Value: u(s.TotalDropped())},
	}
	for _, k := range slices.Sorted(maps.Keys(s.Dropped)) {
		kv = append(kv, msgs.KeyValue{Key: "dropped." + string(k), Value: u(s.Dropped[k])})
	}
	kv = append(kv,
		msgs.KeyValue{Key: "last_refused", Value: refusal},
		msgs.KeyValue{Key: "seams", Value: u(s.Seams)},
		msgs.KeyValue{Key: "seams.gap", Value: u(s.SeamGaps)},
		msgs.KeyValue{Key: "output", Value: string(e.p.Output.Type)},
		msgs.KeyValue{Key: "hold", Value: strconv.FormatBool(holding)},
		msgs.KeyValue{Key: "hold.count", Value: u(s.Holds)},
		msgs.KeyValue{Key: "hold.instants", Value: u(s.HoldInstants)},
		msgs.KeyValue{Key: "hold.refused", Value: u(s.HoldRefused)},
	)
	if len(jumps) == 0 {
		kv = append(kv,
			msgs.KeyValue{Key: "seam_jump.p50", Value: "n/a"},
			msgs.KeyValue{Key: "seam_jump.p95", Value: "n/a"},
			msgs.KeyValue{Key: "seam_jump.max", Value: "n/a"})
	} else {
		slices.Sort(jumps)
		at := func(q float64) float64 { return jumps[int(q*float64(len(jumps)-1)+0.5)] }
		kv = append(kv,
			msgs.KeyValue{Key: "seam_jump.p50", Value: g(at(0.5))},
			msgs.KeyValue{Key: "seam_jump.p95", Value: g(at(0.95))},
			msgs.KeyValue{Key: "seam_jump.max", Value: g(s.MaxSeamJump)})
	}
	return msgs.DiagnosticArray{
		Header: msgs.Header{Stamp: msgs.Time{Sec: int32(now.Unix()), Nanosec: uint32(now.Nanosecond())}},
		Status: []msgs.DiagnosticStatus{{
			Level: level, Name: StatusName(e.name), Message: message, HardwareID: e.hardware, Values: kv,
		}},
	}
}
