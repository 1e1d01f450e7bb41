package worldmodel

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"

	"github.com/x448/float16"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/cpu"
)

// tinyModel writes the inputs of a world model at the tiny sizes (the DiT
// and VAE goldens' weights, two 64 × 64 tiles, a 64-wide text cache with
// one instruction) and loads it.
func tinyModel(t *testing.T) (*Model, ModelOptions, string) {
	t.Helper()
	dir := t.TempDir()
	stats := filepath.Join(dir, "dataset_stats.json")
	js := `{"state": {"default": {"global_min": [-1, -1, 0, -3, -3, -3, 0, -0.04], "global_max": [1, 1, 1.5, 3, 3, 3, 0.04, 0]}}, "action": {}}`
	if err := os.WriteFile(stats, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	const task = "put the bowl on the plate"
	writeTextFile(t, dir, textFile{prompt: Prompt(task), rows: TextRows, dim: 64, n: 11})
	opts := ModelOptions{
		DiTWeights: filepath.Join(ditGoldenDir, "weights.safetensors"),
		VAEWeights: filepath.Join(vaeGoldenDir, "weights.safetensors"),
		StateStats: stats,
		TextCache:  TextCache{Dir: dir},
		Frame: FrameConfig{TileWidth: 64, TileHeight: 64, Concat: Horizontal,
			Cameras: []Camera{{Name: "agentview", Flip180: true}, {Name: "wrist", Flip180: true}}},
	}
	// gonum's sgemm, so the parts run alone compute the same sums.
	g, _, err := cpu.PickGemm("gonum", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	opts.Gemm = g
	m, err := LoadModel(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return m, opts, task
}

func randomImage(r *rand.Rand, w, h int) Image {
	p := make([]byte, w*h*3)
	for i := range p {
		p[i] = byte(r.IntN(256))
	}
	return Image{Width: w, Height: h, Pix: p}
}

// TestModelRun runs the model and checks its output against its parts run
// one after the other (the parts are checked against the references by
// their own tests), the F16 output against the F32 one, and that the text
// cache is read only when the instruction changes.
func TestModelRun(t *testing.T) {
	m, opts, task := tinyModel(t)
	r := rand.New(rand.NewPCG(1, 2))
	obs := Observation{
		Images:      []Image{randomImage(r, 96, 80), randomImage(r, 64, 64)},
		State:       []float32{0.1, -0.2, 0.9, 1, -2, 0.5, 0.02, -0.01},
		Instruction: task,
	}
	out := m.NewOutput(false)
	if err := m.Run(t.Context(), obs, out); err != nil {
		t.Fatal(err)
	}
	if !out.Valid {
		t.Fatal("Run returned nil but the output is not valid")
	}
	t.Logf("stage times: %+v", out.Times)
	// Allocations of a steady-state run with gonum's sgemm, logged (gonum
	// allocates; with OpenBLAS a run allocates nothing: alloc_test.go).
	allocs := testing.AllocsPerRun(3, func() {
		if err := m.Run(t.Context(), obs, out); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("%v allocations a steady-state Run (gonum's sgemm)", allocs)

	// The same cycle through the parts.
	pre, _ := NewPreprocessor(opts.Frame)
	img := make([]float32, 3*64*128)
	if err := pre.Tensor(img, obs.Images...); err != nil {
		t.Fatal(err)
	}
	vw, _ := LoadVAEWeights(opts.VAEWeights)
	vae, _ := NewVAEEncoder(vw, 64, 128, opts.Gemm)
	latent := make([]float32, 48*4*8)
	if err := vae.Encode(latent, img); err != nil {
		t.Fatal(err)
	}
	norm, _ := LoadStateNormalizer(opts.StateStats, "default", 8)
	p := make([]float32, 8)
	if err := norm.Normalize(p, obs.State); err != nil {
		t.Fatal(err)
	}
	dw, _ := LoadDiTWeights(opts.DiTWeights)
	row := make([]float32, 64)
	if err := ProprioToken(row, dw.ProprioW, dw.ProprioB, p); err != nil {
		t.Fatal(err)
	}
	e, err := TextCache{Dir: opts.TextCache.Dir, Rows: TextRows, Dim: 64}.Lookup(task)
	if err != nil {
		t.Fatal(err)
	}
	cond := make([]float32, 129*64)
	if err := AssembleContext(cond, e.Text, row); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Context, cond) {
		t.Error("context differs from the text rows and the proprio row")
	}
	if slices.Contains(out.Mask, false) {
		t.Error("mask has a false entry")
	}
	d, _ := NewDiT(dw, opts.Gemm, DiTSize{LatentHeight: 4, LatentWidth: 8, ContextRows: 129})
	k, v := f32KV(d)
	if err := d.Prefill(t.Context(), latent, cond, k, v); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out.Keys.F32, k.F32) || !slices.Equal(out.Values.F32, v.F32) {
		t.Error("K/V differ from the parts' run")
	}

	// The text cache is not read again for the same instruction.
	if err := os.RemoveAll(opts.TextCache.Dir); err != nil {
		t.Fatal(err)
	}
	o16 := m.NewOutput(true)
	if err := m.Run(t.Context(), obs, o16); err != nil {
		t.Fatalf("same instruction, cache removed: %v", err)
	}
	for i := range k.F32 {
		if o16.Keys.F16[i] != float16.Fromfloat32(k.F32[i]).Bits() || o16.Values.F16[i] != float16.Fromfloat32(v.F32[i]).Bits() {
			t.Fatalf("F16 output %d is not the F32 output rounded to half", i)
		}
	}
	obs.Instruction = "another task"
	if err := m.Run(t.Context(), obs, o16); !errors.Is(err, ErrNoTextEntry) || o16.Valid {
		t.Errorf("a new instruction without an entry: err %v, valid %v; want ErrNoTextEntry, not valid", err, o16.Valid)
	}
}

// TestModelRefuses: refused inputs leave the output's buffers untouched
// and mark it invalid; a cancelled run marks it invalid.
func TestModelRefuses(t *testing.T) {
	m, _, task := tinyModel(t)
	r := rand.New(rand.NewPCG(3, 4))
	good := Observation{
		Images:      []Image{randomImage(r, 64, 64), randomImage(r, 64, 64)},
		State:       make([]float32, 8),
		Instruction: task,
	}
	out := m.NewOutput(false)
	if err := m.Run(t.Context(), good, out); err != nil {
		t.Fatal(err)
	}
	k0, c0 := slices.Clone(out.Keys.F32), slices.Clone(out.Context)
	nanState := make([]float32, 8)
	nanState[3] = float32(math.NaN())
	bad := func(f func(*Observation)) Observation {
		o := good
		o.Images = slices.Clone(good.Images)
		f(&o)
		return o
	}
	for _, tc := range []struct {
		name string
		obs  Observation
	}{
		{"short state", bad(func(o *Observation) { o.State = o.State[:7] })},
		{"NaN state", bad(func(o *Observation) { o.State = nanState })},
		{"one image", bad(func(o *Observation) { o.Images = o.Images[:1] })},
		{"short pixels", bad(func(o *Observation) { o.Images[1].Pix = o.Images[1].Pix[:100] })},
		{"unknown instruction", bad(func(o *Observation) { o.Instruction = "fly" })},
	} {
		if err := m.Run(t.Context(), tc.obs, out); err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
		if out.Valid || !slices.Equal(out.Keys.F32, k0) || !slices.Equal(out.Context, c0) {
			t.Errorf("%s: refused, but the output was touched or left valid", tc.name)
		}
	}
	small := &Output{Keys: expert.TensorView{F32: out.Keys.F32[1:]}, Values: out.Values, Context: out.Context, Mask: out.Mask}
	if err := m.Run(t.Context(), good, small); err == nil {
		t.Error("short K buffer accepted")
	}
	both := &Output{Keys: expert.TensorView{F32: out.Keys.F32[:len(out.Keys.F32)-1], F16: make([]uint16, 1)}, Values: out.Values, Context: out.Context, Mask: out.Mask}
	if err := m.Run(t.Context(), good, both); err == nil {
		t.Error("K view with both F32 and F16 set accepted")
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := m.Run(ctx, good, out); !errors.Is(err, context.Canceled) || out.Valid {
		t.Errorf("cancelled: err %v, valid %v; want context.Canceled, not valid", err, out.Valid)
	}
	if err := m.Run(t.Context(), good, out); err != nil || !slices.Equal(out.Keys.F32, k0) {
		t.Errorf("after a cancelled run: err %v, same K/V %v", err, slices.Equal(out.Keys.F32, k0))
	}
}

// TestModelCloseStopsWorkers: a run starts the VAE's worker goroutines;
// Close stops them before it returns (twice is harmless). It counts the
// model's own workers: the process's goroutine count also moves with other
// tests' encoders, whose cleanups close their pools when they are collected.
func TestModelCloseStopsWorkers(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("one CPU: the VAE runs on the calling goroutine and starts no workers")
	}
	m, _, task := tinyModel(t)
	ckv, ok := m.kv.(*cpuKV)
	if !ok {
		t.Fatalf("the tiny model's K/V stage is %T, want the CPU one", m.kv)
	}
	pool := ckv.vae.pool
	if n := pool.alive.Load(); n != 0 {
		t.Fatalf("%d workers before any run, want none (they start on first use)", n)
	}
	r := rand.New(rand.NewPCG(3, 4))
	obs := Observation{Images: []Image{randomImage(r, 64, 64), randomImage(r, 64, 64)}, State: make([]float32, ProprioDim), Instruction: task}
	if err := m.Run(t.Context(), obs, m.NewOutput(false)); err != nil {
		t.Fatal(err)
	}
	if n, want := pool.alive.Load(), int32(runtime.GOMAXPROCS(0)-1); n != want {
		t.Fatalf("%d workers after a run, want %d (GOMAXPROCS − 1): the VAE's workers did not start", n, want)
	}
	m.Close()
	if n := pool.alive.Load(); n != 0 {
		t.Fatalf("%d workers still running after Close returned", n)
	}
	m.Close()
}
