package node

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
)

// guidedActions denoises in as the node must with guide g: a fresh
// fixture backend bound to the decoded chunk, the noise of seed, and
// expert.IntegrateGuided.
func guidedActions(t *testing.T, d expert.Dims, in inputs, steps int, shift float32, seed uint64, g *expert.Guide) []float32 {
	t.Helper()
	s, err := expert.NewSchedule(steps, shift)
	if err != nil {
		t.Fatal(err)
	}
	b := newTestBackend(d)
	if err := b.BindChunk(context.Background(), in.chunk(t, d)); err != nil {
		t.Fatal(err)
	}
	x := expert.Noise(seed, d.LatentLen())
	if err := expert.IntegrateGuided(context.Background(), b, s, x, make([]float32, len(x)), nil, g, nil); err != nil {
		t.Fatal(err)
	}
	return x
}

// TestChunkTiming checks dt and inference_delay on a virtual clock: the
// number of actions whose instant stamp + i*dt is before the publish time.
func TestChunkTiming(t *testing.T) {
	d := tinyDims()
	p := testParams()
	p.ControlPeriod = 40 * time.Millisecond
	clock := newFakeClock()
	h := newHarness(t, p, newTestBackend(d), withClock(clock))
	h.waitState(StateActive)
	base := clock.Now()
	for k, c := range []struct {
		age  time.Duration // publish time - stamp (the fixture takes no virtual time)
		want uint32
	}{
		{0, 0},                       // action 0 is for the publish instant itself: not past
		{time.Nanosecond, 1},         // action 0 is past
		{40 * time.Millisecond, 1},   // action 1 is for the publish instant
		{40*time.Millisecond + 1, 2}, // action 1 is past
		{119 * time.Millisecond, 3},
		{-5 * time.Millisecond, 0},          // a stamp ahead of the node's clock
		{time.Hour, uint32(d.ActionTokens)}, // clamped: the whole chunk is past
	} {
		stamp := base.Add(time.Duration(k+1) * time.Second)
		clock.Advance(stamp.Add(c.age).Sub(clock.Now()))
		h.send(makeInputs(d, uint64(k), stamp))
		m := h.waitChunk()
		if m.Dt != 0.04 {
			t.Errorf("age %v: dt %v, want 0.04", c.age, m.Dt)
		}
		if m.InferenceDelay != c.want {
			t.Errorf("age %v: inference_delay %d, want %d", c.age, m.InferenceDelay, c.want)
		}
	}
}

// TestRTCOffIsIndependent: with rtc.mode off every chunk is today's plain
// loop, bit for bit, and records rtc_mode "off" with zero RTC fields.
func TestRTCOffIsIndependent(t *testing.T) {
	d := tinyDims()
	p := testParams()
	p.NoiseSeed = 3
	h := newHarness(t, p, newTestBackend(d))
	h.waitState(StateActive)
	base := time.Unix(1_700_000_000, 0)
	for k := range 3 {
		in := makeInputs(d, uint64(k), base.Add(time.Duration(k)*50*time.Millisecond))
		h.send(in)
		m := h.waitChunk()
		sameFloats(t, "chunk", flatten(m), expectedActions(t, d, in, p.Steps, float32(p.Shift), p.NoiseSeed+uint64(k)))
		if m.RTCMode != "off" || m.RTCPrevSeq != 0 || m.RTCShift != 0 || m.RTCDelay != 0 || m.RTCHorizon != 0 ||
			m.RTCSchedule != "" || m.RTCMaxGuidance != 0 {
			t.Errorf("chunk %d: rtc fields %q %d %d %d %d %q %v, want off and zero", k, m.RTCMode, m.RTCPrevSeq,
				m.RTCShift, m.RTCDelay, m.RTCHorizon, m.RTCSchedule, m.RTCMaxGuidance)
		}
	}
	s := h.diag()
	if diagValue(t, s, "rtc.mode") != "off" || diagValue(t, s, "rtc.chunks") != "0" || diagValue(t, s, "rtc.resets") != "0" ||
		diagValue(t, s, "rtc.last_shift") != "n/a" {
		t.Errorf("diagnostics: %v", s.Values)
	}
}

// TestRTCTiedChunksMatchDirect: in replace and guided mode the second
// chunk is exactly expert.IntegrateGuided with the Guide the brief
// defines: target row i = the previous published row s+i with s =
// round((t - t0)/dt), the prefix weights of d, the horizon and the rows
// the previous chunk still has, and the chunk's own initial noise.
func TestRTCTiedChunksMatchDirect(t *testing.T) {
	d := tinyDims()
	for _, mode := range []expert.RTCMode{expert.RTCReplace, expert.RTCGuided} {
		t.Run(mode.String(), func(t *testing.T) {
			p := testParams()
			p.NoiseSeed = 20
			p.RTC = params.RTCParams{Mode: mode, InferenceDelay: 3, ExecutionHorizon: 10, MaxGuidance: 2.5, Schedule: expert.MaskLinear}
			// The previous chunk's actions are clipped: the target is what
			// was published.
			p.ClipMin, p.ClipMax = []float64{-1.5}, []float64{1.5}
			h := newHarness(t, p, newTestBackend(d))
			h.waitState(StateActive)
			t0 := time.Unix(1_700_000_000, 0)
			in0 := makeInputs(d, 4, t0)
			h.send(in0)
			m0 := h.waitChunk()
			if m0.RTCMode != "off" {
				t.Fatalf("first chunk: rtc_mode %q, want off (no previous chunk)", m0.RTCMode)
			}
			// 2.4 control periods later: s = 2, 30 rows of the previous
			// chunk remain.
			in1 := makeInputs(d, 5, t0.Add(120*time.Millisecond))
			h.send(in1)
			m1 := h.waitChunk()
			const s = 2
			a0 := flatten(m0)
			target := make([]float32, d.LatentLen())
			copy(target, a0[s*d.ActionDim:])
			w := make([]float32, d.ActionTokens)
			if err := expert.PrefixWeights(w, 3, 10, d.ActionTokens-s, expert.MaskLinear); err != nil {
				t.Fatal(err)
			}
			g := &expert.Guide{Mode: mode, Target: target, Weights: w, Noise: expert.Noise(25, d.LatentLen())}
			if mode == expert.RTCGuided {
				g.MaxGuidance = 2.5
			}
			want := guidedActions(t, d, in1, p.Steps, float32(p.Shift), 25, g)
			for i := range want {
				want[i] = min(max(want[i], -1.5), 1.5)
			}
			sameFloats(t, "tied chunk", flatten(m1), want)
			plain := expectedActions(t, d, in1, p.Steps, float32(p.Shift), 25)
			if expert.MaxAbsDiff(plain, want) < 1e-3 {
				t.Fatal("the guide does not change the chunk: the test would not see it missing")
			}
			wantBeta := float32(0)
			if mode == expert.RTCGuided {
				wantBeta = 2.5
			}
			if m1.RTCMode != mode.String() || m1.RTCPrevSeq != m0.Seq || m1.RTCShift != s || m1.RTCDelay != 3 ||
				m1.RTCHorizon != 10 || m1.RTCSchedule != "linear" || m1.RTCMaxGuidance != wantBeta {
				t.Errorf("rtc fields %q %d %d %d %d %q %v", m1.RTCMode, m1.RTCPrevSeq, m1.RTCShift, m1.RTCDelay,
					m1.RTCHorizon, m1.RTCSchedule, m1.RTCMaxGuidance)
			}
			st := h.diag()
			if diagValue(t, st, "rtc.chunks") != "1" || diagValue(t, st, "rtc.last_shift") != "2" ||
				diagValue(t, st, "rtc.last_delay") != "3" || diagValue(t, st, "rtc.mode") != mode.String() {
				t.Errorf("diagnostics: %v", st.Values)
			}
		})
	}
}

// TestRTCResets walks every reset rule through the node: no previous
// chunk, a gap of the chunk's length or more, a rejected pair and a failed chunk
// each publish the chunk untied and tie the next one to it.
func TestRTCResets(t *testing.T) {
	d := tinyDims()
	p := testParams()
	p.RTC = params.RTCParams{Mode: expert.RTCGuided, InferenceDelay: 1, ExecutionHorizon: 4, MaxGuidance: 5, Schedule: expert.MaskExp}
	b := newTestBackend(d)
	h := newHarness(t, p, b)
	h.waitState(StateActive)
	const dt = 50 * time.Millisecond
	stamp := time.Unix(1_700_000_000, 0)
	seq := uint64(0)
	next := func(after time.Duration) inputs {
		stamp = stamp.Add(after)
		seq++
		return makeInputs(d, seq, stamp)
	}
	expect := func(what string, mode string, prevSeq uint64, shift uint32) msgs.ActionChunk {
		t.Helper()
		m := h.waitChunk()
		if m.RTCMode != mode || m.RTCPrevSeq != prevSeq || m.RTCShift != shift {
			t.Errorf("%s: rtc_mode %q prev %d shift %d, want %q %d %d", what, m.RTCMode, m.RTCPrevSeq, m.RTCShift, mode, prevSeq, shift)
		}
		return m
	}
	h.send(next(0))
	c0 := expect("first chunk", "off", 0, 0)
	h.send(next(dt))
	expect("next control period", "guided", c0.Seq, 1)
	h.send(next(3 * dt))
	expect("3 periods later", "guided", c0.Seq+1, 3)
	h.send(next(4*dt - dt/2 + time.Millisecond)) // rounds to 4 = the horizon: still tied, to the leftover
	expect("the horizon later", "guided", c0.Seq+2, 4)
	// s counts from the previous chunk's grid instant (8 dt, its stamp
	// 7.5 dt + 1 ms on its predecessor's grid): 31.52 rounds to 32 =
	// action_tokens, nothing left.
	h.send(next(32 * dt))
	c3 := expect("a gap of the chunk's length", "off", 0, 0)
	h.send(next(dt))
	expect("after the gap", "guided", c3.Seq, 1)

	// A rejected pair (a NaN in the context) drops the state.
	bad := next(dt)
	bad.ctx.Context.Data[4*3+3] = 0xff // float32 3 becomes a NaN (0x7f... little-endian high byte 0xff)
	bad.ctx.Context.Data[4*3+2] = 0xff
	h.send(bad)
	waitFor(t, "the rejection", func() bool { return h.node.Stats().RejectedPairs == 1 })
	h.send(next(dt))
	c5 := expect("after a rejected pair", "off", 0, 0)
	h.send(next(dt))
	expect("tied again", "guided", c5.Seq, 1)

	// A failed chunk drops it too.
	b.mu.Lock()
	b.failNext = 1
	b.mu.Unlock()
	h.send(next(dt))
	waitFor(t, "the failure", func() bool { return h.node.Stats().Failed == 1 })
	h.send(next(dt))
	c7 := expect("after a failed chunk", "off", 0, 0)
	h.send(next(dt))
	expect("tied again", "guided", c7.Seq, 1)

	s := h.diag()
	for key, want := range map[string]string{
		"rtc.chunks": "6", "rtc.resets": "3", "rtc.resets.gap": "1", "rtc.resets.rejected": "1",
		"rtc.resets.failed": "1", "rtc.resets.time_backwards": "0", "rtc.last_shift": "1", "rtc.last_delay": "1",
		"rtc.execution_horizon": "4", "rtc.inference_delay": "1", "control_period": "0.05",
	} {
		if got := diagValue(t, s, key); got != want {
			t.Errorf("diagnostics %s = %s, want %s", key, got, want)
		}
	}
}

// TestRTCChoose covers the selection rules of the worker's state alone:
// s rounds to the nearest control period, time going backwards and a gap
// of the horizon reset, and the auto delay follows the receive-to-publish
// p95 (0 before any sample), clamped to the horizon.
func TestRTCChoose(t *testing.T) {
	d := tinyDims()
	p := testParams()
	p.RTC = params.RTCParams{Mode: expert.RTCReplace, InferenceDelay: params.AutoDelay, ExecutionHorizon: 8, Schedule: expert.MaskOnes}
	st := newStats()
	r := newRTCState(p, d)
	t0 := time.Unix(1_700_000_000, 0)
	if why, reset := r.choose(t0, st); reset || r.plan.Mode != expert.RTCOff {
		t.Fatalf("no previous chunk: plan %v, reset %q", r.plan.Mode, why)
	}
	prev := expert.Noise(1, d.LatentLen())
	for _, c := range []struct {
		after     time.Duration
		mode      expert.RTCMode
		shift     int
		reset     RTCReset
		r2p       []time.Duration // input-age samples before the chunk
		wantDelay int
	}{
		{after: 24 * time.Millisecond, mode: expert.RTCReplace, shift: 0, wantDelay: 0},
		{after: 26 * time.Millisecond, mode: expert.RTCReplace, shift: 1, r2p: []time.Duration{10 * time.Millisecond}, wantDelay: 1},
		{after: 370 * time.Millisecond, mode: expert.RTCReplace, shift: 7, r2p: []time.Duration{120 * time.Millisecond}, wantDelay: 3},
		{after: 1575 * time.Millisecond, mode: expert.RTCOff, reset: RTCResetGap}, // round(31.5) = 32 = action_tokens: nothing left
		{after: -30 * time.Millisecond, mode: expert.RTCOff, reset: RTCResetBackwards},
		{after: -20 * time.Millisecond, mode: expert.RTCReplace, shift: 0, r2p: make([]time.Duration, 300), wantDelay: 0}, // rounds to -0: the same instant
		{after: 10 * time.Millisecond, mode: expert.RTCReplace, shift: 0, r2p: []time.Duration{time.Hour}, wantDelay: 8},  // clamped to the horizon
	} {
		r.published(t0, 9, prev)
		st = newStats()
		for _, v := range c.r2p {
			st.published(latencies{age: v}, false, false, &RTCPlan{}) // the input age, not receive to publish
		}
		why, reset := r.choose(t0.Add(c.after), st)
		if c.reset != "" {
			if !reset || why != c.reset || r.plan.Mode != expert.RTCOff || r.has {
				t.Errorf("after %v: reset %v %q, plan %v, state kept %v; want reset %q", c.after, reset, why, r.plan.Mode, r.has, c.reset)
			}
			continue
		}
		if reset || r.plan.Mode != c.mode || r.plan.Shift != c.shift || r.plan.Delay != c.wantDelay || r.plan.PrevSeq != 9 {
			t.Errorf("after %v: reset %v, plan %+v; want mode %v shift %d delay %d", c.after, reset, r.plan, c.mode, c.shift, c.wantDelay)
			continue
		}
		x := expert.Noise(2, d.LatentLen())
		g, err := r.build(x)
		if err != nil {
			t.Fatal(err)
		}
		if g.Target[0] != prev[c.shift*d.ActionDim] || g.Noise[5] != x[5] {
			t.Errorf("after %v: target or noise not the previous row %d and the initial noise", c.after, c.shift)
		}
		avail := d.ActionTokens - c.shift
		for i, w := range g.Weights {
			if want := float32(0); i < 8 && i < avail {
				if w != 1 { // ones schedule
					t.Errorf("after %v: weight %d = %v, want 1", c.after, i, w)
				}
			} else if w != want {
				t.Errorf("after %v: weight %d = %v, want 0", c.after, i, w)
			}
		}
		for i := avail * d.ActionDim; i < len(g.Target); i++ {
			if g.Target[i] != 0 {
				t.Fatalf("after %v: target value %d past the previous chunk is %v, want 0", c.after, i, g.Target[i])
			}
		}
	}
	// A chunk whose actions overflowed is no predecessor.
	bad := expert.Noise(1, d.LatentLen())
	bad[3] = float32(math.Inf(1))
	r.published(t0, 10, bad)
	if r.has {
		t.Error("a non-finite chunk was kept as the predecessor")
	}
}

// TestRTCPlanHook: Config.RTCPlan's plan replaces the node's own (the
// replay's path), and a plan that does not fit fails the chunk with an
// error naming it, without counting a rejected input.
func TestRTCPlanHook(t *testing.T) {
	d := tinyDims()
	p := testParams()
	prev := expert.Noise(77, d.LatentLen())
	plan := RTCPlan{Mode: expert.RTCGuided, PrevSeq: 41, Prev: prev, Shift: 3, Delay: 2, Horizon: 6, Schedule: expert.MaskExp, MaxGuidance: 1}
	hook := func(kvSeq uint64, stamp time.Time) (RTCPlan, bool) {
		switch kvSeq {
		case 1:
			return plan, true
		case 2:
			bad := plan
			bad.Shift = d.ActionTokens
			return bad, true
		case 4:
			bad := plan
			bad.Prev = prev[:10]
			return bad, true
		case 5:
			bad := plan
			bad.Prev = append([]float32(nil), prev...)
			bad.Prev[3*d.ActionDim+1] = float32(math.NaN())
			return bad, true
		}
		return RTCPlan{}, false
	}
	h := newHarness(t, p, newTestBackend(d), func(c *Config) { c.RTCPlan = hook })
	h.waitState(StateActive)
	in := makeInputs(d, 1, time.Unix(1_700_000_000, 0))
	h.send(in)
	m := h.waitChunk()
	target := make([]float32, d.LatentLen())
	copy(target, prev[3*d.ActionDim:])
	w := make([]float32, d.ActionTokens)
	if err := expert.PrefixWeights(w, 2, 6, d.ActionTokens-3, expert.MaskExp); err != nil {
		t.Fatal(err)
	}
	want := guidedActions(t, d, in, p.Steps, float32(p.Shift), 1, &expert.Guide{Mode: expert.RTCGuided, Target: target, Weights: w, MaxGuidance: 1})
	sameFloats(t, "chunk of the plan", flatten(m), want)
	if m.RTCMode != "guided" || m.RTCPrevSeq != 41 || m.RTCShift != 3 || m.RTCDelay != 2 || m.RTCHorizon != 6 || m.RTCSchedule != "exp" || m.RTCMaxGuidance != 1 {
		t.Errorf("rtc fields %+v", m)
	}
	// Without a plan the node's own state decides (rtc.mode off here).
	h.send(makeInputs(d, 3, time.Unix(1_700_000_000, 500)))
	if m := h.waitChunk(); m.RTCMode != "off" {
		t.Errorf("chunk without a plan: rtc_mode %q, want off", m.RTCMode)
	}
	h.send(makeInputs(d, 2, time.Unix(1_700_000_001, 0)))
	waitFor(t, "the failed chunk", func() bool { return h.node.Stats().Failed == 1 })
	if h.log.count("rtc plan of kv_seq 2", "rtc shift 32: want 0 to 31") != 1 {
		t.Errorf("log lacks the plan's error:\n%s", h.log)
	}
	// One at a time: the worker's slot keeps the newest pair only.
	h.send(makeInputs(d, 4, time.Unix(1_700_000_001, 500)))
	waitFor(t, "the second failed chunk", func() bool { return h.node.Stats().Failed == 2 })
	h.send(makeInputs(d, 5, time.Unix(1_700_000_001, 600)))
	waitFor(t, "the third failed chunk", func() bool { return h.node.Stats().Failed == 3 })
	if s := h.node.Stats(); s.RejectedPairs != 0 || s.Out != 2 {
		t.Errorf("bad plans: %d rejected pairs (%v), %d published; want 0 and 2", s.RejectedPairs, s.Rejected, s.Out)
	}
	h.stop()
	// Only the first failure of a run is logged; the counts above cover
	// the others. Their errors are checked on the state directly.
	r := newRTCState(p, d)
	for _, c := range []struct {
		pl   RTCPlan
		want string
	}{
		{RTCPlan{Mode: expert.RTCGuided, Prev: prev[:10], Horizon: 6}, "has 10 action values, want 224"},
		{RTCPlan{Mode: expert.RTCGuided, Prev: prev, Horizon: 0}, "rtc horizon 0: want 1 to 32"},
		{RTCPlan{Mode: expert.RTCGuided, Prev: prev, Horizon: 33}, "rtc horizon 33: want 1 to 32"},
		{RTCPlan{Mode: expert.RTCGuided, Prev: prev, Horizon: 6, Delay: 7}, "rtc delay 7: want 0 to the horizon 6"},
		{RTCPlan{Mode: 9, Prev: prev, Horizon: 6}, "rtc mode RTCMode(9)"},
		{RTCPlan{Mode: expert.RTCGuided, Prev: prev, Horizon: 6, Schedule: 9}, "mask schedule"},
	} {
		r.plan = c.pl
		if _, err := r.build(expert.Noise(1, d.LatentLen())); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("plan %+v: %v, want an error containing %q", c.pl, err, c.want)
		}
	}
}

// TestRTCParameterErrors: every bad rtc or control_period value is an
// error naming the parameter.
func TestRTCParameterErrors(t *testing.T) {
	for _, c := range []struct {
		rules []string
		want  []string
	}{
		{[]string{"-p", "control_period:=0"}, []string{`"control_period"`, "[1e-6, 60]"}},
		{[]string{"-p", "control_period:=-0.05"}, []string{`"control_period"`}},
		{[]string{"-p", "control_period:=.nan"}, []string{`"control_period"`}},
		{[]string{"-p", "control_period:=fast"}, []string{`"control_period"`, "expected double"}},
		{[]string{"-p", "rtc.mode:=always"}, []string{`"rtc.mode"`, "off, replace or guided", `"always"`}},
		{[]string{"-p", "rtc.mode:=on"}, []string{`"rtc.mode"`, "got bool on", `stands for "off"`}},
		{[]string{"-p", "rtc.mode:=1"}, []string{`"rtc.mode"`, "expected string, got integer 1"}},
		{[]string{"-p", "rtc.inference_delay:=-1"}, []string{`"rtc.inference_delay"`, `"auto"`}},
		{[]string{"-p", "rtc.inference_delay:=soon"}, []string{`"rtc.inference_delay"`, `"soon"`}},
		{[]string{"-p", "rtc.inference_delay:=1.5"}, []string{`"rtc.inference_delay"`, `expected integer or "auto", got double 1.5`}},
		{[]string{"-p", "rtc.inference_delay:=25"}, []string{`"rtc.inference_delay" 25`, "rtc.execution_horizon = 24"}},
		{[]string{"-p", "rtc.execution_horizon:=0"}, []string{`"rtc.execution_horizon"`, "[1, 65536]"}},
		{[]string{"-p", "rtc.execution_horizon:=4", "-p", "rtc.inference_delay:=5"}, []string{`"rtc.inference_delay" 5`}},
		{[]string{"-p", "rtc.max_guidance:=-1"}, []string{`"rtc.max_guidance"`, "> 0"}},
		{[]string{"-p", "rtc.max_guidance:=0.0"}, []string{`"rtc.max_guidance"`, "must be a finite number > 0", "got 0"}},
		{[]string{"-p", "rtc.max_guidance:=.inf"}, []string{`"rtc.max_guidance"`}},
		{[]string{"-p", "rtc.schedule:=cosine"}, []string{`"rtc.schedule"`, "exp, linear, ones or zeros", `"cosine"`}},
	} {
		_, err := params.Load(ros(append([]string{"-p", "htp.context_binary:=/m.bin"}, c.rules...)...), fqn)
		if err == nil {
			t.Errorf("%v: no error", c.rules)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not contain %q", c.rules, err, w)
			}
		}
	}
	p, err := params.Load(ros("-p", "htp.context_binary:=/m.bin", "-p", "control_period:=0.1", "-p", "rtc.mode:=guided",
		"-p", "rtc.inference_delay:=4", "-p", "rtc.execution_horizon:=16", "-p", "rtc.max_guidance:=2",
		"-p", "rtc.schedule:=linear"), fqn)
	if err != nil {
		t.Fatal(err)
	}
	if want := (params.RTCParams{Mode: expert.RTCGuided, InferenceDelay: 4, ExecutionHorizon: 16, MaxGuidance: 2, Schedule: expert.MaskLinear}); p.RTC != want || p.ControlPeriod != 100*time.Millisecond {
		t.Errorf("parameters %+v %v, want %+v 100ms", p.RTC, p.ControlPeriod, want)
	}
	// An unquoted off, which YAML reads as false, is the mode off.
	if err := p.Set("rtc.mode", "off"); err != nil || p.RTC.Mode != expert.RTCOff {
		t.Errorf("rtc.mode:=off: %v, mode %v", err, p.RTC.Mode)
	}
	if err := p.Set("rtc.inference_delay", "auto"); err != nil || p.RTC.InferenceDelay != params.AutoDelay {
		t.Errorf("auto: %v, delay %d", err, p.RTC.InferenceDelay)
	}
	if err := p.Set("control_period", "0.3"); err != nil || p.ControlPeriod != 300*time.Millisecond {
		t.Errorf("0.3 s: %v, %v (rounded, not truncated, to nanoseconds)", err, p.ControlPeriod)
	}
	// The horizon is checked against the backend's action_tokens.
	q := testParams()
	q.RTC.ExecutionHorizon = 33
	if _, err := New(Config{Params: q}, newTestBackend(tinyDims()), NewBus()); err == nil ||
		!strings.Contains(err.Error(), `"rtc.execution_horizon" is 33; want 1 to 32`) {
		t.Errorf("horizon 33 of 32 action tokens: %v", err)
	}
}

// BenchmarkRTCPlan is the worker's per-chunk RTC work at the released
// contract (32 x 7 actions): the auto delay's p95 over a full latency
// window, the shift, the prefix weights and the target rows.
//
//	go test -run '^$' -bench RTCPlan -benchmem ./node/
func BenchmarkRTCPlan(b *testing.B) {
	d := expert.FullDims()
	p := testParams()
	p.RTC.Mode = expert.RTCGuided
	st := newStats()
	for i := range windowSize {
		st.published(latencies{r2p: time.Duration(i*37%windowSize) * time.Millisecond}, false, false, &RTCPlan{}) // unsorted
	}
	r := newRTCState(p, d)
	x := expert.Noise(1, d.LatentLen())
	t0 := time.Unix(1_700_000_000, 0)
	b.ReportAllocs()
	for i := range b.N {
		r.published(t0, uint64(i), x)
		if _, reset := r.choose(t0.Add(100*time.Millisecond), st); reset {
			b.Fatal("reset")
		}
		if _, err := r.build(x); err != nil {
			b.Fatal(err)
		}
	}
}

// TestRTCShiftCountsFromGrid: s counts from the previous chunk's place on
// the control grid (its predecessor's + s*dt), where the executor indexes
// it, not from its stamp: observations 1.4 periods apart (stamps off the
// grid) give s 1, 2, 1, 2, … and the grid stays within half a period of
// the stamps. Counted from the stamps, s would be 1 every time and the
// grid would drift 0.4 periods a chunk away from them (issue 16).
func TestRTCShiftCountsFromGrid(t *testing.T) {
	d := tinyDims()
	p := testParams()
	p.RTC = params.RTCParams{Mode: expert.RTCGuided, InferenceDelay: 1, ExecutionHorizon: 4, MaxGuidance: 5, Schedule: expert.MaskExp}
	h := newHarness(t, p, newTestBackend(d))
	h.waitState(StateActive)
	const dt = 50 * time.Millisecond
	start := time.Unix(1_700_000_000, 0)
	grid := start
	for k := range 8 {
		stamp := start.Add(time.Duration(k) * 14 * dt / 10)
		h.send(makeInputs(d, uint64(k+1), stamp))
		m := h.waitChunk()
		if k == 0 {
			continue
		}
		want := uint32(math.Round(float64(stamp.Sub(grid)) / float64(dt)))
		if m.RTCMode != "guided" || m.RTCShift != want {
			t.Errorf("observation %d at %v: rtc_mode %q shift %d, want guided %d (from the grid instant %v)", k, stamp.Sub(start), m.RTCMode, m.RTCShift, want, grid.Sub(start))
		}
		grid = grid.Add(time.Duration(want) * dt)
		if off := stamp.Sub(grid).Abs(); off > dt/2 {
			t.Fatalf("observation %d: grid %v off its stamp by %v", k, grid.Sub(start), off)
		}
	}
}

// TestRTCResetsOnControlPeriodChange: a chunk made after control_period
// changed (live) is not tied to one made before: the previous chunk's rows
// are for instants of the old period, so neither its shift nor its rows
// fit. With the period unchanged the same stamps tie (the control).
func TestRTCResetsOnControlPeriodChange(t *testing.T) {
	d := tinyDims()
	for _, change := range []bool{false, true} {
		p := testParams()
		p.RTC.Mode = expert.RTCReplace
		h := newHarness(t, p, newTestBackend(d))
		h.waitState(StateActive)
		stamp := time.Unix(1_700_000_000, 0)
		h.send(makeInputs(d, 1, stamp))
		first := h.waitChunk()
		q := p
		if change {
			q.ControlPeriod = 2 * p.ControlPeriod
		}
		q.Steps = p.Steps + 1 // a live change either way
		if err := h.node.UpdateLive(q); err != nil {
			t.Fatal(err)
		}
		h.send(makeInputs(d, 2, stamp.Add(2*p.ControlPeriod)))
		m := h.waitChunk()
		switch {
		case change && m.RTCMode != "off":
			t.Errorf("control_period changed: chunk tied (rtc_mode %s, prev seq %d, shift %d); want untied", m.RTCMode, m.RTCPrevSeq, m.RTCShift)
		case !change && (m.RTCMode != "replace" || m.RTCPrevSeq != first.Seq || m.RTCShift != 2):
			t.Errorf("control_period unchanged: rtc_mode %s prev %d shift %d; want replace %d 2", m.RTCMode, m.RTCPrevSeq, m.RTCShift, first.Seq)
		}
		h.stop()
	}
}

// TestRTCAutoDelayClampedToHorizon: with rtc.inference_delay auto, d is
// ceil(p95 of the input age / dt) up to rtc.execution_horizon: inputs
// 300 ms old (6 periods) with a horizon of 4 give d 4, the delayed rows
// within the horizon. (The node clamps twice, in ceilPeriods's limit and
// after it; this fails when both are gone.)
func TestRTCAutoDelayClampedToHorizon(t *testing.T) {
	d := tinyDims()
	clock := newFakeClock()
	p := testParams()
	p.RTC.Mode = expert.RTCGuided
	p.RTC.ExecutionHorizon = 4
	h := newHarness(t, p, newTestBackend(d), withClock(clock))
	h.waitState(StateActive)
	t0 := clock.Now()
	var m msgs.ActionChunk
	for k := range 2 {
		stamp := t0.Add(time.Duration(k) * 2 * p.ControlPeriod)
		clock.Set(stamp.Add(300 * time.Millisecond))
		h.send(makeInputs(d, uint64(k), stamp))
		waitFor(t, "the chunk published or failed", func() bool { s := h.node.Stats(); return s.Out+s.Failed == uint64(k+1) })
		if s := h.node.Stats(); s.Failed != 0 {
			t.Fatalf("chunk %d failed; log:\n%s", k, h.log)
		}
		m = h.waitChunk()
	}
	if m.RTCMode != "guided" || m.RTCDelay != 4 || m.RTCHorizon != 4 || m.InferenceDelay != 6 {
		t.Errorf("rtc_mode %q rtc_delay %d rtc_horizon %d inference_delay %d, want guided, 4, 4, 6", m.RTCMode, m.RTCDelay, m.RTCHorizon, m.InferenceDelay)
	}
}
