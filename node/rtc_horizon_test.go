package node

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/internal/regfile"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
)

// rtcHorizonGolden is the NumPy transcription of the RTC paper's soft mask
// and LeRobot's RTCProcessor, written by golden/make_rtc_horizon_golden.py.
const rtcHorizonGolden = "../golden/testdata/rtc_horizon.npz"

// fieldBackend is a TEST FIXTURE, not a model: its velocity at step k is
// a + sigma_k*b, the same for any latents, so that the identity Jacobian
// of guided mode is exact and the node's guided chunk must equal LeRobot's
// autograd guidance on it.
type fieldBackend struct {
	dims   expert.Dims
	sigmas []float32
	a, b   []float32
	k      int
}

func (f *fieldBackend) Dims() expert.Dims                              { return f.dims }
func (f *fieldBackend) BindChunk(context.Context, *expert.Chunk) error { return nil }
func (f *fieldBackend) Close() error                                   { return nil }

func (f *fieldBackend) Step(_ context.Context, _ []float32, tau float32, pred []float32) error {
	if s := f.sigmas[f.k]; tau != s*1000 {
		return fmt.Errorf("step %d: timestep %v, want %v", f.k, tau, s*1000)
	}
	for i := range pred {
		pred[i] = f.a[i] + f.sigmas[f.k]*f.b[i]
	}
	f.k++
	return nil
}

// TestRTCHorizonGolden builds each case's weights and guide as the worker
// does (rtcState.build from a plan: previous chunk, s, d, H, schedule,
// beta), runs the guided loop and compares the weights and the chunk with
// the transcription of the sources: the ramp ends at min(H, T - s), also
// for H > T - s and at the defaults (H 24, exp) with 9 <= s <= 23, where
// the rule the node had before (ramp to H, cut at T - s) differs by up to
// 0.67 in weight (exp, any d).
func TestRTCHorizonGolden(t *testing.T) {
	raw, err := regfile.ReadFile(rtcHorizonGolden, "rtc horizon golden", 1<<24)
	if err != nil {
		t.Fatal(err)
	}
	head, err := golden.ParseArrays(t.Context(), rtcHorizonGolden, raw, "params", "beta", "sigmas", "shift")
	if err != nil {
		t.Fatal(err)
	}
	cases, err := head["params"].Rows(-1, 5)
	if err != nil {
		t.Fatal(err)
	}
	beta := head["beta"].Data
	sched := expert.Schedule{Shift: head["shift"].Data[0], Sigmas: head["sigmas"].Data}
	if want, _ := expert.NewSchedule(10, 5); fmt.Sprint(want.Sigmas) != fmt.Sprint(sched.Sigmas) {
		t.Fatalf("the golden's sigmas %v are not the node's %v", sched.Sigmas, want.Sigmas)
	}
	schedules := []expert.MaskSchedule{expert.MaskExp, expert.MaskLinear, expert.MaskOnes, expert.MaskZeros}
	longHorizon := 0
	for k, pr := range cases {
		T, s, H, d, si := int(pr[0]), int(pr[1]), int(pr[2]), int(pr[3]), int(pr[4])
		name := fmt.Sprintf("case %d (T %d s %d H %d d %d %v)", k, T, s, H, d, schedules[si])
		const dim = 7
		key := func(n string) string { return fmt.Sprintf("c%d_%s", k, n) }
		a, err := golden.ParseArrays(t.Context(), rtcHorizonGolden, raw, key("prev"), key("noise"), key("a"), key("b"), key("weights"), key("guided"))
		if err != nil {
			t.Fatal(err)
		}
		wantW, err := a[key("weights")].Rows(4, T)
		if err != nil {
			t.Fatal(err)
		}
		dims := tinyDims()
		dims.ActionTokens = T
		p := params.Default()
		r := newRTCState(p, dims)
		if H > T-s {
			longHorizon++
		}
		// The weights of every schedule, through the worker's build.
		for j, m := range schedules {
			r.plan = RTCPlan{Mode: expert.RTCGuided, Prev: a[key("prev")].Data, Shift: s, Delay: d, Horizon: H, Schedule: m, MaxGuidance: beta[k]}
			if _, err := r.build(a[key("noise")].Data); err != nil {
				t.Fatalf("%s: build: %v", name, err)
			}
			for i, w := range r.weights {
				if math.Abs(float64(w-wantW[j][i])) > 1e-6 {
					t.Errorf("%s %v: weights %v, want %v", name, m, r.weights, wantW[j])
					break
				}
			}
		}
		r.plan.Schedule = schedules[si]
		g, err := r.build(a[key("noise")].Data)
		if err != nil {
			t.Fatal(err)
		}
		x := append([]float32(nil), a[key("noise")].Data...)
		b := &fieldBackend{dims: dims, sigmas: sched.Sigmas, a: a[key("a")].Data, b: a[key("b")].Data}
		if err := expert.IntegrateGuided(t.Context(), b, sched, x, make([]float32, len(x)), nil, g, nil); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := a[key("guided")].Data
		if len(want) != T*dim {
			t.Fatalf("%s: the golden's chunk has %d values", name, len(want))
		}
		worst := 0.0
		for i := range x {
			worst = math.Max(worst, math.Abs(float64(x[i]-want[i]))/math.Max(1, math.Abs(float64(want[i]))))
		}
		if !(worst <= 2e-5) {
			t.Errorf("%s: guided chunk differs from the transcription by %.3g (relative)", name, worst)
		}
		t.Logf("%s: guided chunk within %.2g of the transcription", name, worst)
	}
	if longHorizon < 15 {
		t.Errorf("only %d cases have H > T - s", longHorizon)
	}
}

// TestRTCRefusesZeroBeta: beta 0 in guided mode is refused as a parameter
// and as a recorded plan (LeRobot requires max_guidance_weight > 0).
func TestRTCRefusesZeroBeta(t *testing.T) {
	p := testParams()
	p.RTC.MaxGuidance = 0
	if err := p.Validate(); err == nil || !containsAll(err.Error(), `"rtc.max_guidance" is 0`, "> 0") {
		t.Errorf("Validate with beta 0: %v", err)
	}
	d := tinyDims()
	r := newRTCState(params.Default(), d)
	r.plan = RTCPlan{Mode: expert.RTCGuided, Prev: make([]float32, d.LatentLen()), Shift: 3, Delay: 2, Horizon: 24}
	g, err := r.build(make([]float32, d.LatentLen()))
	if err == nil {
		err = g.Check(d)
	}
	if err == nil || !containsAll(err.Error(), "rtc max guidance 0", "> 0") {
		t.Errorf("a recorded guided plan with beta 0: %v", err)
	}
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// TestRTCTiesAcrossLongGap: when the next observation comes s control
// periods after the previous chunk's with H <= s < T (a pair lost or
// superseded at 2 Hz makes s 20 to 30), the executor is still playing the
// previous chunk's last rows when the new chunk arrives. The node used to
// reset RTC at s >= H (gap) and publish the chunk untied: its seam with
// the rows being executed was as large as with RTC off (7.6 on a real
// ROS 2, issue 16). Now it ties the chunk to the leftover T - s rows
// (the ramp ends there, as for any s) and resets only when nothing is
// left, s >= T.
func TestRTCTiesAcrossLongGap(t *testing.T) {
	c, err := golden.LoadTiny(t.Context(), golden.TinyCases()[0])
	if err != nil {
		t.Fatal(err)
	}
	seam := func(mode expert.RTCMode, s int) (msgs.ActionChunk, float64) {
		p := testParams()
		p.Steps = 10
		p.RTC.Mode = mode
		p.RTC.InferenceDelay = 2
		clock := newFakeClock()
		h := newHarness(t, p, tinyCPU(t, c), withClock(clock))
		h.waitState(StateActive)
		d := h.node.Dims()
		t0 := clock.Now()
		h.send(makeInputs(d, 0, t0))
		a := h.waitChunk()
		t1 := t0.Add(time.Duration(s) * p.ControlPeriod)
		clock.Set(t1)
		h.send(makeInputs(d, 1, t1))
		b := h.waitChunk()
		// The executor switches to b at its first row (no latency here):
		// the seam is b's row 0 against a's row s.
		var sum float64
		for j, v := range b.Actions[0].Values {
			e := float64(v - a.Actions[s].Values[j])
			sum += e * e
		}
		return b, math.Sqrt(sum)
	}
	for _, s := range []int{22, 24, 26, 30} {
		_, off := seam(expert.RTCOff, s)
		b, got := seam(expert.RTCGuided, s)
		t.Logf("s %d: seam %.3f guided (rtc_mode %s, shift %d), %.3f off", s, got, b.RTCMode, b.RTCShift, off)
		if b.RTCMode != "guided" || b.RTCShift != uint32(s) || b.RTCHorizon != 24 {
			t.Errorf("s %d: chunk rtc_mode %q shift %d horizon %d, want tied with shift %d", s, b.RTCMode, b.RTCShift, b.RTCHorizon, s)
		}
		if !(got < 0.1*off) {
			t.Errorf("s %d: seam %.3f, not below 10%% of off's %.3f", s, got, off)
		}
	}
	// Nothing left of the previous chunk: a reset, counted as gap.
	p := testParams()
	p.RTC.Mode = expert.RTCGuided
	st := newStats()
	r := newRTCState(p, tinyDims())
	t0 := time.Unix(1_700_000_000, 0)
	r.published(t0, 3, make([]float32, tinyDims().LatentLen()))
	if why, reset := r.choose(t0.Add(32*p.ControlPeriod), st); !reset || why != RTCResetGap {
		t.Errorf("s 32: reset %v %q, want gap", reset, why)
	}
	r.published(t0, 3, make([]float32, tinyDims().LatentLen()))
	if _, reset := r.choose(t0.Add(31*p.ControlPeriod), st); reset || r.plan.Shift != 31 {
		t.Errorf("s 31: reset %v, plan %+v; want tied with shift 31", reset, r.plan)
	}
}

// TestRTCAutoDelayFromInputAge: with rtc.inference_delay auto, d follows
// the inputs' age at publication, which includes the producer's transport,
// not the time from receipt: inputs that reach the node 300 ms after their
// stamp make d ceil(300 ms / 50 ms) = 6 (before: 0, the receipt-to-publish
// time on a test clock; on a loaded Humble machine d 1 against a takeover
// at row 7, issue 16).
func TestRTCAutoDelayFromInputAge(t *testing.T) {
	d := tinyDims()
	clock := newFakeClock()
	p := testParams()
	p.RTC.Mode = expert.RTCGuided
	h := newHarness(t, p, newTestBackend(d), withClock(clock))
	h.waitState(StateActive)
	t0 := clock.Now()
	var m msgs.ActionChunk
	for k := range 3 {
		stamp := t0.Add(time.Duration(k) * 10 * p.ControlPeriod)
		clock.Set(stamp.Add(300 * time.Millisecond))
		h.send(makeInputs(d, uint64(k), stamp))
		m = h.waitChunk()
	}
	if m.RTCMode != "guided" || m.RTCDelay != 6 || m.InferenceDelay != 6 {
		t.Errorf("rtc_mode %q rtc_delay %d inference_delay %d, want guided, 6, 6", m.RTCMode, m.RTCDelay, m.InferenceDelay)
	}
}
