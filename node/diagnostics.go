package node

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
)

// DiagnosticName is the diagnostic status name of the node under its
// default name, StatusName(DefaultNodeName).
const DiagnosticName = params.DefaultNodeName + ": action expert"

// diagLoop publishes the diagnostics at every tick and expires inputs that
// waited too long for a partner.
func (n *Node) diagLoop(ctx context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
		}
		// The clock is read under mu: the receive path reads it before
		// taking mu, on the goroutine that also sets a simulated clock,
		// so no reading taken here can be older than one it has used.
		n.mu.Lock()
		now := n.now()
		n.observeClock(now)
		n.pairer.expire(now, n.dropped)
		n.mu.Unlock()
		n.publishDiagnostics(now)
	}
}

// publishDiagnostics publishes one DiagnosticArray.
func (n *Node) publishDiagnostics(now time.Time) {
	arr := n.diagnostics(now)
	buf, err := arr.MarshalCDR()
	if err == nil {
		err = n.diag.Publish(buf)
	}
	if err != nil {
		n.log.Warnf("diagnostics: %v", err)
	}
}

// diagnostics builds the node's DiagnosticArray as published at time now:
// one status whose level is ERROR when the self-test failed or the last
// chunk failed in the backend, STALE once stopped or when no input pair
// has arrived for diagnostics.stale_after while active (stale.go), WARN
// when inputs were rejected or lost since the previous report, OK
// otherwise, and whose
// values hold the counters, the latency percentiles, the input age, the
// backend state and the self-test result.
func (n *Node) diagnostics(now time.Time) msgs.DiagnosticArray {
	s := n.stats.snapshot()
	n.stateMu.Lock()
	state, st, backend := n.state, n.selfTest, n.backendState
	p := n.p // its live fields change under stateMu (applyLive)
	prev := n.lastReport
	n.lastReport = s
	n.stateMu.Unlock()
	n.mu.Lock()
	skew, skewQ, waiting, timeout := n.pairer.skew, n.pairer.skew.win.quantiles(), n.pairer.waiting(), n.pairer.timeout
	stale := n.stale.check(now, n.mono(), p.StaleAfter)
	n.mu.Unlock()

	level, message := msgs.LevelOK, ""
	newRejects := s.TotalRejected() - prev.TotalRejected()
	newLost := lost(s) - lost(prev)
	newStale := s.Stale - prev.Stale
	newRefused := s.TotalRefused() - prev.TotalRefused()
	switch {
	case state == StateSelfTestFailed:
		level, message = msgs.LevelError, "self-test "+st.String()
	case state == StateStopped:
		level, message = msgs.LevelStale, "stopped"
	case strings.HasPrefix(backend, "error"):
		level, message = msgs.LevelError, "backend "+backend
	case state != StateActive:
		message = string(state)
	default:
		var parts []string
		if newRejects > 0 {
			parts = append(parts, fmt.Sprintf("%d inputs rejected", newRejects))
		}
		if newLost > 0 {
			parts = append(parts, fmt.Sprintf("%d inputs unpaired", newLost))
		}
		if s.Dropped[DropPairTimeout] > prev.Dropped[DropPairTimeout] && skew.late > 0 {
			parts = append(parts, n.lateHint(skew, timeout))
		}
		if newStale > 0 {
			parts = append(parts, fmt.Sprintf("%d chunks stale", newStale))
		}
		if d := s.Failed - prev.Failed; d > 0 {
			parts = append(parts, fmt.Sprintf("%d chunks failed", d))
		}
		if newRefused > 0 {
			parts = append(parts, fmt.Sprintf("%d chunks refused by the action limits", newRefused))
		}
		warn := strings.Join(parts, ", ") + " since the last report"
		switch {
		case stale.stale:
			level, message = msgs.LevelStale, stale.message(p.StaleAfter)
			if len(parts) > 0 {
				message += "; " + warn
			}
		case len(parts) > 0:
			level, message = msgs.LevelWarn, warn
		case s.Out == 0:
			message = "active, waiting for inputs"
		default:
			message = fmt.Sprintf("active, %d chunks published", s.Out)
		}
	}

	kv := []msgs.KeyValue{
		{Key: "state", Value: string(state)},
		{Key: "backend", Value: p.Backend},
		{Key: "backend_state", Value: backend},
		{Key: "build", Value: n.build},
		{Key: "self_test", Value: st.String()},
		{Key: "steps", Value: strconv.Itoa(p.Steps)},
		{Key: "shift", Value: strconv.FormatFloat(p.Shift, 'g', -1, 64)},
		{Key: "sync_policy", Value: string(p.Sync.Policy)},
		{Key: "dry_run", Value: strconv.FormatBool(p.DryRun)},
		{Key: "in." + p.KVInputTopic(), Value: u(s.In[p.KVInputTopic()])},
		{Key: "in." + p.Topics.Context, Value: u(s.In[p.Topics.Context])},
		{Key: "paired", Value: u(s.Paired)},
		{Key: "out", Value: u(s.Out)},
		{Key: "out.stale_input", Value: u(s.Stale)},
		{Key: "out.clipped", Value: u(s.Clipped)},
		{Key: "failed", Value: u(s.Failed)},
		{Key: "dropped", Value: u(s.TotalDropped())},
		{Key: "time_jumps", Value: u(n.TimeJumps())},
	}
	for _, k := range slices.Sorted(maps.Keys(s.Dropped)) {
		kv = append(kv, msgs.KeyValue{Key: "dropped." + string(k), Value: u(s.Dropped[k])})
	}
	kv = append(kv, msgs.KeyValue{Key: "rejected", Value: u(s.TotalRejected())})
	for _, k := range slices.Sorted(maps.Keys(s.Rejected)) {
		kv = append(kv, msgs.KeyValue{Key: "rejected." + string(k), Value: u(s.Rejected[k])})
	}
	kv = appendQuantiles(kv, "denoise_ms", s.Denoise)
	kv = appendQuantiles(kv, "receive_to_publish_ms", s.ReceiveToPublish)
	age := "n/a"
	if s.HasInputAge {
		age = msf(s.LastInputAge)
	}
	kv = append(kv, msgs.KeyValue{Key: "input_age_ms.last", Value: age})
	kv = appendQuantiles(kv, "input_age_ms", s.InputAge)
	kv = appendQuantiles(kv, "input_paired_ms", s.InputPaired)
	kv = appendQuantiles(kv, "input_held_ms", s.InputHeld)
	kv = appendRTC(kv, p, s)
	kv = appendActions(kv, p, s)
	since := "n/a"
	if state == StateActive {
		since = msf(stale.elapsed)
	}
	kv = append(kv,
		msgs.KeyValue{Key: "waiting_for_partner", Value: strconv.Itoa(waiting)},
		msgs.KeyValue{Key: "no_input_pair_ms", Value: since},
		msgs.KeyValue{Key: "stale_after", Value: strconv.FormatFloat(p.StaleAfter.Seconds(), 'g', -1, 64)})
	kv = appendQuantiles(kv, "pair_skew_ms", skewQ)
	hint := "none"
	if skew.late > 0 {
		hint = n.lateHint(skew, timeout)
	}
	kv = append(kv,
		msgs.KeyValue{Key: "pair_skew.later." + p.KVInputTopic(), Value: u(skew.kvLater)},
		msgs.KeyValue{Key: "pair_skew.later." + p.Topics.Context, Value: u(skew.ctxLater)},
		msgs.KeyValue{Key: "pair_skew.late_partners", Value: u(skew.late)},
		msgs.KeyValue{Key: "pair_skew.hint", Value: hint})

	return msgs.DiagnosticArray{
		Header: msgs.Header{Stamp: msgs.Time{Sec: int32(now.Unix()), Nanosec: uint32(now.Nanosecond())}},
		Status: []msgs.DiagnosticStatus{{
			Level: level, Name: StatusName(n.name), Message: message, HardwareID: n.hardware, Values: kv,
		}},
	}
}

// appendActions reports the actions.* post-processing: its mode, the
// chunks refused by reason and the executable chunks clamped.
func appendActions(kv []msgs.KeyValue, p params.Params, s Snapshot) []msgs.KeyValue {
	a := p.Actions.Post
	if !a.Enabled() {
		return append(kv, msgs.KeyValue{Key: "actions", Value: "off"})
	}
	kv = append(kv,
		msgs.KeyValue{Key: "actions", Value: p.Actions.Topic},
		msgs.KeyValue{Key: "actions.norm_mode", Value: a.Norm.String()},
		msgs.KeyValue{Key: "actions.limits.mode", Value: a.Limits.Mode.String()},
		msgs.KeyValue{Key: "actions.refused", Value: u(s.TotalRefused())},
	)
	for _, k := range slices.Sorted(maps.Keys(s.Refused)) {
		kv = append(kv, msgs.KeyValue{Key: "actions.refused." + k, Value: u(s.Refused[k])})
	}
	return append(kv, msgs.KeyValue{Key: "actions.clamped", Value: u(s.RobotClamped)})
}

// lost counts the drops that mean a producer problem rather than load.
func lost(s Snapshot) uint64 {
	return s.Dropped[DropUnpaired] + s.Dropped[DropPairTimeout] + s.Dropped[DropOverflow]
}

func appendQuantiles(kv []msgs.KeyValue, name string, q Quantiles) []msgs.KeyValue {
	if q.N == 0 {
		return append(kv,
			msgs.KeyValue{Key: name + ".p50", Value: "n/a"},
			msgs.KeyValue{Key: name + ".p95", Value: "n/a"},
			msgs.KeyValue{Key: name + ".max", Value: "n/a"})
	}
	return append(kv,
		msgs.KeyValue{Key: name + ".p50", Value: msf(q.P50)},
		msgs.KeyValue{Key: name + ".p95", Value: msf(q.P95)},
		msgs.KeyValue{Key: name + ".max", Value: msf(q.Max)})
}

// appendRTC adds the real-time chunking state: the parameters, the chunks
// tied to their predecessor, the resets by reason and s and d of the last
// tied chunk. They are reported in every state of the node.
func appendRTC(kv []msgs.KeyValue, p params.Params, s Snapshot) []msgs.KeyValue {
	delay := "auto"
	if p.RTC.InferenceDelay != params.AutoDelay {
		delay = strconv.Itoa(p.RTC.InferenceDelay)
	}
	kv = append(kv,
		msgs.KeyValue{Key: "control_period", Value: strconv.FormatFloat(p.ControlPeriod.Seconds(), 'g', -1, 64)},
		msgs.KeyValue{Key: "rtc.mode", Value: p.RTC.Mode.String()},
		msgs.KeyValue{Key: "rtc.inference_delay", Value: delay},
		msgs.KeyValue{Key: "rtc.execution_horizon", Value: strconv.Itoa(p.RTC.ExecutionHorizon)},
		msgs.KeyValue{Key: "rtc.chunks", Value: u(s.RTCChunks)},
		msgs.KeyValue{Key: "rtc.resets", Value: u(s.TotalRTCResets())})
	for _, r := range rtcResets() {
		kv = append(kv, msgs.KeyValue{Key: "rtc.resets." + string(r), Value: u(s.RTCResets[r])})
	}
	last, lastD := "n/a", "n/a"
	if s.RTCHasLast {
		last, lastD = strconv.Itoa(s.RTCLastShift), strconv.Itoa(s.RTCLastDelay)
	}
	return append(kv, msgs.KeyValue{Key: "rtc.last_shift", Value: last}, msgs.KeyValue{Key: "rtc.last_delay", Value: lastD})
}

func u(v uint64) string { return strconv.FormatUint(v, 10) }

func msf(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds()*1000, 'f', 2, 64)
}

// lateHint says that partners arrive after sync.timeout, by how much, and
// what sync.timeout would take them: the measured skew with a quarter
// more, rounded up to 0.5 s.
func (n *Node) lateHint(s skewStats, timeout time.Duration) string {
	later, first := n.p.Topics.Context, n.p.KVInputTopic()
	if s.lateKV {
		later, first = first, later
	}
	want := time.Duration(float64(s.lateMax)*1.25/float64(500*time.Millisecond)+0.999999) * 500 * time.Millisecond
	return fmt.Sprintf("%d inputs reached the node after their partner had waited sync.timeout %v (%s up to %v after its %s, the transport's latency): pairs were dropped as pair_timeout; set sync.timeout above that, e.g. sync.timeout:=%g",
		s.late, timeout, later, s.lateMax.Round(time.Millisecond), first, want.Seconds())
}
