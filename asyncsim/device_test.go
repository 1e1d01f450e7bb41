package asyncsim

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/graphs"
)

// TestCountsAgainstSpecs checks the counts the model derives from the
// configurations against the figures the specifications state (counted
// there by instantiating the upstream modules): action-step.md §1.3 and
// §9, world-model.md §4.10, §5.6 and §6.2.
func TestCountsAgainstSpecs(t *testing.T) {
	ep := CountExpertParams(cpu.FullConfig())
	if ep.Total != 1_020_886_023 {
		t.Errorf("expert parameters %d; want 1,020,886,023 (action-step.md §1.3)", ep.Total)
	}
	if ep.CrossKV != 189_020_160 || ep.Context != 189_020_160+5_244_928 {
		t.Errorf("expert per-chunk parameters: cross k/v/norm_k %d, with the text MLP %d; want 189,020,160 and 194,265,088 (§1.3)", ep.CrossKV, ep.Context)
	}
	// §1.3: read every step, 818,995,200 in the layers plus the
	// 7.6 M time MLP (and the action encoder and head).
	if want := int64(818_995_200 + 1_312_768 + 6_297_600 + 8_192 + 7_175); ep.Step() != want {
		t.Errorf("expert per-step parameters %d; want %d", ep.Step(), want)
	}
	ef := CountExpertFLOPs(cpu.FullConfig())
	if ef.Step != 55_416_324_096 || ef.Context != 50_048_532_480 {
		t.Errorf("expert FLOPs: step %.0f, context %.0f; want 55,416,324,096 and 50,048,532,480 (§9)", ef.Step, ef.Context)
	}
	if frac := ef.Context / (ef.Step + ef.Context); math.Abs(frac-0.4746) > 5e-4 {
		t.Errorf("action_context's share of the step's FLOPs %.4f; want 0.4746 (issue 28: about 47 %%)", frac)
	}
	if frac := float64(ep.CrossKV) / float64(ep.Total); math.Abs(frac-0.1852) > 5e-4 {
		t.Errorf("cross K/V's share of the expert's weights %.4f; want 0.1852 (issue 28: 18.5 %%)", frac)
	}

	vp := CountVideoParams(FullVideoDiT())
	if vp.Total != 4_999_787_712 {
		t.Errorf("video DiT parameters %d; want 4,999,787,712 (world-model.md §6.2)", vp.Total)
	}
	// §5.6: layer 29 keeps 18,902,016 of its 163,656,704; the head's
	// 596,160 are dropped; §5.2: the time MLP and projection (66.9 M)
	// fold into constants.
	if want := int64(4_999_787_712 - (163_656_704 - 18_902_016) - 596_160 - 10_229_760 - 56_641_536); vp.Prefill != want {
		t.Errorf("video prefill parameters %d; want %d", vp.Prefill, want)
	}
	if f := VideoPrefillFLOPs(FullVideoDiT()); math.Abs(f-981e9) > 1e9 {
		t.Errorf("prefill FLOPs %.4g; want about 981 GFLOP (world-model.md §5.6)", f)
	}

	// The VAE: the rank-4 graph's count, which graphs.TestSizesAgreeWithTheExportModules checks
	// against the PyTorch module's buffers, at the figure docs/graphs.md
	// gives; the file's 149.6 M (all taps, time_conv) never reach the NPU.
	if got, want := VAEParams(FullVAE()), graphs.VAETensors(graphs.FullVAE()).Params(); got != want || got != 54_291_936 {
		t.Errorf("VAE parameters streamed %d; want %d, the rank-4 vae_encoder's (54,291,936, docs/graphs.md)", got, want)
	}
	if f := VAEFLOPs(FullVAE()); math.Abs(f-163.2e9) > 0.1e9 {
		t.Errorf("VAE FLOPs %.4g; want 163.2 GFLOP (world-model.md §4.10)", f)
	}
}

// TestEstimate checks the latency rule and what each choice changes.
func TestEstimate(t *testing.T) {
	b, m := DefaultBoard(), FullModel()
	est := func(d Deployment) Cycle {
		t.Helper()
		c, err := b.Estimate(m, d)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	base := Deployment{VAE: FP16, WorldModel: W8, Expert: FP16, Steps: 10, Split: false, Processes: 1}

	// Every stage: max(bytes/bandwidth, FLOPs/rate) + its graphs' overheads.
	c := est(base)
	var sum time.Duration
	for _, s := range c.Stages {
		rate := b.W8Rate
		if s.Precision == FP16 {
			rate = b.FP16Rate
		}
		want := max(float64(s.Weights+s.Acts)/b.Bandwidth, s.FLOPs/rate) + float64(s.Graphs)*b.GraphOverhead.Seconds()
		if got := s.Latency.Seconds(); math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: latency %v; want %.9f s", s.Name, s.Latency, want)
		}
		sum += s.Total()
	}
	if c.Total != sum || c.Handoff != 0 {
		t.Errorf("total %v, hand-off %v; want the stages' sum %v and no hand-off in one process", c.Total, c.Handoff, sum)
	}
	// The fp16 expert step streams 2.04 GB: bandwidth-bound on this board.
	if st := c.Stage(StageStep); st.ComputeBound || st.Weights != 2*1_020_886_023 || st.Runs != 10 {
		t.Errorf("fp16 step: compute bound %v, %d weight bytes, %d runs; want bandwidth bound, 2,041,772,046, 10", st.ComputeBound, st.Weights, st.Runs)
	}
	// The w8 prefill (4.79 GB) needs three contexts of 1.8 GB.
	if p := c.Stage(StagePrefill); p.Graphs != 3 {
		t.Errorf("w8 prefill: %d graphs; want 3 contexts of at most %d bytes for %d", p.Graphs, b.ContextLimit, p.Weights)
	}

	// More steps, a longer cycle, by whole steps.
	for _, e := range []Precision{FP16, W8, W4} {
		for _, split := range []bool{false, true} {
			var prev Cycle
			for i, n := range []int{1, 4, 6, 10, 20} {
				d := base
				d.Expert, d.Split, d.Steps = e, split, n
				c := est(d)
				if i > 0 {
					step := c.Stage(StageStep).Latency
					if c.Total <= prev.Total || c.Total-prev.Total != time.Duration(n-prev.Deployment.Steps)*step {
						t.Errorf("%v: %v, %d steps before: %v; want longer by whole steps of %v", d, c.Total, prev.Deployment.Steps, prev.Total, step)
					}
				}
				prev = c
			}
		}
	}

	// The split takes the per-chunk weights out of every step: by the
	// computed fraction, in every precision, and runs them once.
	ep := CountExpertParams(m.Expert)
	for _, e := range []Precision{FP16, W8, W4} {
		d := base
		d.Expert = e
		off := est(d)
		d.Split = true
		on := est(d)
		so, sn := off.Stage(StageStep), on.Stage(StageStep)
		if so.Params-sn.Params != ep.Context || sn.Weights != e.WeightBytes(ep.Total-ep.Context) {
			t.Errorf("%v: step parameters %d -> %d; want %d fewer", e, so.Params, sn.Params, ep.Context)
		}
		got := 1 - float64(sn.Weights)/float64(so.Weights)
		if want := float64(ep.Context) / float64(ep.Total); math.Abs(got-want) > 1e-6 {
			t.Errorf("%v: the split cuts the step's weight bytes by %.5f; want %.5f", e, got, want)
		}
		if ctx := on.Stage(StageContext); ctx == nil || ctx.Runs != 1 || ctx.Params != ep.Context || off.Stage(StageContext) != nil {
			t.Errorf("%v: action_context %+v; want once per chunk with %d parameters, and absent without the split", e, ctx, ep.Context)
		}
		if !(on.Total < off.Total) {
			t.Errorf("%v: split %v, not split %v; want the split shorter at 10 steps", e, on.Total, off.Total)
		}
	}

	// w8 halves the expert's weight bytes and runs at the w8a16 rate.
	d := base
	d.Expert = W8
	if w8 := est(d); !(w8.Stage(StageStep).Latency < c.Stage(StageStep).Latency) || w8.Stage(StageStep).Weights != 1_020_886_023 {
		t.Errorf("w8 step %v (%d bytes) against fp16 %v; want shorter, 1,020,886,023 bytes", w8.Stage(StageStep).Latency, w8.Stage(StageStep).Weights, c.Stage(StageStep).Latency)
	}

	// Two processes: the hand-off is added, the weights are split
	// between the processes.
	d = base
	d.Processes = 2
	two := est(d)
	kv := int64(30 * 2 * 98 * 3072 * 2)
	wantH := time.Duration(math.Round(float64(2*kv) / b.HandoffBandwidth * 1e9))
	if two.Handoff != wantH || two.Total != c.Total+wantH {
		t.Errorf("two processes: hand-off %v, total %v; want %v and %v", two.Handoff, two.Total, wantH, c.Total+wantH)
	}
	if len(two.ProcessBytes) != 2 || two.ProcessBytes[0]+two.ProcessBytes[1] != c.ProcessBytes[0] {
		t.Errorf("process bytes %v and %v; want the one process's split in two", two.ProcessBytes, c.ProcessBytes)
	}
	// w8 world model + fp16 expert is 6.9 GB: over 6 GB in one process,
	// within it in two.
	if c.Fits || !two.Fits {
		t.Errorf("fits: one process %v (%d bytes), two %v (%v); want false, true", c.Fits, c.ProcessBytes[0], two.Fits, two.ProcessBytes)
	}

	// Compute bound when the rate falls.
	slow := b
	slow.FP16Rate = 0.1e12
	if s, err := slow.Estimate(m, base); err != nil || !s.Stage(StageStep).ComputeBound || !(s.Total > c.Total) {
		t.Errorf("at 0.1 TFLOP/s: %v, compute bound %v, total %v; want compute bound and longer than %v", err, s.Stage(StageStep).ComputeBound, s.Total, c.Total)
	}
	// A byte-bound stage's time scales with 1/bandwidth.
	fast := b
	fast.Bandwidth *= 2
	f, _ := fast.Estimate(m, base)
	st, ft := c.Stage(StageStep), f.Stage(StageStep)
	if !ft.ComputeBound && math.Abs((ft.Latency-b.GraphOverhead).Seconds()*2-(st.Latency-b.GraphOverhead).Seconds()) > 1e-8 {
		t.Errorf("step at twice the bandwidth %v, at once %v; want half the streaming time", ft.Latency, st.Latency)
	}
}

// TestEstimateRefuses checks that bad boards, models and deployments are
// refused by name.
func TestEstimateRefuses(t *testing.T) {
	good := Deployment{VAE: FP16, WorldModel: W8, Expert: FP16, Steps: 10, Processes: 1}
	for _, tc := range []struct {
		name string
		edit func(*Board, *Model, *Deployment)
		want string
	}{
		{"nan bandwidth", func(b *Board, _ *Model, _ *Deployment) { b.Bandwidth = math.NaN() }, "bandwidth"},
		{"inf rate", func(b *Board, _ *Model, _ *Deployment) { b.W8Rate = math.Inf(1) }, "w8 rate"},
		{"zero fp16 rate", func(b *Board, _ *Model, _ *Deployment) { b.FP16Rate = 0 }, "fp16 rate"},
		{"negative overhead", func(b *Board, _ *Model, _ *Deployment) { b.GraphOverhead = -time.Millisecond }, "overheads"},
		{"zero context limit", func(b *Board, _ *Model, _ *Deployment) { b.ContextLimit = 0 }, "context limit"},
		{"huge video width", func(_ *Board, m *Model, _ *Deployment) { m.Video.FFNDim = 1 << 30 }, "video ffn_dim"},
		{"odd image", func(_ *Board, m *Model, _ *Deployment) { m.VAE.Width = 450 }, "multiples of 32"},
		{"bad expert", func(_ *Board, m *Model, _ *Deployment) { m.Expert.NumLayers = 0 }, "num_layers"},
		{"zero steps", func(_ *Board, _ *Model, d *Deployment) { d.Steps = 0 }, "steps"},
		{"three processes", func(_ *Board, _ *Model, d *Deployment) { d.Processes = 3 }, "processes"},
		{"a cycle of years", func(b *Board, _ *Model, _ *Deployment) { b.Bandwidth = 1e-3 }, "want at most 24h0m0s"},
		{"overheads of years", func(b *Board, _ *Model, d *Deployment) { b.GraphOverhead = 100 * time.Hour }, "want at most 24h0m0s"},
		{"a slow hand-off", func(b *Board, _ *Model, d *Deployment) { d.Processes, b.HandoffBandwidth = 2, 1e-9 }, "hand-off takes"},
		{"bad precision", func(_ *Board, _ *Model, d *Deployment) { d.Expert = Precision(7) }, "precision"},
	} {
		b, m, d := DefaultBoard(), FullModel(), good
		tc.edit(&b, &m, &d)
		if _, err := b.Estimate(m, d); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want an error naming %q", tc.name, err, tc.want)
		}
	}
	if _, err := ParsePrecision("int8"); err == nil {
		t.Error("ParsePrecision(int8): no error")
	}
	for _, p := range Precisions() {
		if q, err := ParsePrecision(p.String()); err != nil || q != p {
			t.Errorf("ParsePrecision(%v) = %v, %v", p, q, err)
		}
	}
}

// TestMeasured: a measured figure replaces the estimate of the stages it
// matches, and only those; the flag's form reads back.
func TestMeasured(t *testing.T) {
	ms, err := ParseMeasured("step:fp16=70, step-split=40,vae=45,context:w8=9.5,prefill:w4=80")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range ms {
		names = append(names, m.String())
	}
	if got := strings.Join(names, ","); got != "step:fp16=70,step-split=40,vae=45,context:w8=9.5,prefill:w4=80" {
		t.Errorf("read back %q", got)
	}
	plain, b := DefaultBoard(), DefaultBoard()
	b.Measured = ms
	for _, d := range Grid(FP16, W8, []Precision{FP16, W8}, []int{10}, []bool{false, true}, []int{1}) {
		est, err := plain.Estimate(FullModel(), d)
		if err != nil {
			t.Fatal(err)
		}
		got, err := b.Estimate(FullModel(), d)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]time.Duration{StageVAE: 45 * time.Millisecond}
		switch {
		case !d.Split && d.Expert == FP16:
			want[StageStep] = 70 * time.Millisecond
		case d.Split:
			want[StageStep] = 40 * time.Millisecond
		}
		if d.Split && d.Expert == W8 {
			want[StageContext] = 9500 * time.Microsecond
		}
		var total time.Duration
		for i := range got.Stages {
			s, e := &got.Stages[i], &est.Stages[i]
			if w, ok := want[s.Name]; ok {
				if s.Latency != w || !s.Measured {
					t.Errorf("%v: %s %v (measured %v); want the measured %v", d, s.Name, s.Latency, s.Measured, w)
				}
			} else if s.Latency != e.Latency || s.Measured {
				t.Errorf("%v: %s %v (measured %v); want the estimate %v", d, s.Name, s.Latency, s.Measured, e.Latency)
			}
			total += s.Total()
		}
		if got.Total != total {
			t.Errorf("%v: total %v; want the stages' %v", d, got.Total, total)
		}
	}
	for _, bad := range []string{"step", "warp=3", "step:int8=3", "step=0", "step=-1", "step=NaN", "step=1e12", "step=1e-9",
		strings.Repeat("vae=1,", MaxMeasured) + "vae=1"} {
		if _, err := ParseMeasured(bad); err == nil {
			t.Errorf("ParseMeasured(%q): no error", bad)
		}
	}
	b.Measured = []Measured{{Stage: "decoder", AnyPrecision: true, Latency: time.Millisecond}}
	if _, err := b.Estimate(FullModel(), Deployment{Steps: 1, Processes: 1}); err == nil || !strings.Contains(err.Error(), `"decoder"`) {
		t.Errorf("a measured stage that does not exist: %v", err)
	}
}
