package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/gonum/blas"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/internal/openblas"
	"github.com/fastwam/actionexpert/internal/progress"
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
	fs := newFlags("bench", stdout, stderr, "[flags]\n\nTimes one denoise step of the CPU backend at full width with random weights and,\ninterleaved with the steps in the same run, the backend's BLAS (Sgemm) on each of the\nstep's own weight-product shapes with cold weights, and prints the step's GFLOP/s next\nto Sgemm's and their ratio. Then it times the same step in PyTorch\n(golden/bench_torch.py) with the same thread count, and prints that ratio too.")
	layers := fs.Int("layers", cpu.FullConfig().NumLayers, "transformer blocks (30 is the full model; fewer for a quick run)")
	iters := fs.Int("iters", 5, "timed rounds (one step and the step's Sgemm calls each) after one warm-up round")
	threads := fs.Int("threads", 2, "threads: the Go step's worker goroutines, OpenBLAS's own threads in the sgemm reference, and PyTorch's")
	blasName := fs.String("blas", "auto", "Go BLAS: auto, openblas or gonum")
	python := fs.String("python", "/usr/bin/python3", "Python with torch, for the baseline")
	script := fs.String("torch-script", "golden/bench_torch.py", "the PyTorch benchmark script")
	noTorch := fs.Bool("no-torch", false, "skip the PyTorch baseline")
	progressMode := progressFlag(fs, "for more than 1 layer")
	if err := fs.parse(args); err != nil {
		return err
	}
	// Bounds before anything is allocated: the weights alone take 136 MB a
	// layer, the model has 30, and OpenBLAS has at most 64 threads.
	if err := checkRanges(
		intRange("layers", *layers, 1, cpu.FullConfig().NumLayers, "the model's"),
		intRange("iters", *iters, 1, maxBenchIters, ""),
		intRange("threads", *threads, 1, maxBenchThreads, "OpenBLAS's MAX_THREADS"),
	); err != nil {
		return err
	}
	progressTo, err := progressOut(*progressMode, stderr, *layers > 1)
	if err != nil {
		return err
	}
	cfg := cpu.FullConfig()
	cfg.NumLayers = *layers
	fmt.Fprintf(stdout, "CPU backend, %d layers, hidden %d, %dx%d heads, ffn %d, Sv %d, L %d, %d threads\n",
		cfg.NumLayers, cfg.HiddenDim, cfg.NumHeads, cfg.HeadDim, cfg.FFNDim, cfg.VideoTokens, cfg.ContextTokens, *threads)
	fmt.Fprintf(stdout, "machine %s, %d CPUs, load average %s at the start\n", cpuModel(), runtime.NumCPU(), loadAverage())
	res, err := benchGo(ctx, cfg, *iters, cpu.Options{BLAS: *blasName, Threads: *threads}, progressTo)
	if err != nil {
		return err
	}
	defer fmt.Fprintf(stdout, "load average %s at the end (other processes share the cores: compare figures of the same round)\n", loadAverage())
	goMs := median(res.stepMs)
	printGoBench(stdout, cfg, res)
	if *noTorch {
		return nil
	}
	debug.FreeOSMemory()
	tr, err := benchTorch(ctx, *python, *script, *layers, *iters, *threads)
	if err != nil {
		return fmt.Errorf("PyTorch baseline (use -no-torch to skip): %w", err)
	}
	fmt.Fprintf(stdout, "torch  step median %9.1f ms  bind chunk %8.1f ms  %.1f GFLOP/s  [torch %s, %v]\n",
		tr.MedianMs, tr.PrepareMs, cfg.StepFlops()/1e9/(tr.MedianMs/1e3), tr.TorchVersion, tr.BLAS)
	fmt.Fprintf(stdout, "ratio  go/torch per step: %.2f\n", goMs/tr.MedianMs)
	return nil
}

// goBench is what benchGo measured: per-step and per-call times of the
// rounds after the warm-up one.
type goBench struct {
	stepMs   []float64 // one per round
	prepMs   float64   // BindChunk
	desc     string    // the BLAS
	refDesc  string    // how the reference Sgemm ran
	products []productTimes
	arenaMiB int
}

// productTimes are the seconds of every timed Sgemm call of one shape.
type productTimes struct {
	cpu.Product
	secs []float64
}

// gflops returns p's rate in GFLOP/s for one call of s seconds.
func (p productTimes) gflops(s float64) float64 { return p.Flops() / s / 1e9 }

// coldArenaFloats sizes the weight arena the Sgemm timings read from: four
// times a 32 MiB last-level cache, so every call's weights come from memory
// as the step's do (a step reads every weight once).
const coldArenaFloats = 32 << 20

// Limits of the bench flags.
const (
	maxBenchIters   = 1000
	maxBenchThreads = 64 // OpenBLAS's MAX_THREADS in Debian's build
)

// openBLASIdle is how long benchGo lets OpenBLAS's threads go idle after
// threaded calls before it times a step: they spin on a core for about
// 2^28 cycles (0.1 s here) after each call, and a step run meanwhile
// would share a core with them.
const openBLASIdle = 250 * time.Millisecond

// warmUp is how long benchGo runs untimed steps before each timed one: a
// step right after the pause runs up to a third slower (cores clocked
// down, goroutine threads asleep), which a chunk's back-to-back steps do
// not see.
const warmUp = 100 * time.Millisecond

// benchGo times, in each of iters+1 rounds (the first is the warm-up), one
// step and then every one of the step's weight-product shapes as many times
// as a step computes it. The reference is the BLAS as a caller would use it
// on its own: OpenBLAS with opts.Threads of its own threads (set for these
// calls only; the backend keeps it at one thread per call and splits the
// work itself), or gonum, which divides a product among goroutines.
// Interleaving puts the step and Sgemm under the same load, which on a
// shared machine matters more than anything else.
func benchGo(ctx context.Context, cfg cpu.Config, iters int, opts cpu.Options, progressTo io.Writer) (goBench, error) {
	if progressTo != nil {
		fmt.Fprintf(progressTo, "bench: making random weights for %d layers, then %d rounds (the first a warm-up)\n", cfg.NumLayers, iters+1)
	}
	w, err := cpu.RandomWeightsContext(ctx, cfg, 1)
	if err != nil {
		return goBench{}, err
	}
	b, err := cpu.New(w, opts)
	if err != nil {
		return goBench{}, err
	}
	defer b.Close()
	d := b.Dims()
	c := d.RandomChunk(2)
	t0 := time.Now()
	if err := b.BindChunk(ctx, c); err != nil {
		return goBench{}, err
	}
	res := goBench{prepMs: float64(time.Since(t0)) / 1e6, desc: b.BLAS()}
	gemm := b.Gemm()
	lib, isOpenBLAS := gemm.(*openblas.Lib)
	res.refDesc = "gonum Sgemm, its own goroutines"
	if isOpenBLAS {
		res.refDesc = fmt.Sprintf("OpenBLAS Sgemm, %d OpenBLAS threads", b.Workers())
	}
	x := expert.Noise(5, d.LatentLen())
	pred := make([]float32, len(x))

	// The arena holds every shape's weights at a rotating offset; inputs
	// and outputs are small and stay in cache, as the step's activations do.
	shapes := cfg.StepProducts()
	arena := make([]float32, max(coldArenaFloats, 2*maxWeight(shapes)))
	for i := range arena {
		arena[i] = float32(i%997)/997 - 0.5
	}
	res.arenaMiB = len(arena) * 4 >> 20
	var in, out []float32
	for _, p := range shapes {
		res.products = append(res.products, productTimes{Product: p})
		in = growTo(in, p.M*p.K)
		out = growTo(out, p.M*p.N)
	}
	for i := range in {
		in[i] = float32(i%89)/89 - 0.5
	}
	off := 0
	prog := progress.New(progressTo, "bench", "rounds", iters+1, progress.DefaultInterval)
	for round := 0; round <= iters; round++ {
		prog.Update(round)
		if isOpenBLAS && round > 0 {
			// Let OpenBLAS's threads go idle, then warm the cores (and
			// the goroutines' threads) up again with untimed steps, as
			// the steps of a chunk follow one another.
			select {
			case <-ctx.Done():
				return goBench{}, fmt.Errorf("bench: %w", ctx.Err())
			case <-time.After(openBLASIdle):
			}
			for t := time.Now(); time.Since(t) < warmUp; {
				if err := b.Step(ctx, x, 1000, pred); err != nil {
					return goBench{}, err
				}
			}
		}
		t := time.Now()
		if err := b.Step(ctx, x, 1000, pred); err != nil {
			return goBench{}, err
		}
		if round > 0 {
			res.stepMs = append(res.stepMs, float64(time.Since(t))/1e6)
		}
		if isOpenBLAS {
			lib.SetThreads(b.Workers())
		}
		for i := range res.products {
			p := &res.products[i]
			for range p.PerStep {
				if err := ctx.Err(); err != nil {
					return goBench{}, fmt.Errorf("bench: %w", err)
				}
				if off+p.N*p.K > len(arena) {
					off = 0
				}
				t := time.Now()
				gemm.Sgemm(blas.NoTrans, blas.Trans, p.M, p.N, p.K, 1, in, p.K, arena[off:], p.K, 0, out, p.N)
				if round > 0 {
					p.secs = append(p.secs, time.Since(t).Seconds())
				}
				off += p.N * p.K
			}
		}
		if isOpenBLAS {
			lib.SetThreads(1)
		}
	}
	prog.Done(iters + 1)
	return res, nil
}

func maxWeight(ps []cpu.Product) int {
	n := 0
	for _, p := range ps {
		n = max(n, p.N*p.K)
	}
	return n
}

func growTo(s []float32, n int) []float32 {
	if len(s) < n {
		return make([]float32, n)
	}
	return s
}

// dominant returns the index of the product shape that does the most of
// the step's work.
func dominant(ps []productTimes) int {
	d := 0
	for i, p := range ps {
		if float64(p.PerStep)*p.Flops() > float64(ps[d].PerStep)*ps[d].Flops() {
			d = i
		}
	}
	return d
}

// roundRatios returns, for every timed round, the step's GFLOP/s, Sgemm's
// GFLOP/s on shape p over that round's calls (the ones right after the
// step), and their ratio.
func roundRatios(flops float64, stepMs []float64, p productTimes) (step, sgemm, ratio []float64) {
	for i, ms := range stepMs {
		calls := p.secs[i*p.PerStep : (i+1)*p.PerStep]
		var sec float64
		for _, c := range calls {
			sec += c
		}
		st, sg := flops/1e9/(ms/1e3), float64(len(calls))*p.Flops()/1e9/sec
		step, sgemm, ratio = append(step, st), append(sgemm, sg), append(ratio, st/sg)
	}
	return step, sgemm, ratio
}

// printGoBench prints the step's rate, Sgemm's rate on each of the step's
// shapes, which shape dominates the step's work, and the ratios, round by
// round and their median.
func printGoBench(w io.Writer, cfg cpu.Config, r goBench) {
	flops := cfg.StepFlops()
	stepMed, stepBest := median(r.stepMs), slices.Min(r.stepMs)
	fmt.Fprintf(w, "go     step median %9.1f ms  bind chunk %8.1f ms  %.1f GFLOP/s (best step %.1f ms, %.1f GFLOP/s)  [%s]\n",
		stepMed, r.prepMs, flops/1e9/(stepMed/1e3), stepBest, flops/1e9/(stepBest/1e3), r.desc)
	fmt.Fprintf(w, "       (each timed step follows %v of untimed ones, started %v after OpenBLAS's own threads last ran)\n", warmUp, openBLASIdle)
	fmt.Fprintf(w, "sgemm  the step's weight products, %s, timed between the steps (weights cold, from a %d MiB arena):\n", r.refDesc, r.arenaMiB)
	fmt.Fprintf(w, "  %-24s %-16s %10s %11s %7s %15s %13s\n", "shape [MxK]x[KxN]", "layers", "calls/step", "GFLOP/step", "share", "median GFLOP/s", "best GFLOP/s")
	var ideal float64 // seconds if every product ran at its median Sgemm rate
	for _, p := range r.products {
		share := float64(p.PerStep) * p.Flops()
		med := p.gflops(median(p.secs))
		ideal += share / 1e9 / med
		fmt.Fprintf(w, "  %-24s %-16s %10d %11.3f %6.1f%% %15.1f %13.1f\n", fmt.Sprintf("[%dx%d]x[%dx%d]", p.M, p.K, p.K, p.N), p.Name,
			p.PerStep, share/1e9, 100*share/flops, med, p.gflops(slices.Min(p.secs)))
	}
	att := cfg.AttentionFlops()
	fmt.Fprintf(w, "  %-24s %-16s %10s %11.3f %6.1f%%\n", "per-head attention", "(not timed)", "", att/1e9, 100*att/flops)
	p := r.products[dominant(r.products)]
	step, sgemm, ratio := roundRatios(flops, r.stepMs, p)
	fmt.Fprintf(w, "rounds step GFLOP/s / sgemm GFLOP/s on [%dx%d]x[%dx%d] right after it:", p.M, p.K, p.K, p.N)
	for i := range ratio {
		fmt.Fprintf(w, "  %.1f/%.1f=%.3f", step[i], sgemm[i], ratio[i])
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "ratio  step/sgemm on the dominant shape [%dx%d]x[%dx%d] (%s, %.1f%% of the step): %.3f (median of %d rounds; min %.3f, max %.3f)\n",
		p.M, p.K, p.K, p.N, p.Name, 100*float64(p.PerStep)*p.Flops()/flops, median(ratio), len(ratio), slices.Min(ratio), slices.Max(ratio))
	weighted := (flops - att) / 1e9 / ideal
	fmt.Fprintf(w, "ratio  step/sgemm on all its weight products at their median rates (%.1f GFLOP/s FLOP-weighted, attention excluded): %.3f\n",
		weighted, flops/1e9/(stepMed/1e3)/weighted)
}

// cpuModel is the first "model name" of /proc/cpuinfo, or "unknown CPU".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

// loadAverage is the 1-minute load average of /proc/loadavg, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "unknown"
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

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
