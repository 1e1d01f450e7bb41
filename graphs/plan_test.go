package graphs

import (
	"errors"
	"strings"
	"testing"
)

// The specs' own counts: action-step.md §1.3, world-model.md §5.6 and §6.2.
func TestParameterCountsMatchTheSpecs(t *testing.T) {
	a, w := FullAction(), FullWorld()
	if got := ActionStepTensors(a).Params() - ropeAndSinusoid(a); got != 1_020_886_023 {
		t.Errorf("action expert: %d parameters, want 1,020,886,023 (action-step.md §1.3)", got)
	}
	if got := ActionStepLayerTensors(a).Params(); got != 27_299_840 {
		t.Errorf("action step layer: %d parameters read per step, want 27,299,840", got)
	}
	// §1.3: cross k, v, norm_k of 30 layers 189,020,160 plus text_embedding 5,244,928.
	if got := ActionContextTensors(a).Params(); got != 189_020_160+5_244_928 {
		t.Errorf("action_context: %d parameters, want %d", got, 189_020_160+5_244_928)
	}
	if got := WorldLayerTensors(w).Params(); got != 163_656_704 {
		t.Errorf("video DiT layer: %d, want 163,656,704 (world-model.md §6.2)", got)
	}
	if got := WorldLastLayerTensors(w).Params(); got != 18_902_016 {
		t.Errorf("trimmed last layer: %d, want 18,902,016 (world-model.md §5.6)", got)
	}
	// §6.2: patch 592,896 + text_embedding 22,026,240.
	if got := WorldStemTensors(w).Params(); got != 592_896+22_026_240 {
		t.Errorf("prefill stem: %d, want %d", got, 592_896+22_026_240)
	}
}

func ropeAndSinusoid(c ActionConfig) int64 {
	return int64(2*c.ActionTokens*c.Heads*c.HeadDim/2 + c.FreqDim/2)
}

func TestBytesPerFormat(t *testing.T) {
	x := Tensors{MatValues: 128 * 64, Rows: 128, VecValues: 10}
	for _, c := range []struct {
		w    Weights
		want int64
	}{
		{FP16, 2 * (128*64 + 10)},
		{W8, 128*64 + 8*128 + 40},
		{W4, 128*64/2 + 128*64/64 + 8*128 + 40},
	} {
		if got := x.Bytes(c.w); got != c.want {
			t.Errorf("%v: %d bytes, want %d", c.w, got, c.want)
		}
	}
}

func checkPlan(t *testing.T, p *Plan) {
	t.Helper()
	o := p.Options
	next := 0
	var sum []int64 = make([]int64, o.Processes)
	for _, g := range p.Graphs {
		if g.Bytes > o.ContextLimit {
			t.Errorf("%s: %d bytes over the context limit %d", g.Name, g.Bytes, o.ContextLimit)
		}
		if g.Bytes != g.Tensors.Bytes(o.Weights) {
			t.Errorf("%s: bytes %d, its tensors give %d", g.Name, g.Bytes, g.Tensors.Bytes(o.Weights))
		}
		sum[g.Process] += g.Bytes
		if g.IsPrefill {
			if g.Lo != next || g.Hi <= g.Lo {
				t.Errorf("%s: range [%d, %d) does not continue from %d", g.Name, g.Lo, g.Hi, next)
			}
			next = g.Hi
		}
	}
	if next != o.World.Layers {
		t.Errorf("prefill ranges end at %d, want %d", next, o.World.Layers)
	}
	for i, s := range sum {
		if s != p.ProcessBytes[i] || s > o.ProcessLimit {
			t.Errorf("process %d: %d bytes (recorded %d), limit %d", i, s, p.ProcessBytes[i], o.ProcessLimit)
		}
	}
}

func TestPlansOfTheRealModel(t *testing.T) {
	for _, c := range []struct {
		w         Weights
		processes int
		prefills  int
		ranges    string
	}{
		{W8, 1, 3, "0:9,9:19,19:30"},
		{W8, 2, 3, "0:9,9:19,19:30"},
		{W4, 1, 2, "0:14,14:30"},
	} {
		o := DefaultOptions()
		o.Weights, o.Processes = c.w, c.processes
		p, err := MakePlan(o)
		if err != nil {
			t.Fatalf("%v, %d processes: %v", c.w, c.processes, err)
		}
		checkPlan(t, p)
		if got := p.Ranges(); got != c.ranges {
			t.Errorf("%v: ranges %s, want %s", c.w, got, c.ranges)
		}
	}
}

// bruteForce is the smallest largest graph over every partition of layers
// [lo, N) into k contiguous ranges under the limit (-1: none fits).
func bruteForce(o Options, lo, k int) int64 {
	n := o.World.Layers
	if k == 1 {
		if b := rangeTensors(o.World, lo, n).Bytes(o.Weights); b <= o.ContextLimit {
			return b
		}
		return -1
	}
	best := int64(-1)
	for hi := lo + 1; hi <= n-k+1; hi++ {
		b := rangeTensors(o.World, lo, hi).Bytes(o.Weights)
		if b > o.ContextLimit {
			break
		}
		rest := bruteForce(o, hi, k-1)
		if rest < 0 {
			continue
		}
		if m := max(b, rest); best < 0 || m < best {
			best = m
		}
	}
	return best
}

// The plan's ranges are the fewest, and the most balanced of those:
// checked against every partition.
func TestRangesAgainstEveryPartition(t *testing.T) {
	for _, w := range []Weights{FP16, W8, W4} {
		o := DefaultOptions()
		o.Weights, o.ProcessLimit = w, 1<<50
		p, err := MakePlan(o)
		if err != nil {
			t.Fatal(err)
		}
		var k int
		var largest int64
		for _, g := range p.Graphs {
			if g.IsPrefill {
				k++
				largest = max(largest, g.Bytes)
			}
		}
		if fewer := bruteForce(o, 0, k-1); fewer >= 0 {
			t.Errorf("%v: %d ranges planned, but %d fit", w, k, k-1)
		}
		if b := bruteForce(o, 0, k); b != largest {
			t.Errorf("%v: largest prefill graph %d bytes, the best partition into %d has %d", w, largest, k, b)
		}
	}
}

func TestImpossibleLimits(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Options)
		want string
	}{
		{"fp16 in one process", func(o *Options) {}, "process 0 (world model and action expert) needs"},
		{"fp16 in two processes", func(o *Options) { o.Processes = 2 }, "process 0 (world model) needs"},
		{"a layer over the context limit", func(o *Options) { o.ContextLimit = 300_000_000 }, "prefill layer 0 with the patch embedding and text MLP alone needs"},
		{"action_step_ctx over the context limit", func(o *Options) { o.ContextLimit = 1_000_000_000; o.Weights = W8; o.Action.Layers = 60 }, "action_step_ctx needs"},
	} {
		o := DefaultOptions()
		c.edit(&o)
		_, err := MakePlan(o)
		if !errors.Is(err, ErrImpossible) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want ErrImpossible containing %q", c.name, err, c.want)
		}
	}
}

func TestBadOptions(t *testing.T) {
	for _, edit := range []func(*Options){
		func(o *Options) { o.Processes = 3 },
		func(o *Options) { o.ContextLimit = 0 },
		func(o *Options) { o.ProcessLimit = -1 },
		func(o *Options) { o.World.Heads = 7 },
		func(o *Options) { o.VAE.ImageH = 100 },
		func(o *Options) { o.Action.Layers = 0 },
		func(o *Options) { o.Weights = 9 },
	} {
		o := DefaultOptions()
		edit(&o)
		if _, err := MakePlan(o); err == nil || errors.Is(err, ErrImpossible) {
			t.Errorf("%+v: error %v, want a validation error", o, err)
		}
	}
}

func TestWrite(t *testing.T) {
	o := DefaultOptions()
	o.Weights = W8
	p, err := MakePlan(o)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"vae_encoder", "prefill_0", "prefill_2 (last layer trimmed)", "19–29", "action_context", "action_step_ctx", "process 0 (world model and action expert)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("plan output lacks %q:\n%s", want, b.String())
		}
	}
}

// The planner's counts agree with the graphs golden/export/graphs.py
// exports: the sums of the torch modules' buffers (weights and constants,
// what each ONNX file holds besides shape operands and the LayerNorms'
// constant gains of ones), obtained with
//
//	m = graphs.VAEEncoder(make_vae_golden.random_weights(d, rng), (H, W)); sum(b.numel() for b in m.buffers())
//	m = graphs.Prefill(sd, cfg, lo, hi, (4, 8)); ...   (sd, cfg: test_export.py's TINY_WORLD)
func TestSizesAgreeWithTheExportModules(t *testing.T) {
	for _, c := range []struct {
		vae  VAEConfig
		want int64
	}{
		{VAEConfig{Dim: 4, ZDim: 48, ImageH: 64, ImageW: 128}, 54408},
		{VAEConfig{Dim: 8, ZDim: 48, ImageH: 224, ImageW: 448}, 176592},
	} {
		if got := VAETensors(c.vae).Params(); got != c.want {
			t.Errorf("vae_encoder %+v: %d values, the export module holds %d", c.vae, got, c.want)
		}
	}
	w := WorldConfig{Dim: 48, FFN: 96, Heads: 2, HeadDim: 24, Layers: 5, TextDim: 32, FreqDim: 256, ZDim: 4,
		LatentH: 4, LatentW: 8, ContextTokens: 5}
	for _, c := range []struct {
		lo, hi int
		want   int64
	}{{0, 2, 62640}, {2, 4, 57888}, {4, 5, 5424}, {0, 5, 125184}} {
		if got := rangeTensors(w, c.lo, c.hi).Params(); got != c.want {
			t.Errorf("prefill [%d, %d): %d values, the export module holds %d", c.lo, c.hi, got, c.want)
		}
	}
}
