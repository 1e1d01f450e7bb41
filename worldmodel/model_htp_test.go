package worldmodel

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/x448/float16"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/htp"
	"github.com/fastwam/actionexpert/expert/htp/prefill"
	"github.com/fastwam/actionexpert/internal/qnnfake"
)

// htpWorld writes the world model's graphs for the tiny model's sizes (a
// 64 × 128 frame, a 48 × 4 × 8 latent, 8 video tokens, the DiT's layers
// split 1 + rest) and, when d is not nil, the split action bundle for d, one
// binary per graph.
func htpWorld(t *testing.T, m *Model, d *expert.Dims) (world []qnnfake.Graph, action map[string]qnnfake.Graph, paths []string) {
	t.Helper()
	md := m.Dims()
	world = qnnfake.WorldModelGraphs(qnnfake.DataTypeFloat32, qnnfake.WorldDims{ImageHeight: 64, ImageWidth: 128,
		LatentChannels: LatentChannels, LatentHeight: 4, LatentWidth: 8, ContextRows: md.ContextRows, TextDim: md.TextDim,
		VideoTokens: md.VideoTokens, Width: md.Width, Layers: []int{1, md.Layers - 1}})
	gs := slices.Clone(world)
	action = map[string]qnnfake.Graph{}
	if d != nil {
		cg, sg := qnnfake.ActionContextGraph(qnnfake.DataTypeFloat32, *d), qnnfake.ActionStepCtxGraph(qnnfake.DataTypeFloat32, *d)
		sg.SpillFill = 9 << 20
		action[cg.Name], action[sg.Name] = cg, sg
		gs = append(gs, cg, sg)
	}
	dir := t.TempDir()
	for _, g := range gs {
		p := filepath.Join(dir, g.Name+".bin")
		if err := os.WriteFile(p, qnnfake.Binary{SocModel: 77, Arch: 73, BuildID: "wm-test", Graphs: []qnnfake.Graph{g}}.Marshal(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return world, action, paths
}

// TestModelRunHTP runs the whole Model with its K/V stage on the prefill
// chain of the QNN double: the K/V are exactly the double's arithmetic on
// the preprocessed image and the context (which is the CPU model's), in
// F32 and F16, the VAE weights are not read, and the record shows the
// spill-fill group and each graph reading its predecessor's output.
func TestModelRunHTP(t *testing.T) {
	cpuM, opts, task := tinyModel(t)
	world, _, paths := htpWorld(t, cpuM, nil)
	fk := qnnfake.New(t, qnnfake.Variant{})
	chain, err := prefill.New(t.Context(), prefill.Options{ContextPaths: paths, BackendLib: fk.Path, SystemLib: fk.Path, RPCMemLib: fk.Path})
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	opts.KV, opts.VAEWeights = chain, filepath.Join(t.TempDir(), "absent.safetensors")
	m, err := LoadModel(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(5, 6))
	obs := Observation{Images: []Image{randomImage(r, 64, 64), randomImage(r, 64, 64)},
		State: []float32{0.1, -0.2, 0.9, 1, -2, 0.5, 0.02, -0.01}, Instruction: task}
	out, cpuOut := m.NewOutput(false), cpuM.NewOutput(false)
	if err := m.Run(t.Context(), obs, out); err != nil || !out.Valid {
		t.Fatalf("Run: %v (valid %v)", err, out.Valid)
	}
	if err := cpuM.Run(t.Context(), obs, cpuOut); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Context, cpuOut.Context) || !slices.Equal(out.Mask, cpuOut.Mask) {
		t.Error("the context or mask differs from the CPU model's")
	}
	img := make([]float32, 3*64*128)
	if err := m.pre.Tensor(img, obs.Images...); err != nil {
		t.Fatal(err)
	}
	wk, wv := qnnfake.WorldModelExpected(world, img, out.Context)
	if !slices.Equal(out.Keys.F32, wk) || !slices.Equal(out.Values.F32, wv) {
		t.Fatal("K/V differ from the double's arithmetic")
	}
	f16 := m.NewOutput(true)
	if err := m.Run(t.Context(), obs, f16); err != nil {
		t.Fatal(err)
	}
	for i := range wk {
		if f16.Keys.F16[i] != float16.Fromfloat32(wk[i]).Bits() || f16.Values.F16[i] != float16.Fromfloat32(wv[i]).Bits() {
			t.Fatalf("F16 K/V %d differ from the double's arithmetic rounded to F16", i)
		}
	}
	recs := fk.ContextRecords()
	if len(recs) != len(world) {
		t.Fatalf("%d contexts, want %d", len(recs), len(world))
	}
	for _, rc := range recs {
		if !rc.Group || rc.GroupSpillFill != uint64(len(world))<<20 {
			t.Errorf("context %+v: want one group of %d MiB", rc, len(world))
		}
	}
	ex := fk.ExecuteRecords()
	if len(ex) != 2*len(world) || ex[0].Graph != "vae_encoder" || ex[1].Graph != "prefill_0" || ex[2].Graph != "prefill_1" {
		t.Fatalf("executes %+v", ex)
	}
	if ex[0].Outputs[0] != ex[1].Inputs[1] || ex[1].Outputs[3] != ex[2].Inputs[1] || ex[1].Outputs[1] != ex[2].Inputs[0] {
		t.Error("prefill_0 does not read vae_encoder's latent, or prefill_1 prefill_0's hidden_out and ctx_v, in place")
	}
	// A stage of other sizes is refused at load.
	bad := cpuM.Dims()
	small := qnnfake.WorldModelGraphs(qnnfake.DataTypeFloat32, qnnfake.WorldDims{ImageHeight: 64, ImageWidth: 64,
		LatentChannels: LatentChannels, LatentHeight: 4, LatentWidth: 4, ContextRows: bad.ContextRows, TextDim: bad.TextDim,
		VideoTokens: 4, Width: bad.Width, Layers: []int{bad.Layers}})
	var sp []string
	for _, g := range small {
		p := filepath.Join(t.TempDir(), g.Name+".bin")
		os.WriteFile(p, qnnfake.Binary{SocModel: 77, Arch: 73, Graphs: []qnnfake.Graph{g}}.Marshal(), 0o644)
		sp = append(sp, p)
	}
	sc, err := prefill.New(t.Context(), prefill.Options{ContextPaths: sp, BackendLib: fk.Path, SystemLib: fk.Path, RPCMemLib: fk.Path})
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	opts.KV = sc
	if _, err := LoadModel(t.Context(), opts); err == nil {
		t.Error("a K/V stage for a 64 × 64 frame was accepted by a 64 × 128 model")
	}
}

// TestWorldModelToExpertHTP is the policy end to end on the double in one
// process: the world model (K/V stage on the prefill chain) and the split
// action expert share one session and spill-fill group; for a few
// observations the model's output is bound as the expert's chunk and
// denoised. Each prediction is the double's arithmetic on the K/V the
// chain wrote, and the record shows per observation the chain, one
// action_context and one action_step_ctx per step.
func TestWorldModelToExpertHTP(t *testing.T) {
	cpuM, opts, task := tinyModel(t)
	md := cpuM.Dims()
	d := expert.Dims{Layers: md.Layers, Heads: 1, HeadDim: md.Width, VideoTokens: md.VideoTokens,
		ContextTokens: md.ContextRows, TextDim: md.TextDim, ActionTokens: 4, ActionDim: 3}
	world, action, paths := htpWorld(t, cpuM, &d)
	fk := qnnfake.New(t, qnnfake.Variant{})
	var co []string
	for _, g := range world {
		co = append(co, g.Name)
	}
	b, err := htp.New(t.Context(), htp.Options{ContextPaths: paths, CoGraphs: co, Dims: &d, SharedBuffers: true,
		BackendLib: fk.Path, SystemLib: fk.Path, RPCMemLib: fk.Path})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	chain, err := prefill.Attach(b.Session(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	opts.KV = chain
	m, err := LoadModel(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(7, 8))
	out := m.NewOutput(false)
	const observations, steps = 3, 4
	img := make([]float32, 3*64*128)
	for o := range observations {
		obs := Observation{Images: []Image{randomImage(r, 64, 64), randomImage(r, 64, 64)},
			State: []float32{0.1 * float32(o), -0.2, 0.9, 1, -2, 0.5, 0.02, -0.01}, Instruction: task}
		if err := m.Run(t.Context(), obs, out); err != nil {
			t.Fatal(err)
		}
		if err := m.pre.Tensor(img, obs.Images...); err != nil {
			t.Fatal(err)
		}
		wk, wv := qnnfake.WorldModelExpected(world, img, out.Context)
		ch := &expert.Chunk{VideoKeys: out.Keys.F32, VideoValues: out.Values.F32, Context: out.Context, ContextMask: out.Mask}
		if err := b.BindChunk(t.Context(), ch); err != nil {
			t.Fatal(err)
		}
		lat := make([]float32, d.ActionTokens*d.ActionDim)
		for i := range lat {
			lat[i] = float32(r.Float64()*2 - 1)
		}
		pred := make([]float32, len(lat))
		cross := qnnfake.Expected(action["action_context"], [][]float32{out.Context})
		for s := range steps {
			tau := 1 - float32(s)/steps
			if err := b.Step(t.Context(), lat, tau, pred); err != nil {
				t.Fatal(err)
			}
			sg := action["action_step_ctx"]
			by := map[string][]float32{"latents_action": lat, "timestep": {tau}, "video_keys": wk, "video_values": wv,
				"cross_keys": cross[0], "cross_values": cross[1], "context_mask": ones(d.ContextTokens)}
			in := make([][]float32, len(sg.Inputs))
			for i, tn := range sg.Inputs {
				in[i] = by[tn.Name]
			}
			if want := qnnfake.Expected(sg, in)[0]; !slices.Equal(pred, want) {
				t.Fatalf("observation %d step %d: the prediction is not the double's arithmetic on the chain's K/V", o, s)
			}
		}
	}
	var seq []string
	for _, e := range fk.ExecuteRecords() {
		seq = append(seq, e.Graph)
	}
	one := []string{"vae_encoder", "prefill_0", "prefill_1", "action_context"}
	for range steps {
		one = append(one, "action_step_ctx")
	}
	if want := slices.Concat(one, one, one); !slices.Equal(seq, want) {
		t.Errorf("executes %q, want %q", seq, want)
	}
	recs := fk.ContextRecords()
	if len(recs) != len(world)+2 {
		t.Fatalf("%d contexts, want %d", len(recs), len(world)+2)
	}
	for _, rc := range recs {
		if !rc.Group || rc.GroupSpillFill != 9<<20 {
			t.Errorf("context %+v: want all in one group of 9 MiB", rc)
		}
	}
}

func ones(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = 1
	}
	return x
}
