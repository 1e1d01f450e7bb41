package cpu

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"slices"
	"testing"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/internal/testenv"
)

// The gate of the device bundle, and the agreement an fp32 implementation
// of the specification reaches on the tiny model (spec §10 expects about
// 1 - 1e-9; a structural bug lands far below either).
const (
	cosGate  = 0.9999
	cosTight = 1 - 1e-6
)

func tinyWeights(t testing.TB, name string) *Weights {
	t.Helper()
	b, err := fs.ReadFile(golden.Tiny(), name)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ParseWeights(context.Background(), name, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// blasChoices are the implementations to test: gonum always, OpenBLAS
// where it is installed.
func blasChoices(t *testing.T) []string {
	choices := []string{"gonum"}
	if _, _, err := PickGemm("openblas", "", 1); err == nil {
		choices = append(choices, "openblas")
	} else if testenv.InCI() {
		t.Fatalf("OpenBLAS not installed (%v): CI=true must test it; .ci/run installs libopenblas0-pthread", err)
	} else {
		t.Logf("OpenBLAS not installed, testing gonum only: %v", err)
	}
	return choices
}

func newTiny(t *testing.T, weights, blasName string, c *golden.Case) *Backend {
	t.Helper()
	w, err := tinyWeights(t, weights).ForInputs(c.VideoTokens, c.ContextTokens)
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(w, Options{BLAS: blasName})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Fits(b.Dims()); err != nil {
		t.Fatal(err)
	}
	return b
}

func compare(t *testing.T, what string, got, want []float32) {
	t.Helper()
	cos, maxErr := expert.Cosine(got, want), expert.MaxAbsDiff(got, want)
	t.Logf("%-28s cos %.12f (1-cos %.1e)  max|err| %.3g", what, cos, 1-cos, maxErr)
	if err := agrees(got, want); err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// maxErrTight bounds max |error| against the reference: the fp32 backend
// stays within about 2e-6 of it on the tiny model, so 2e-5 leaves a decade
// for other BLAS kernels while a scaled or shifted prediction (whose cosine
// may still be 1) lands orders of magnitude above.
const maxErrTight = 2e-5

// agrees reports how got fails to match the reference want: a cosine below
// the gate or below the fp32 agreement, a max |error| above maxErrTight, or
// a NaN in either measure (which no comparison with < would catch).
func agrees(got, want []float32) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d values, the reference has %d", len(got), len(want))
	}
	cos, maxErr := expert.Cosine(got, want), expert.MaxAbsDiff(got, want)
	switch {
	case !(cos >= cosGate):
		return fmt.Errorf("cosine %.9f below the %.4f gate", cos, cosGate)
	case !(cos >= cosTight):
		return fmt.Errorf("cosine %.12f passes the gate but is below %.7f: something is structurally off", cos, cosTight)
	case !(maxErr <= maxErrTight):
		return fmt.Errorf("max |error| %.3g above %.0e (cosine %.12f)", maxErr, maxErrTight, cos)
	}
	return nil
}

// TestAgreesRejects checks the comparison itself: a prediction scaled by 2
// (cosine 1), a NaN, an offset and a truncated prediction must all fail it,
// and the reference itself must pass.
func TestAgreesRejects(t *testing.T) {
	c, err := golden.LoadTiny(context.Background(), golden.TinyCases()[0])
	if err != nil {
		t.Fatal(err)
	}
	want := c.Pred
	edit := func(f func(v []float32) []float32) []float32 { return f(slices.Clone(want)) }
	if err := agrees(slices.Clone(want), want); err != nil {
		t.Fatalf("the reference against itself: %v", err)
	}
	for name, got := range map[string][]float32{
		"scaled x2": edit(func(v []float32) []float32 {
			for i := range v {
				v[i] *= 2
			}
			return v
		}),
		"one NaN":         edit(func(v []float32) []float32 { v[3] = float32(math.NaN()); return v }),
		"offset 1e-3":     edit(func(v []float32) []float32 { v[0] += 1e-3; return v }),
		"all NaN":         edit(func(v []float32) []float32 { return slices.Repeat([]float32{float32(math.NaN())}, len(v)) }),
		"one value short": want[:len(want)-1],
	} {
		if err := agrees(got, want); err == nil {
			t.Errorf("%s: passed the golden comparison", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestGoldenSteps compares single steps at several timesteps with the
// independent PyTorch reference, for both video-visibility cases.
func TestGoldenSteps(t *testing.T) {
	ctx := context.Background()
	for _, blasName := range blasChoices(t) {
		for _, name := range golden.TinyCases() {
			c, err := golden.LoadTiny(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(blasName+"/"+name, func(t *testing.T) {
				b := newTiny(t, "tiny/weights.safetensors", blasName, c)
				if err := b.BindChunk(ctx, &c.Chunk); err != nil {
					t.Fatal(err)
				}
				pred := make([]float32, len(c.Latents))
				if err := b.Step(ctx, c.Latents, c.Timestep, pred); err != nil {
					t.Fatal(err)
				}
				compare(t, "pred_noise", pred, c.Pred)
				if len(c.StepTimesteps) == 0 {
					t.Fatal("golden has no per-timestep steps")
				}
				for i, tau := range c.StepTimesteps {
					if err := b.Step(ctx, c.StepLatents[i], tau, pred); err != nil {
						t.Fatal(err)
					}
					compare(t, "step tau="+ftoa(tau), pred, c.StepPred[i])
				}
			})
		}
	}
}

// TestGoldenLoop runs the full N = 10 Euler loop from the golden's initial
// noise and compares every step's prediction and the final actions.
func TestGoldenLoop(t *testing.T) {
	ctx := context.Background()
	for _, blasName := range blasChoices(t) {
		for _, name := range golden.TinyCases() {
			c, err := golden.LoadTiny(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			t.Run(blasName+"/"+name, func(t *testing.T) {
				b := newTiny(t, "tiny/weights.safetensors", blasName, c)
				s, err := expert.NewSchedule(len(c.LoopSigmas)-1, expert.DefaultShift)
				if err != nil {
					t.Fatal(err)
				}
				for i, sg := range s.Sigmas {
					if d := sg - c.LoopSigmas[i]; d > 1e-6 || d < -1e-6 {
						t.Errorf("sigma[%d] = %v, PyTorch %v", i, sg, c.LoopSigmas[i])
					}
				}
				res, err := expert.Denoise(ctx, b, &c.Chunk, s, c.LoopInit, func(st expert.StepInfo) {
					compare(t, "loop pred step "+itoa(st.Index), st.Pred, c.LoopPred[st.Index])
				})
				if err != nil {
					t.Fatal(err)
				}
				compare(t, "loop actions", res.Actions, c.LoopActions)
			})
		}
	}
}

// TestGoldenLowPrecisionWeights loads the bf16 (under the checkpoint
// prefix) and f16 copies of the weights and compares with the reference
// computed from the same rounded weights.
func TestGoldenLowPrecisionWeights(t *testing.T) {
	ctx := context.Background()
	c, err := golden.LoadTiny(t.Context(), "tiny/case_all.npz")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ file, suffix string }{
		{"tiny/weights_bf16.safetensors", "_bf16"},
		{"tiny/weights_f16.safetensors", "_f16"},
	} {
		t.Run(tc.suffix[1:], func(t *testing.T) {
			b := newTiny(t, tc.file, "gonum", c)
			pred := make([]float32, len(c.Latents))
			if err := b.BindChunk(ctx, &c.Chunk); err != nil {
				t.Fatal(err)
			}
			if err := b.Step(ctx, c.Latents, c.Timestep, pred); err != nil {
				t.Fatal(err)
			}
			compare(t, "pred_noise"+tc.suffix, pred, c.Extra["pred_noise"+tc.suffix])
			// The rounded weights give a (slightly) different prediction:
			// ours must be nearer their reference than the f32 one.
			own, f32 := expert.Cosine(pred, c.Extra["pred_noise"+tc.suffix]), expert.Cosine(pred, c.Pred)
			if own <= f32 {
				t.Errorf("prediction is nearer the f32 reference (1-cos %.1e) than the %s one (%.1e)", 1-f32, tc.suffix[1:], 1-own)
			}
			s, _ := expert.NewSchedule(10, expert.DefaultShift)
			res, err := expert.Denoise(ctx, b, &c.Chunk, s, c.LoopInit, nil)
			if err != nil {
				t.Fatal(err)
			}
			compare(t, "loop_actions"+tc.suffix, res.Actions, c.Extra["loop_actions"+tc.suffix])
		})
	}
}

// TestContextMaskMatters fails if the context mask is ignored: attending the
// masked token must move the prediction off the golden, onto the golden's
// unmasked prediction.
func TestContextMaskMatters(t *testing.T) {
	ctx := context.Background()
	c, err := golden.LoadTiny(t.Context(), "tiny/case_all.npz")
	if err != nil {
		t.Fatal(err)
	}
	masked := 0
	for _, m := range c.Chunk.ContextMask {
		if !m {
			masked++
		}
	}
	if masked == 0 {
		t.Fatal("golden context mask masks nothing; the test would prove nothing")
	}
	b := newTiny(t, "tiny/weights.safetensors", "gonum", c)
	open := c.Chunk
	open.ContextMask = make([]bool, len(c.Chunk.ContextMask))
	for i := range open.ContextMask {
		open.ContextMask[i] = true
	}
	if err := b.BindChunk(ctx, &open); err != nil {
		t.Fatal(err)
	}
	pred := make([]float32, len(c.Latents))
	if err := b.Step(ctx, c.Latents, c.Timestep, pred); err != nil {
		t.Fatal(err)
	}
	cos := expert.Cosine(pred, c.Pred)
	t.Logf("ignoring the mask: cosine to the golden %.4f", cos)
	if !(cos < cosGate) { // a NaN must fail too
		t.Errorf("attending the masked token left the prediction at cosine %.6f to the masked golden", cos)
	}
	if un, ok := c.Extra["pred_noise_unmasked"]; ok {
		compare(t, "pred_noise_unmasked", pred, un)
	}
}

func ftoa(f float32) string { return fmtFloat(float64(f)) }
