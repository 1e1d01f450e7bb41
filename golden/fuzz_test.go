package golden_test

import (
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden"
)

// FuzzParse feeds arbitrary images to Parse: it must not panic, must name
// the file in every error, and a case it accepts must be consistent (the
// sizes its shapes give, finite values, extras within their bound). The
// seeds in testdata/fuzz/FuzzParse are small numpy-written goldens, some
// with hostile headers (testdata/make_npz_refs.py).
func FuzzParse(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := golden.Parse(t.Context(), "fuzz.npz", b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "golden: fuzz.npz") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		d := c.Dims()
		n := d.ActionTokens * d.ActionDim
		if n == 0 || len(c.Latents) != n || len(c.Pred) != n {
			t.Fatalf("latents %d, pred %d, dims %s", len(c.Latents), len(c.Pred), d)
		}
		if len(c.Chunk.VideoKeys) != d.KVLen() || len(c.Chunk.VideoValues) != d.KVLen() ||
			len(c.Chunk.Context) != d.ContextLen() || len(c.Chunk.ContextMask) != d.ContextTokens {
			t.Fatalf("chunk sizes %d %d %d %d, dims %s", len(c.Chunk.VideoKeys), len(c.Chunk.VideoValues),
				len(c.Chunk.Context), len(c.Chunk.ContextMask), d)
		}
		if c.Chunk.VisibleVideo < 0 || c.Chunk.VisibleVideo > d.VideoTokens {
			t.Fatalf("visible video %d of %d", c.Chunk.VisibleVideo, d.VideoTokens)
		}
		needed := len(c.Latents) + len(c.Pred) + 2*d.KVLen() + d.ContextLen() + d.ContextTokens + 2 // timestep, visible_video
		for _, v := range [][]float32{c.Latents, c.Pred, c.Chunk.VideoKeys, c.Chunk.VideoValues, c.Chunk.Context, c.LoopInit, c.LoopActions} {
			if i := expert.FirstNonFinite(v); i >= 0 {
				t.Fatalf("element %d is %v", i, v[i])
			}
		}
		for _, rows := range [][][]float32{c.StepLatents, c.StepPred, c.LoopPred, c.LoopLatents} {
			for _, r := range rows {
				if len(r) != n {
					t.Fatalf("row of %d, want %d", len(r), n)
				}
				needed += n
			}
		}
		if len(c.StepLatents) != len(c.StepTimesteps) || (c.LoopInit != nil && len(c.LoopPred) != len(c.LoopSigmas)-1) {
			t.Fatalf("%d step latents for %d timesteps, %d loop preds for %d sigmas", len(c.StepLatents),
				len(c.StepTimesteps), len(c.LoopPred), len(c.LoopSigmas))
		}
		needed += len(c.StepTimesteps) + len(c.LoopSigmas)
		extras := 0
		for _, v := range c.Extra {
			extras += len(v)
		}
		if extras > needed {
			t.Fatalf("extras hold %d elements, the case %d", extras, needed)
		}
	})
}
