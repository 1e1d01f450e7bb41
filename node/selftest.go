package node

import (
	"context"
	"fmt"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden"
)

// LoadGolden reads a golden .npz (the device bundle's
// golden/action_step_io.npz format, see package golden) and checks that it
// was recorded for the contract d. Loading stops when ctx is cancelled.
func LoadGolden(ctx context.Context, path string, d expert.Dims) (*golden.Case, error) {
	c, err := golden.Load(ctx, path)
	if err != nil {
		return nil, err
	}
	if err := c.Fits(d); err != nil {
		return nil, err
	}
	return c, nil
}

// SelfTestResult is the outcome of the start-up self-test.
type SelfTestResult struct {
	Status     string  // "passed", "failed", "skipped" or "none"
	Cosine     float64 // prediction against the golden (when run)
	MaxAbsDiff float64
	Elapsed    time.Duration
	Err        error // why it failed, when it did
}

// Passed reports whether the node may go active.
func (r SelfTestResult) Passed() bool { return r.Status != "failed" }

// String describes the result for logs and diagnostics.
func (r SelfTestResult) String() string {
	switch r.Status {
	case "passed":
		return fmt.Sprintf("passed (cosine %.7f, max |diff| %.3g, %v)", r.Cosine, r.MaxAbsDiff, r.Elapsed.Round(time.Millisecond))
	case "failed":
		return fmt.Sprintf("failed: %v", r.Err)
	case "skipped":
		return "skipped (self_test.skip)"
	}
	return "none (no self_test.golden)"
}

// RunSelfTest runs the golden step of g through b and compares the
// prediction with g's reference by cosine similarity; below minCosine, or
// on any error, it fails.
func RunSelfTest(ctx context.Context, b expert.Backend, g *golden.Case, minCosine float64) SelfTestResult {
	start := time.Now()
	if err := g.Fits(b.Dims()); err != nil {
		return SelfTestResult{Status: "failed", Err: err}
	}
	fail := func(err error) SelfTestResult {
		return SelfTestResult{Status: "failed", Err: err, Elapsed: time.Since(start)}
	}
	if err := b.BindChunk(ctx, &g.Chunk); err != nil {
		return fail(fmt.Errorf("bind golden chunk: %w", err))
	}
	pred := make([]float32, len(g.Pred))
	if err := b.Step(ctx, g.Latents, g.Timestep, pred); err != nil {
		return fail(fmt.Errorf("golden step: %w", err))
	}
	res := SelfTestResult{
		Cosine:     expert.Cosine(pred, g.Pred),
		MaxAbsDiff: expert.MaxAbsDiff(pred, g.Pred),
		Elapsed:    time.Since(start),
	}
	if i := expert.FirstNonFinite(pred); i >= 0 {
		res.Status, res.Err = "failed", fmt.Errorf("prediction[%d] is %v", i, pred[i])
		return res
	}
	if !(res.Cosine >= minCosine) {
		res.Status = "failed"
		res.Err = fmt.Errorf("cosine %.7f to the golden prediction is below %.7f (max |diff| %.3g)", res.Cosine, minCosine, res.MaxAbsDiff)
		return res
	}
	res.Status = "passed"
	return res
}
