package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/cpu"
)

// torchResult is the JSON line golden/bench_torch.py prints.
type torchResult struct {
	TorchVersion string  `json:"torch_version"`
	Threads      int     `json:"threads"`
	Layers       int     `json:"layers"`
	MedianMs     float64 `json:"ms_per_step_median"`
	MinMs        float64 `json:"ms_per_step_min"`
	PrepareMs    float64 `json:"ms_per_chunk_prepare"`
	BLAS         any     `json:"blas"`
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", stdout, stderr, "[flags]\n\nTimes one denoise step of the CPU backend at full width with random weights,\nthen the same step in PyTorch (golden/bench_torch.py) with the same thread count, and prints the ratio.")
	layers := fs.Int("layers", cpu.FullConfig().NumLayers, "transformer blocks (30 is the full model; fewer for a quick run)")
	iters := fs.Int("iters", 5, "timed steps after one warm-up step")
	threads := fs.Int("threads", 2, "BLAS threads for both Go (OpenBLAS) and PyTorch")
	blasName := fs.String("blas", "auto", "Go BLAS: auto, openblas or gonum")
	python := fs.String("python", "/usr/bin/python3", "Python with torch, for the baseline")
	script := fs.String("torch-script", "golden/bench_torch.py", "the PyTorch benchmark script")
	noTorch := fs.Bool("no-torch", false, "skip the PyTorch baseline")
	if err := fs.parse(args); err != nil {
		return err
	}
	if *layers < 1 || *iters < 1 || *threads < 1 {
		return usageError("-layers, -iters and -threads must be positive")
	}
	cfg := cpu.FullConfig()
	cfg.NumLayers = *layers
	fmt.Fprintf(stdout, "CPU backend, %d layers, hidden %d, %dx%d heads, ffn %d, Sv %d, L %d, %d threads\n",
		cfg.NumLayers, cfg.HiddenDim, cfg.NumHeads, cfg.HeadDim, cfg.FFNDim, cfg.VideoTokens, cfg.ContextTokens, *threads)
	goMs, prepMs, desc, err := benchGo(ctx, cfg, *iters, cpu.Options{BLAS: *blasName, Threads: *threads})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "go     step median %9.1f ms  bind chunk %8.1f ms  %.1f GFLOP/s  [%s]\n", goMs, prepMs, gflop(cfg)/(goMs/1e3), desc)
	if *noTorch {
		return nil
	}
	debug.FreeOSMemory()
	tr, err := benchTorch(ctx, *python, *script, *layers, *iters, *threads)
	if err != nil {
		return fmt.Errorf("PyTorch baseline (use -no-torch to skip): %w", err)
	}
	fmt.Fprintf(stdout, "torch  step median %9.1f ms  bind chunk %8.1f ms  %.1f GFLOP/s  [torch %s, %v]\n",
		tr.MedianMs, tr.PrepareMs, gflop(cfg)/(tr.MedianMs/1e3), tr.TorchVersion, tr.BLAS)
	fmt.Fprintf(stdout, "ratio  go/torch per step: %.2f\n", goMs/tr.MedianMs)
	return nil
}

// benchGo returns the median step and the chunk-binding time in ms.
func benchGo(ctx context.Context, cfg cpu.Config, iters int, opts cpu.Options) (float64, float64, string, error) {
	w, err := cpu.RandomWeights(cfg, 1)
	if err != nil {
		return 0, 0, "", err
	}
	b, err := cpu.New(w, opts)
	if err != nil {
		return 0, 0, "", err
	}
	defer b.Close()
	d := b.Dims()
	c := d.RandomChunk(2)
	t0 := time.Now()
	if err := b.BindChunk(ctx, c); err != nil {
		return 0, 0, "", err
	}
	prep := time.Since(t0)
	x := expert.Noise(5, d.LatentLen())
	pred := make([]float32, len(x))
	var times []float64
	for i := 0; i <= iters; i++ {
		t := time.Now()
		if err := b.Step(ctx, x, 1000, pred); err != nil {
			return 0, 0, "", err
		}
		if i > 0 { // the first step is the warm-up
			times = append(times, float64(time.Since(t))/1e6)
		}
	}
	return median(times), float64(prep) / 1e6, b.BLAS(), nil
}

func benchTorch(ctx context.Context, python, script string, layers, iters, threads int) (torchResult, error) {
	if _, err := os.Stat(script); err != nil {
		return torchResult{}, fmt.Errorf("%w (run from the repository root or pass -torch-script)", err)
	}
	cmd := exec.CommandContext(ctx, python, script, "--layers", fmt.Sprint(layers),
		"--iters", fmt.Sprint(iters), "--threads", fmt.Sprint(threads))
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return torchResult{}, fmt.Errorf("%s %s: %w\n%s", python, script, err, errb.String())
	}
	var tr torchResult
	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], &tr); err != nil {
		return torchResult{}, fmt.Errorf("reading %s output %q: %w", script, out.String(), err)
	}
	return tr, nil
}

// gflop is the matrix-product work of one step with per-chunk caching, in
// GFLOP (spec §9: 55.4 for the full model).
func gflop(c cpu.Config) float64 {
	S, D, A, F, Sv, L := float64(c.ActionSteps), float64(c.HiddenDim), float64(c.NumHeads*c.HeadDim),
		float64(c.FFNDim), float64(c.VideoTokens), float64(c.ContextTokens)
	perLayer := 2*S*D*A*3 + 2*2*S*(Sv+S)*A + 2*S*A*D + 2*S*D*A + 2*2*S*L*A + 2*S*A*D + 2*2*S*D*F
	return perLayer * float64(c.NumLayers) / 1e9
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
