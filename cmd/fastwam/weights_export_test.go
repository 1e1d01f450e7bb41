package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/internal/testenv"
	"github.com/fastwam/actionexpert/safetensors"
	"github.com/fastwam/actionexpert/worldmodel"
)

// pythonWithTorch returns a python3 that imports torch and numpy
// (Debian's /usr/bin/python3 first), or skips the test (fails under CI).
func pythonWithTorch(t *testing.T) string {
	t.Helper()
	return testenv.Python3With(t, "torch, numpy", "install python3-torch for golden/export_world_model.py's test")
}

// sameValues checks that every tensor of got equals ref's tensor of the
// same name (read as float32 from both), for the names of got.
func sameValues(t *testing.T, got, ref string, want int) {
	t.Helper()
	g, err := safetensors.Open(got)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	r, err := safetensors.Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if n := len(g.Names()); n != want {
		t.Errorf("%s: %d tensors, want %d", got, n, want)
	}
	for _, n := range g.Names() {
		a, err := g.Float32(n, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := r.Float32(n, nil)
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if !slices.Equal(a, b) {
			t.Errorf("%s: %s differs from the input's", got, n)
		}
	}
}

// TestExportWorldModel runs golden/test_export_world_model.py, which
// exports a tiny synthetic FastWAM payload and Wan2.2 VAE (bf16, as
// released) with golden/export_world_model.py and checks its refusals,
// then reads what it wrote: the DiT files pass the contract with the
// payload's values (bf16 kept, or upcast to f32), and the VAE files load
// with worldmodel.LoadVAEWeights, with the input's values and no decoder.
func TestExportWorldModel(t *testing.T) {
	python := pythonWithTorch(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Join("..", "..", "golden", "test_export_world_model.py"), dir)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
		t.Fatalf("golden/test_export_world_model.py: %v\n%s", err, out)
	}
	c := worldConfig{HiddenDim: 32, FFNDim: 64, NumHeads: 4, HeadDim: 8, NumLayers: 2, TextDim: 24, FreqDim: 16, ProprioDim: 8, LatentChannels: 48}
	world, full := filepath.Join(dir, "world.safetensors"), filepath.Join(dir, "world_full_f32.safetensors")
	checkWorldWeightsFile(t, world, c, false, "BF16")
	checkWorldWeightsFile(t, full, c, true, "F32")
	ref := filepath.Join(dir, "reference_dit.safetensors")
	sameValues(t, world, ref, len(contractKeys(c, false)))
	sameValues(t, full, ref, len(contractKeys(c, true)))

	vref := filepath.Join(dir, "reference_vae.safetensors")
	for _, tc := range []struct{ name, dtype string }{{"vae.safetensors", "BF16"}, {"vae_f32.safetensors", "F32"}} {
		p := filepath.Join(dir, tc.name)
		w, err := worldmodel.LoadVAEWeights(p)
		if err != nil {
			t.Fatal(err)
		}
		if w.Dim != 4 {
			t.Errorf("%s: d = %d, want 4", tc.name, w.Dim)
		}
		sameValues(t, p, vref, 86)
		f, err := safetensors.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range f.Names() {
			info, _ := f.Info(n)
			if info.DType != tc.dtype || strings.HasPrefix(n, "decoder.") || strings.HasPrefix(n, "conv2.") {
				t.Errorf("%s: %s (%s) kept", tc.name, n, info.DType)
			}
		}
		f.Close()
	}
}
