package asyncsim

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/expert"
)

// TestCyclesStarvation feeds the fp16 expert's cycle at falling
// bandwidths to the closed-loop simulation: the executor is fed while the
// next chunk arrives before the previous one runs out (slack >= 0),
// starves once it does not, and a cycle longer than the chunk is not
// simulated at all.
func TestCyclesStarvation(t *testing.T) {
	pairs, be := setup(t)
	rows := be.Dims().ActionTokens
	var fed, starved, beyond int
	for _, gbs := range []float64{50, 36, 30, 26, 22, 16, 10} {
		b := DefaultBoard()
		b.Bandwidth = gbs * 1e9
		o := CycleOptions{Board: b, Model: FullModel(),
			Deployments: []Deployment{{VAE: FP16, WorldModel: W8, Expert: FP16, Steps: 10, Processes: 1}},
			Sim:         baseOptions(pairs, be)}
		o.Sim.Periods = 150
		got, err := RunCycles(t.Context(), o)
		if err != nil {
			t.Fatalf("%g GB/s: %v", gbs, err)
		}
		r := got[0]
		dt := 50 * time.Millisecond
		if want := float64(r.Cycle.Total) / float64(dt); r.Periods != want || r.Slack != float64(rows)-math.Ceil(want)-want {
			t.Errorf("%g GB/s: delay %v periods, slack %v; want %v and %v", gbs, r.Periods, r.Slack, want, float64(rows)-math.Ceil(want)-want)
		}
		switch {
		case r.Periods > float64(rows-1):
			beyond++
			if r.Result != nil || r.Starvations() != -1 || !math.IsNaN(r.SeamP95(expert.RTCOff)) {
				t.Errorf("%g GB/s: a cycle of %.2f periods was simulated; want no simulation beyond %d", gbs, r.Periods, rows-1)
			}
		case r.Slack < 0:
			starved++
			if r.Starvations() <= 0 {
				t.Errorf("%g GB/s: slack %.2f periods, %d starvations; want some", gbs, r.Slack, r.Starvations())
			}
		default:
			fed++
			if r.Starvations() != 0 {
				t.Errorf("%g GB/s: slack %.2f periods, %d starvations; want none", gbs, r.Slack, r.Starvations())
			}
		}
		if r.Result != nil {
			d := int(math.Ceil(r.Periods))
			if r.Result.Delay != d || r.Result.Horizon != max(24, d) {
				t.Errorf("%g GB/s: simulated with d %d, horizon %d; want %d and %d", gbs, r.Result.Delay, r.Result.Horizon, d, max(24, d))
			}
			for _, m := range r.Result.Modes {
				if s := m.Stats.Starvations; int(s) != r.Starvations() {
					t.Errorf("%g GB/s: rtc %v starved %d times, off %d; want the same timing in every mode", gbs, m.Mode, s, r.Starvations())
				}
			}
		}
	}
	if fed == 0 || starved == 0 || beyond == 0 {
		t.Errorf("fed %d, starved %d, beyond the chunk %d; want the sweep to cover all three", fed, starved, beyond)
	}
}

// TestCyclesGrid runs a small grid: more steps give a longer delay and
// fewer chunks, the split a shorter one, and deployments with the same
// latency and steps share one simulation.
func TestCyclesGrid(t *testing.T) {
	pairs, be := setup(t)
	o := CycleOptions{Board: DefaultBoard(), Model: FullModel(),
		Deployments: Grid(FP16, W4, []Precision{W8}, []int{4, 10}, []bool{false, true}, []int{1}),
		Sim:         baseOptions(pairs, be)}
	o.Sim.Periods = 120
	got, err := RunCycles(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("%d rows; want 4", len(got))
	}
	byKey := func(steps int, split bool) *CycleRow {
		for i := range got {
			if d := got[i].Cycle.Deployment; d.Steps == steps && d.Split == split {
				return &got[i]
			}
		}
		t.Fatalf("no row for %d steps, split %v", steps, split)
		return nil
	}
	for _, split := range []bool{false, true} {
		r4, r10 := byKey(4, split), byKey(10, split)
		if !(r10.Periods > r4.Periods) || !(len(r10.Result.Modes[0].Chunks) < len(r4.Result.Modes[0].Chunks)) {
			t.Errorf("split %v: 10 steps %.2f periods, %d chunks; 4 steps %.2f, %d; want longer and fewer",
				split, r10.Periods, len(r10.Result.Modes[0].Chunks), r4.Periods, len(r4.Result.Modes[0].Chunks))
		}
	}
	// The simulated node denoised with the deployment's steps.
	for _, r := range got {
		for _, m := range r.Result.Modes {
			for _, c := range m.Chunks {
				if int(c.Msg.Steps) != r.Cycle.Deployment.Steps {
					t.Fatalf("%v: rtc %v: chunk %d denoised in %d steps", r.Cycle.Deployment, m.Mode, c.Msg.Seq, c.Msg.Steps)
				}
			}
		}
	}
	if on, off := byKey(10, true), byKey(10, false); !(on.Periods < off.Periods) {
		t.Errorf("10 steps: split %.2f periods, not split %.2f; want the split shorter", on.Periods, off.Periods)
	}
	// w4 world model + w8 expert fits one process of 6 GB.
	for _, r := range got {
		if !r.Cycle.Fits {
			t.Errorf("%v: %v bytes; want within one 6 GB process", r.Cycle.Deployment, r.Cycle.ProcessBytes)
		}
	}

	// The same deployment twice: one simulation, the same result.
	d := Deployment{VAE: FP16, WorldModel: W8, Expert: W8, Steps: 6, Processes: 2}
	o.Deployments = []Deployment{d, d}
	twice, err := RunCycles(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if twice[0].Result != twice[1].Result {
		t.Error("one deployment listed twice was simulated twice")
	}
}

// TestCyclesRefuse checks RunCycles' errors.
func TestCyclesRefuse(t *testing.T) {
	pairs, be := setup(t)
	o := CycleOptions{Board: DefaultBoard(), Model: FullModel(), Sim: baseOptions(pairs, be)}
	if _, err := RunCycles(t.Context(), o); err == nil || !strings.Contains(err.Error(), "no deployments") {
		t.Errorf("no deployments: %v", err)
	}
	o.Deployments = []Deployment{{VAE: FP16, WorldModel: W8, Expert: FP16, Steps: 0, Processes: 1}}
	if _, err := RunCycles(t.Context(), o); err == nil || !strings.Contains(err.Error(), "0 steps") {
		t.Errorf("0 steps: %v", err)
	}
	o.Deployments[0].Steps = 10
	o.Sim.Backend = nil
	if _, err := RunCycles(t.Context(), o); err == nil || !strings.Contains(err.Error(), "no backend") {
		t.Errorf("no backend: %v", err)
	}
}

// TestMinBandwidth: just above the bandwidth found the executor is fed,
// just below it is not; a compute-bound deployment that is too slow has
// none.
func TestMinBandwidth(t *testing.T) {
	dt := 50 * time.Millisecond
	for _, d := range Grid(FP16, W8, []Precision{FP16, W8}, []int{4, 10, 20}, []bool{false, true}, []int{1, 2}) {
		bw, err := MinBandwidth(DefaultBoard(), FullModel(), d, 32, dt)
		if err != nil {
			t.Fatal(err)
		}
		if math.IsInf(bw, 1) {
			continue
		}
		for _, c := range []struct {
			f   float64
			fed bool
		}{{1.0001, true}, {0.9999, false}} {
			b := DefaultBoard()
			b.Bandwidth = bw * c.f
			e, err := b.Estimate(FullModel(), d)
			if err != nil {
				t.Fatal(err)
			}
			if s := slack(e.Total, dt, 32); (s >= 0) != c.fed {
				t.Errorf("%v: at %.4g x the minimum %.4g GB/s the slack is %.3f; want fed %v", d, c.f, bw/1e9, s, c.fed)
			}
		}
	}
	b := DefaultBoard()
	b.FP16Rate = 0.1e12 // 10 steps of 105 GFLOP: 10.5 s of compute alone
	d := Deployment{VAE: FP16, WorldModel: W8, Expert: FP16, Steps: 10, Processes: 1}
	if bw, err := MinBandwidth(b, FullModel(), d, 32, dt); err != nil || !math.IsInf(bw, 1) {
		t.Errorf("at 0.1 TFLOP/s: %v, %v; want +Inf", bw, err)
	}
	if _, err := MinBandwidth(b, FullModel(), d, 0, dt); err == nil {
		t.Error("0 rows: no error")
	}
	b.W8Rate = math.NaN()
	if _, err := MinBandwidth(b, FullModel(), d, 32, dt); err == nil || !strings.Contains(err.Error(), "w8 rate") {
		t.Errorf("a NaN rate: %v; want the board refused", err)
	}
}
