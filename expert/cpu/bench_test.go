package cpu

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/gonum/blas"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/openblas"
)

// benchLayers lets a quick run use fewer layers than the full 30
// (FASTWAM_BENCH_LAYERS); per-step time scales linearly with layers.
func benchLayers(b *testing.B) int {
	if s := os.Getenv("FASTWAM_BENCH_LAYERS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			b.Fatalf("FASTWAM_BENCH_LAYERS=%q: want a positive integer", s)
		}
		return n
	}
	return FullConfig().NumLayers
}

func benchBackend(b *testing.B, cfg Config, blasName string) (*Backend, *expert.Chunk) {
	b.Helper()
	w, err := RandomWeights(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	be, err := New(w, Options{BLAS: blasName})
	if err != nil {
		b.Skip(err)
	}
	d := be.Dims()
	c := d.RandomChunk(2)
	if err := be.BindChunk(context.Background(), c); err != nil {
		b.Fatal(err)
	}
	return be, c
}

func benchStep(b *testing.B, cfg Config, blasName string) {
	be, _ := benchBackend(b, cfg, blasName)
	d := be.Dims()
	x := expert.Noise(5, d.LatentLen())
	pred := make([]float32, len(x))
	ctx := context.Background()
	if err := be.Step(ctx, x, 1000, pred); err != nil { // warm the modulation cache
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if err := be.Step(ctx, x, 1000, pred); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/step")
	b.ReportMetric(float64(cfg.NumLayers), "layers")
	b.ReportMetric(cfg.StepFlops()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkProductsOpenBLAS times OpenBLAS's own threaded Sgemm (2 threads)
// on each of the full-width step's weight-product shapes, with the weights
// read from a 128 MiB arena so they come from memory as the step's do.
// `fastwam bench` prints the same figures interleaved with the step's.
func BenchmarkProductsOpenBLAS(b *testing.B) {
	l, err := openblas.Load("")
	if err != nil {
		b.Skip(err)
	}
	defer l.SetThreads(1) // the backend's setting
	arena := make([]float32, 32<<20)
	for i := range arena {
		arena[i] = float32(i%997)/997 - 0.5
	}
	for _, p := range FullConfig().StepProducts() {
		if p.PerStep == 1 { // the action encoder and the head: negligible
			continue
		}
		b.Run(fmt.Sprintf("%s_%dx%dx%d", strings.ReplaceAll(strings.ReplaceAll(p.Name, ",", ""), " ", "_"), p.M, p.K, p.N), func(b *testing.B) {
			l.SetThreads(2)
			in, out := make([]float32, p.M*p.K), make([]float32, p.M*p.N)
			off := 0
			for b.Loop() {
				if off+p.N*p.K > len(arena) {
					off = 0
				}
				l.Sgemm(blas.NoTrans, blas.Trans, p.M, p.N, p.K, 1, in, p.K, arena[off:], p.K, 0, out, p.N)
				off += p.N * p.K
			}
			b.ReportMetric(p.Flops()*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

func benchChunk(b *testing.B, cfg Config, blasName string) {
	be, c := benchBackend(b, cfg, blasName)
	s, _ := expert.NewSchedule(expert.DefaultSteps, expert.DefaultShift)
	x0 := expert.Noise(5, be.Dims().LatentLen())
	ctx := context.Background()
	if _, err := expert.Denoise(ctx, be, c, s, x0, nil); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		if _, err := expert.Denoise(ctx, be, c, s, x0, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func tinyConfig() Config {
	return Config{HiddenDim: 64, FFNDim: 128, NumHeads: 2, HeadDim: 16, NumLayers: 2, TextDim: 32,
		FreqDim: 256, Eps: 1e-6, ActionDim: 7, VideoTokens: 8, ContextTokens: 5}
}

func fullConfig(b *testing.B) Config {
	c := FullConfig()
	c.NumLayers = benchLayers(b)
	return c
}

func BenchmarkStepTinyGonum(b *testing.B)    { benchStep(b, tinyConfig(), "gonum") }
func BenchmarkStepTinyOpenBLAS(b *testing.B) { benchStep(b, tinyConfig(), "openblas") }
func BenchmarkChunkTiny(b *testing.B)        { benchChunk(b, tinyConfig(), "auto") }
func BenchmarkStepFullOpenBLAS(b *testing.B) { benchStep(b, fullConfig(b), "openblas") }
func BenchmarkStepFullGonum(b *testing.B)    { benchStep(b, fullConfig(b), "gonum") }
func BenchmarkChunkFull(b *testing.B)        { benchChunk(b, fullConfig(b), "auto") }
