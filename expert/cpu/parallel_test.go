package cpu

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/blas"

	"github.com/fastwam/actionexpert/expert"
)

// midConfig is large enough that the widest products (q,k,v and the FFN)
// are split into column blocks, with widths that are not multiples of the
// block, an odd head count and a visible-video count below the cached one.
func midConfig() Config {
	return Config{HiddenDim: 200, FFNDim: 1100, NumHeads: 5, HeadDim: 40, NumLayers: 2, TextDim: 72,
		FreqDim: 256, Eps: 1e-6, ActionDim: 7, ActionSteps: 32, VideoTokens: 30, ContextTokens: 19}
}

// TestStepIndependentOfWorkers: sharing the column blocks of the products,
// the attention heads and the element-wise rows among workers must not
// change a single bit of the prediction (which also depends on BindChunk's
// keys and values), for any worker count, with either BLAS.
func TestStepIndependentOfWorkers(t *testing.T) {
	cfg := midConfig()
	w, err := RandomWeights(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, bl := range blasChoices(t) {
		var ref []float32
		for _, n := range []int{1, 2, 3, 7} {
			b, err := New(w, Options{BLAS: bl, Threads: n})
			if err != nil {
				t.Fatal(err)
			}
			c := b.Dims().RandomChunk(4)
			c.VisibleVideo = 21
			c.ContextMask[3] = false
			if err := b.BindChunk(context.Background(), c); err != nil {
				t.Fatal(err)
			}
			lat := expert.Noise(9, b.Dims().LatentLen())
			pred := make([]float32, len(lat))
			if err := b.Step(context.Background(), lat, 952.38, pred); err != nil {
				t.Fatal(err)
			}
			if n == 1 {
				ref = pred
				continue
			}
			for i := range pred {
				if math.Float32bits(pred[i]) != math.Float32bits(ref[i]) {
					t.Errorf("%s, %d workers: pred[%d] = %v, one worker gives %v", bl, n, i, pred[i], ref[i])
					break
				}
			}
		}
	}
}

// gemmCall is the shape of one recorded Sgemm call.
type gemmCall struct {
	tA, tB  blas.Transpose
	m, n, k int
}

// recordingGemm records every call's shape and forwards it.
type recordingGemm struct {
	Gemm
	calls []gemmCall
}

func (r *recordingGemm) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	r.calls = append(r.calls, gemmCall{tA, tB, m, n, k})
	r.Gemm.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
}

// TestStepProductsAreTheStep records the Sgemm calls of one step (one
// worker, so no product is split) and checks them against StepProducts:
// every weight product's shape and count, and the whole step's work
// against StepFlops. The totals are the spec's (§9, §11) less the time MLP,
// which the backend computes once per timestep.
func TestStepProductsAreTheStep(t *testing.T) {
	full := FullConfig()
	if got, want := full.StepFlops(), 55_416_324_096.0-15_204_352; got != want {
		t.Errorf("full model: StepFlops %.0f, want %.0f (spec §9 less the time MLP)", got, want)
	}
	// Tiny: spec §11's 4,186,112 less a time MLP of 2·(256·64 + 64·64 + 64·384).
	if got, want := tinyConfig().StepFlops(), 4_186_112.0-2*(256*64+64*64+64*384); got != want {
		t.Errorf("tiny model: StepFlops %.0f, want %.0f (spec §11 less the time MLP)", got, want)
	}

	// No product this narrow is split into blocks (TestLinearBlocks).
	cfg := Config{HiddenDim: 128, FFNDim: 384, NumHeads: 3, HeadDim: 40, NumLayers: 2, TextDim: 72,
		FreqDim: 256, Eps: 1e-6, ActionDim: 7, ActionSteps: 32, VideoTokens: 30, ContextTokens: 19}
	w, err := RandomWeights(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(w, Options{BLAS: "gonum", Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.BindChunk(context.Background(), b.Dims().RandomChunk(4)); err != nil {
		t.Fatal(err)
	}
	lat := expert.Noise(9, b.Dims().LatentLen())
	pred := make([]float32, len(lat))
	if err := b.Step(context.Background(), lat, 500, pred); err != nil { // fills the modulation cache
		t.Fatal(err)
	}
	rec := &recordingGemm{Gemm: b.gemm}
	b.gemm = rec
	if err := b.Step(context.Background(), lat, 500, pred); err != nil {
		t.Fatal(err)
	}
	weights := map[gemmCall]int{}
	var flops float64
	for _, c := range rec.calls {
		flops += 2 * float64(c.m) * float64(c.n) * float64(c.k)
		if c.tA == blas.NoTrans && c.tB == blas.Trans && c.m == cfg.ActionSteps && c.k != cfg.HeadDim {
			weights[c]++ // attention scores have k = Dh; weight products never do here
		}
	}
	want := map[gemmCall]int{}
	for _, p := range cfg.StepProducts() {
		want[gemmCall{blas.NoTrans, blas.Trans, p.M, p.N, p.K}] += p.PerStep
	}
	for c, n := range want {
		if weights[c] != n {
			t.Errorf("product %dx%dx%d: the step made %d calls, StepProducts says %d", c.m, c.n, c.k, weights[c], n)
		}
	}
	for c, n := range weights {
		if _, ok := want[c]; !ok {
			t.Errorf("the step made %d calls of %dx%dx%d, which StepProducts does not list", n, c.m, c.n, c.k)
		}
	}
	if flops != cfg.StepFlops() {
		t.Errorf("the step's Sgemm calls do %.0f FLOPs, StepFlops says %.0f", flops, cfg.StepFlops())
	}
}

// TestLinearBlocks checks the blocked product against a float64 product
// written out, on a width of two whole blocks and a remainder, with every
// worker count, and linearThen's activation on every element.
func TestLinearBlocks(t *testing.T) {
	const m, k, n = 32, 40, 2*linearBlock + 77
	r := rand.New(rand.NewPCG(11, 12))
	fill := func(n int) []float32 {
		s := make([]float32, n)
		for i := range s {
			s[i] = float32(r.NormFloat64())
		}
		return s
	}
	in, w, bias := fill(m*k), fill(n*k), fill(n)
	for _, bl := range blasChoices(t) {
		gemm, _, err := PickGemm(bl, "", 1)
		if err != nil {
			t.Fatal(err)
		}
		for _, workers := range []int{1, 2, 5} {
			b := &Backend{gemm: gemm, workers: workers}
			out := fill(m * n) // overwritten, not accumulated
			b.linear(out, in, m, k, w, bias, n)
			// linearThen's activation must reach every element once.
			act := fill(m * n)
			b.linearThen(act, in, m, k, w, bias, n, func(s []float32) {
				for i := range s {
					s[i] = 3*s[i] + 1
				}
			})
			for i := range m {
				for j := range n {
					want := float64(bias[j])
					for p := range k {
						want += float64(in[i*k+p]) * float64(w[j*k+p])
					}
					if d := math.Abs(float64(out[i*n+j]) - want); d > 1e-5*(1+math.Abs(want)) {
						t.Fatalf("%s, %d workers: out[%d,%d] = %v, want %v", bl, workers, i, j, out[i*n+j], want)
					}
					if want := 3*out[i*n+j] + 1; act[i*n+j] != want {
						t.Fatalf("%s, %d workers: activated out[%d,%d] = %v, want 3·%v + 1", bl, workers, i, j, act[i*n+j], out[i*n+j])
					}
				}
			}
		}
	}
}
