package golden_test

import (
	"context"
	"io/fs"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/internal/npztest"
)

func TestTinyCases(t *testing.T) {
	for _, name := range golden.TinyCases() {
		c, err := golden.LoadTiny(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		d := c.Dims()
		if d.Layers != 2 || d.VideoTokens != 8 || c.AttnWidth != 32 || d.ContextTokens != 5 || d.TextDim != 32 ||
			d.ActionTokens != 32 || d.ActionDim != 7 {
			t.Errorf("%s: dims %s", name, d)
		}
		if len(c.StepTimesteps) != 4 || len(c.LoopSigmas) != 11 || len(c.LoopPred) != 10 || c.LoopActions == nil {
			t.Errorf("%s: extras missing: %d timesteps, %d sigmas, %d loop preds", name, len(c.StepTimesteps), len(c.LoopSigmas), len(c.LoopPred))
		}
		for _, k := range []string{"pred_noise_bf16", "pred_noise_f16", "loop_actions_bf16", "loop_actions_f16", "pred_noise_unmasked"} {
			if len(c.Extra[k]) != 224 {
				t.Errorf("%s: extra %s has %d elements", name, k, len(c.Extra[k]))
			}
		}
		if _, dup := c.Extra["pred_noise"]; dup {
			t.Errorf("%s: the reference prediction is also listed as an extra", name)
		}
	}
}

// TestParseErrors feeds archives that differ from a valid bundle-format
// golden in one respect each.
func TestParseErrors(t *testing.T) {
	c, err := golden.LoadTiny(t.Context(), "tiny/case_all.npz")
	if err != nil {
		t.Fatal(err)
	}
	valid := npztest.Bundle(c, c.Pred)
	edit := func(f func([]npztest.Array) []npztest.Array) []byte {
		arrays := f(append([]npztest.Array(nil), valid...))
		b, err := npztest.Bytes(arrays...)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	without := func(key string) func([]npztest.Array) []npztest.Array {
		return func(as []npztest.Array) []npztest.Array {
			var out []npztest.Array
			for _, a := range as {
				if a.Name != key {
					out = append(out, a)
				}
			}
			return out
		}
	}
	replace := func(a npztest.Array) func([]npztest.Array) []npztest.Array {
		return func(as []npztest.Array) []npztest.Array {
			for i := range as {
				if as[i].Name == a.Name {
					as[i] = a
				}
			}
			return as
		}
	}
	nan := append([]float32(nil), c.Chunk.Context...)
	nan[3] = float32(math.NaN())
	for _, tc := range []struct {
		name string
		img  []byte
		want string
	}{
		{"not a zip", []byte("hello"), "not a readable .npz"},
		{"missing array", edit(without("video_values")), `"video_values" is missing`},
		{"no prediction", edit(without("pred_noise")), "no reference prediction"},
		{"bad latents shape", edit(replace(npztest.Array{Name: "latents_action", Shape: []int{224}, Data: c.Latents})), "latents_action has shape [224]"},
		{"keys/values differ", edit(replace(npztest.Array{Name: "video_values", Shape: []int{1, 1, 16, 32}, Data: c.Chunk.VideoValues})), "video_values has shape [1 1 16 32], video_keys [2 1 8 32]"},
		{"mask length", edit(replace(npztest.Array{Name: "context_mask", Shape: []int{1, 4}, Data: []float32{1, 1, 1, 1}})), "context_mask has shape [1 4]"},
		{"NaN context", edit(replace(npztest.Array{Name: "context", Shape: []int{1, 5, 32}, Data: nan})), `"context" element 3 is NaN`},
		{"int timestep ok but two", edit(replace(npztest.Array{Name: "timestep", Shape: []int{2}, Data: []int64{1, 2}})), "timestep has 2 elements"},
	} {
		_, err := golden.Parse(t.Context(), tc.name, tc.img)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// The valid bundle parses, with a bool mask and a float64 array too.
	b := edit(replace(npztest.Array{Name: "context_mask", Shape: []int{1, 5}, Data: []bool{true, true, true, true, false}}))
	got, err := golden.Parse(t.Context(), "bool mask", b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Chunk.ContextMask[4] || !got.Chunk.ContextMask[0] || got.LoopInit != nil {
		t.Errorf("bool mask read as %v; loop %v", got.Chunk.ContextMask, got.LoopInit != nil)
	}
}

// BenchmarkParseTiny parses the embedded 43 KB tiny golden.
func BenchmarkParseTiny(b *testing.B) {
	img, err := fs.ReadFile(golden.Tiny(), "tiny/case_all.npz")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(img)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := golden.Parse(b.Context(), "tiny", img); err != nil {
			b.Fatal(err)
		}
	}
}

// LoadInputs reads a world model's inputs alone (no latents, timestep or
// prediction) as Load reads them from the full file; Load refuses such a
// file, and LoadInputs still checks what is there.
func TestLoadInputsWithoutPrediction(t *testing.T) {
	ctx := context.Background()
	full, err := golden.LoadTiny(ctx, "tiny/case_all.npz")
	if err != nil {
		t.Fatal(err)
	}
	var inputs []npztest.Array
	for _, a := range npztest.Bundle(full, full.Pred) {
		if strings.HasPrefix(a.Name, "video_") || strings.HasPrefix(a.Name, "context") {
			inputs = append(inputs, a)
		}
	}
	path := filepath.Join(t.TempDir(), "wm.npz")
	if err := npztest.Write(path, inputs...); err != nil {
		t.Fatal(err)
	}
	if _, err := golden.Load(ctx, path); err == nil || !strings.Contains(err.Error(), "latents_action") {
		t.Errorf("Load of an inputs-only file: err = %v, want latents_action missing", err)
	}
	c, err := golden.LoadInputs(ctx, path)
	if err != nil {
		t.Fatalf("LoadInputs: %v", err)
	}
	got, want := c.Chunk, full.Chunk
	want.VisibleVideo = 0 // not among the bundle's arrays
	if !reflect.DeepEqual(got, want) || c.Pred != nil || c.ActionTokens != 0 {
		t.Errorf("inputs differ from the full file's, or action side not empty (pred %d, S %d)", len(c.Pred), c.ActionTokens)
	}
	if err := c.Fits(full.Dims()); err != nil {
		t.Errorf("inputs-only case does not fit its contract: %v", err)
	}
	d := full.Dims()
	d.ContextTokens++
	if err := c.Fits(d); err == nil {
		t.Error("Fits accepted other input sizes")
	}
	bad := append([]npztest.Array{{Name: "pred_noise", Shape: []int{3}, Data: []float32{1, 2, 3}}}, inputs...)
	if err := npztest.Write(path, bad...); err != nil {
		t.Fatal(err)
	}
	if _, err := golden.LoadInputs(ctx, path); err == nil || !strings.Contains(err.Error(), "without latents_action") {
		t.Errorf("a prediction without latents: err = %v", err)
	}
}
