package worldmodel

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"gonum.org/v1/gonum/blas"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/cpu"
)

// randomDiTWeights makes DiT weights of configuration c filled with seeded
// random values of the reference's scales (gains 1 + 0.2·N, biases 0.1·N,
// modulation 0.3·N, matrices N/sqrt(fan-in)), for benchmarks: no file, no
// time MLP (TM is random too).
func randomDiTWeights(c DiTConfig, seed uint64) *DiTWeights {
	r := rand.New(rand.NewPCG(seed, 26))
	D, F, T, P, z, A := c.HiddenDim, c.FFNDim, c.TextDim, c.ProprioDim, c.LatentChannels, c.NumHeads*c.HeadDim
	mat := func(n, fanIn int) []float32 {
		v := make([]float32, n)
		s := 1 / math.Sqrt(float64(fanIn))
		for i := range v {
			v[i] = float32(r.NormFloat64() * s)
		}
		return v
	}
	vec := func(n int, base, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(base + scale*r.NormFloat64())
		}
		return v
	}
	w := &DiTWeights{Config: c,
		PatchW: mat(D*z*4, z*4), PatchB: vec(D, 0, 0.1),
		Text0: mat(D*T, T), Text0B: vec(D, 0, 0.1), Text2: mat(D*D, D), Text2B: vec(D, 0, 0.1),
		TM: vec(6*D, 0, 0.3), ProprioW: mat(T*P, P), ProprioB: vec(T, 0, 0.1),
		Layers: make([]DiTLayer, c.NumLayers)}
	for l := range w.Layers {
		L := &w.Layers[l]
		L.Mod = vec(6*D, 0, 0.3)
		L.NormK = vec(A, 1, 0.2)
		if l == c.NumLayers-1 {
			L.Trimmed = true
			L.QKV, L.QKVB = mat(2*A*D, D), vec(2*A, 0, 0.1)
			continue
		}
		L.QKV, L.QKVB = mat(3*A*D, D), vec(3*A, 0, 0.1)
		L.NormQ = vec(A, 1, 0.2)
		L.O, L.OB = mat(D*A, A), vec(D, 0, 0.1)
		L.Norm3W, L.Norm3B = vec(D, 1, 0.2), vec(D, 0, 0.1)
		L.CrossQ, L.CrossQB, L.CrossNormQ = mat(A*D, D), vec(A, 0, 0.1), vec(A, 1, 0.2)
		L.CrossK, L.CrossKB, L.CrossNormK = mat(A*D, D), vec(A, 0, 0.1), vec(A, 1, 0.2)
		L.CrossV, L.CrossVB = mat(A*D, D), vec(A, 0, 0.1)
		L.CrossO, L.CrossOB = mat(D*A, A), vec(D, 0, 0.1)
		L.FFN0, L.FFN0B = mat(F*D, D), vec(F, 0, 0.1)
		L.FFN2, L.FFN2B = mat(D*F, F), vec(D, 0, 0.1)
	}
	return w
}

// BenchmarkDiTPrefill times the prefill at the real DiT width (3072, FFN
// 14336, 24 × 128 heads, text 4096) on the LIBERO grid (Sv 98, L 129) with
// random weights and the sgemm cpu.PickGemm("auto", "", 0) gives (OpenBLAS
// on every core when it loads): a 2-layer DiT (stem, one full layer, the
// trimmed last layer) and the same weights as a 1-layer DiT (stem and the
// trimmed layer alone), alternately. It reports the best time of each
// ("best2-s", "best1-s"), one full layer's time (their difference,
// "layer-s"), the 30-layer prefill this implies ("x30-s": the 1-layer time
// plus 29 full layers; the last layer trimmed, spec §5.6), its useful
// GFLOP/s as a ratio to the best GFLOP/s of the same sgemm on the
// dominant shape, [98 × 3072] · [3072 × 14336] as the FFN's first product
// calls it, run once before each prefill ("x-sgemm"), the allocations per
// prefill and the peak resident memory ("peak-MB", weights included).
func BenchmarkDiTPrefill(b *testing.B) {
	gemm, name, err := cpu.PickGemm("auto", "", 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Log(name)
	c := FullDiTConfig()
	c.NumLayers = 2
	w2 := randomDiTWeights(c, 1)
	w1 := *w2
	w1.Config.NumLayers, w1.Layers = 1, w2.Layers[1:]
	size := DiTSize{LatentHeight: 14, LatentWidth: 28, ContextRows: TextRows + 1}
	d2, err := NewDiT(w2, gemm, size)
	if err != nil {
		b.Fatal(err)
	}
	d1, err := NewDiT(&w1, gemm, size)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(2, 26))
	latent := make([]float32, LatentChannels*14*28)
	cond := make([]float32, (TextRows+1)*c.TextDim)
	for i := range latent {
		latent[i] = float32(rng.NormFloat64())
	}
	for i := range cond {
		cond[i] = float32(rng.NormFloat64())
	}
	k2, v2 := f16KV(d2)
	k1, v1 := f16KV(d1)
	ctx := context.Background()
	run := func(d *DiT, k, v expert.TensorView) time.Duration {
		t0 := time.Now()
		if err := d.Prefill(ctx, latent, cond, k, v); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	run(d2, k2, v2) // warm-up
	run(d1, k1, v1)
	D, F := c.HiddenDim, c.FFNDim
	y := &sgemmYardstick{m: 98, n: F, k: D, a: make([]float32, 98*D), b: w2.Layers[0].FFN0, c: make([]float32, 98*F), best: 1 << 62}
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	best1, best2 := time.Duration(1<<62), time.Duration(1<<62)
	for b.Loop() {
		b.StopTimer()
		y.b = w2.Layers[0].FFN0
		t0 := time.Now()
		gemm.Sgemm(blas.NoTrans, blas.Trans, y.m, y.n, y.k, 1, y.a, y.k, y.b, y.k, 0, y.c, y.n)
		y.best = min(y.best, time.Since(t0))
		best1 = min(best1, run(d1, k1, v1))
		b.StartTimer()
		best2 = min(best2, run(d2, k2, v2))
	}
	b.StopTimer()
	runtime.ReadMemStats(&m1)
	layer := best2 - best1
	x30 := best1 + 29*layer
	c30 := c
	c30.NumLayers = 30
	d30 := &DiT{cfg: c30, size: size, sv: 98}
	work := d30.Flops() - d30.TextFlops() // the same instruction every cycle: the text rows' part cached
	rate := work / x30.Seconds()
	b.ReportMetric(best2.Seconds(), "best2-s")
	b.ReportMetric(best1.Seconds(), "best1-s")
	b.ReportMetric(layer.Seconds(), "layer-s")
	b.ReportMetric(x30.Seconds(), "x30-s")
	b.ReportMetric(rate/1e9, "GFLOP/s")
	b.ReportMetric(y.rate()/1e9, "sgemm-GFLOP/s")
	b.ReportMetric(rate/y.rate(), "x-sgemm")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/float64(2*b.N), "allocs/prefill")
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(ru.Maxrss)/1024, "peak-MB") // Linux: kB
	b.Logf("30 layers (last trimmed), text rows cached: %.2f s, %.0f GFLOP (%.0f with new text rows), %.1f GFLOP/s = %.2f × sgemm [98×3072]·[3072×14336] (%.1f GFLOP/s)",
		x30.Seconds(), work/1e9, d30.Flops()/1e9, rate/1e9, rate/y.rate(), y.rate()/1e9)
}

// TestDiTRealWidth (opt-in: FASTWAM_REAL_WIDTH=1) runs the prefill at the
// real DiT width (3072, FFN 14336, 24 × 128 heads, text 4096) on 2 layers
// with random weights against golden/make_dit_golden.py's float64 torch
// reference, run on the fly (about 1 GB of weights, several GB of RAM for
// the reference and a few minutes).
func TestDiTRealWidth(t *testing.T) {
	if os.Getenv("FASTWAM_REAL_WIDTH") != "1" {
		t.Skip("set FASTWAM_REAL_WIDTH=1 to compare the prefill with the reference at the real width (2 layers, minutes, ~6 GB of RAM)")
	}
	python := python3With(t, "numpy, torch", "install python3-numpy python3-torch for the real-width reference")
	dir := os.Getenv("FASTWAM_REAL_WIDTH_DIR") // reuse a generated set
	if dir == "" {
		dir = t.TempDir()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, python, filepath.Join("..", "golden", "make_dit_golden.py"),
			"--config", "real", "--layers", "2", "--cases", "98", "--threads", fmt.Sprint(runtime.NumCPU()), "--out", dir)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make_dit_golden.py: %v\n%s", err, b)
		}
	}
	w, err := LoadDiTWeights(filepath.Join(dir, "weights.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	g, name, err := cpu.PickGemm("auto", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(name)
	ref := readNPZ(t, filepath.Join(dir, "dit_98.npz"), ditGoldenKeys...)
	d, err := NewDiT(w, g, DiTSize{LatentHeight: 14, LatentWidth: 28, ContextRows: ref["context"].Shape[0]})
	if err != nil {
		t.Fatal(err)
	}
	lines, _, _ := runCase(t, ditCase{ref, d}, ref["latent"].Data)
	for _, l := range lines {
		t.Log(l)
	}
}
