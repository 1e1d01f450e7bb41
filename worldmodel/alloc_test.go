package worldmodel

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/internal/testenv"
)

// wantNoAllocs fails the test if n (allocations a call) is not 0; under the
// race detector, with OpenBLAS, it only logs n: sync.Pool (in purego's
// SyscallN) then drops items at random, by design. .ci/run runs these
// tests without -race too.
func wantNoAllocs(t *testing.T, withOpenBLAS bool, what string, n float64) {
	t.Helper()
	switch {
	case n == 0:
	case raceEnabled && withOpenBLAS:
		t.Logf("%v allocations per %s under the race detector (sync.Pool drops items at random)", n, what)
	default:
		t.Errorf("%v allocations per %s, want 0", n, what)
	}
}

// openBLAS returns OpenBLAS's sgemm, or skips (fails under CI=true) where
// it does not load.
func openBLAS(t *testing.T) cpu.Gemm {
	t.Helper()
	g, _, err := cpu.PickGemm("openblas", "", 0)
	if err != nil {
		testenv.Missing(t, "OpenBLAS not installed here (%v)", err)
	}
	return g
}

// TestVAEEncodeAllocatesNothing: after the first Encode, an Encode
// allocates nothing, with the element-wise work and the copies shared among 2
// workers (one 224 × 448 frame at width 4 is large enough to share), both
// with a sgemm that allocates nothing of its own and with OpenBLAS.
func TestVAEEncodeAllocatesNothing(t *testing.T) {
	w := randomVAEWeights(4, 7)
	img := make([]float32, 3*FrameHeight*FrameWidth)
	for i := range img {
		img[i] = float32(i%251)/125 - 1
	}
	gemms := map[string]func(*testing.T) cpu.Gemm{
		"naive":    func(*testing.T) cpu.Gemm { return naiveGemm{} },
		"openblas": openBLAS,
	}
	for name, g := range gemms {
		t.Run(name, func(t *testing.T) {
			e, err := NewVAEEncoder(w, FrameHeight, FrameWidth, g(t))
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			e.pool.close()
			e.pool = newWorkerPool(2)
			lat := make([]float32, LatentChannels*(FrameHeight/16)*(FrameWidth/16))
			run := func() {
				if err := e.Encode(lat, img); err != nil {
					t.Fatal(err)
				}
			}
			run()
			// The runtime remakes a wait record (sudog) for the workers'
			// channel hand-overs now and then (after a collection empties
			// its cache): more runs keep the integer mean at 0 unless an
			// Encode itself allocates.
			runs := 2
			if name == "openblas" {
				runs = 6
			}
			wantNoAllocs(t, name == "openblas", "Encode", testing.AllocsPerRun(runs, run))
		})
	}
}

// TestModelRunAllocatesNothing: with OpenBLAS, a steady-state Model.Run
// (same instruction, so the text cache is not read) allocates nothing.
func TestModelRunAllocatesNothing(t *testing.T) {
	g := openBLAS(t)
	_, opts, task := tinyModel(t)
	opts.Gemm = g
	m, err := LoadModel(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	obs := Observation{
		Images:      []Image{randomImage(r, 96, 80), randomImage(r, 64, 64)},
		State:       []float32{0.1, -0.2, 0.9, 1, -2, 0.5, 0.02, -0.01},
		Instruction: task,
	}
	for _, f16 := range []bool{false, true} {
		out := m.NewOutput(f16)
		run := func() {
			if err := m.Run(t.Context(), obs, out); err != nil {
				t.Fatal(err)
			}
		}
		run()
		wantNoAllocs(t, true, fmt.Sprintf("Run (f16 %v)", f16), testing.AllocsPerRun(3, run))
	}
}
