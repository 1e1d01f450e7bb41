package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/safetensors"
)

// smallWeightsFlags is a small configuration of every dimension.
var smallWeightsFlags = []string{"-layers", "2", "-heads", "2", "-head-dim", "8", "-text-dim", "16", "-hidden", "32",
	"-ffn", "48", "-freq-dim", "16", "-action-tokens", "4", "-video-tokens", "5", "-context-tokens", "3"}

func makeWeights(t *testing.T, path string, extra ...string) {
	t.Helper()
	code, out, stderr := runCmd(t, append(append([]string{"weights", "make", "-o", path}, smallWeightsFlags...), extra...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	if !strings.Contains(out, "wrote "+path) {
		t.Errorf("output: %s", out)
	}
}

// stepWith loads the weights at path with the CPU backend's loader (the
// configuration from the file's metadata) and runs one step on a seeded
// chunk.
func stepWith(t *testing.T, path string) ([]float32, *cpu.Weights) {
	t.Helper()
	w, err := cpu.LoadWeights(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := cpu.Config{HiddenDim: 32, FFNDim: 48, NumHeads: 2, HeadDim: 8, NumLayers: 2, TextDim: 16, FreqDim: 16,
		Eps: 1e-6, ActionDim: 7, ActionSteps: 4, VideoTokens: 5, ContextTokens: 3}
	if w.Config() != want {
		t.Fatalf("config %+v, want %+v", w.Config(), want)
	}
	b, err := cpu.New(w, cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d := b.Dims()
	ctx := context.Background()
	if err := b.BindChunk(ctx, d.RandomChunk(3)); err != nil {
		t.Fatal(err)
	}
	x := make([]float32, d.LatentLen())
	for i := range x {
		x[i] = float32(i%5) - 2
	}
	pred := make([]float32, d.LatentLen())
	if err := b.Step(ctx, x, 0.5, pred); err != nil {
		t.Fatal(err)
	}
	if k := expert.FirstNonFinite(pred); k >= 0 {
		t.Fatalf("pred[%d] = %v", k, pred[k])
	}
	return pred, w
}

func TestWeightsMake(t *testing.T) {
	dir := t.TempDir()
	f32, f16, bf16 := filepath.Join(dir, "w32.safetensors"), filepath.Join(dir, "w16.safetensors"), filepath.Join(dir, "wbf16.safetensors")
	makeWeights(t, f32)
	makeWeights(t, f16, "-dtype", "f16")
	makeWeights(t, bf16, "-dtype", "bf16")

	ref, w := stepWith(t, f32)
	var norm float64
	for _, v := range ref {
		norm += float64(v) * float64(v)
	}
	if norm == 0 {
		t.Fatal("the step predicts all zeros")
	}
	// The same seed in f16 and bf16: the same model, rounded.
	for _, tc := range []struct {
		path   string
		minCos float64
	}{{f16, 0.9999}, {bf16, 0.999}} {
		got, _ := stepWith(t, tc.path)
		if c := expert.Cosine(got, ref); c < tc.minCos {
			t.Errorf("%s: step cosine %v to the f32 file's, want >= %v", filepath.Base(tc.path), c, tc.minCos)
		}
	}
	// Sizes: every parameter the backend counts, at the dtype's width.
	for _, tc := range []struct {
		path  string
		dtype string
		size  int64
	}{{f32, "F32", 4}, {f16, "F16", 2}, {bf16, "BF16", 2}} {
		f, err := safetensors.Open(tc.path)
		if err != nil {
			t.Fatal(err)
		}
		var data int64
		for _, n := range f.Names() {
			info, _ := f.Info(n)
			if info.DType != tc.dtype {
				t.Errorf("%s: %s has dtype %s", tc.path, n, info.DType)
			}
			data += int64(info.NumElements())
		}
		f.Close()
		if data != int64(w.NumParams()) {
			t.Errorf("%s: %d elements, the backend counts %d parameters", tc.path, data, w.NumParams())
		}
		st, _ := os.Stat(tc.path)
		if st.Size() < data*tc.size || st.Size() > data*tc.size+64<<10 {
			t.Errorf("%s: %d bytes for %d parameters of %d bytes", tc.path, st.Size(), data, tc.size)
		}
	}

	// Same seed, same bytes; another seed, other values.
	again := filepath.Join(dir, "again.safetensors")
	makeWeights(t, again)
	a, _ := os.ReadFile(f32)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("the same flags and seed wrote different files")
	}
	other := filepath.Join(dir, "other.safetensors")
	makeWeights(t, other, "-seed", "2")
	if got, _ := stepWith(t, other); expert.Cosine(got, ref) > 0.99 {
		t.Error("seed 2 gives the model of seed 1")
	}
}

func TestWeightsMakeErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	if err := os.WriteFile(path, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-o", path}, "already exists; want a new file (replace it with -force)"},
		{nil, "weights make needs -o FILE"},
		{[]string{"-o", filepath.Join(dir, "x"), "-dtype", "f64"}, `-dtype must be f32, f16 or bf16, got "f64"`},
		{[]string{"-o", filepath.Join(dir, "x"), "-heads", "0"}, "cpu: config num_heads must be positive, got 0"},
		{[]string{"-o", filepath.Join(dir, "x"), "-head-dim", "7"}, "attn_head_dim must be even for RoPE, got 7"},
		{[]string{"-o", filepath.Join(dir, "x"), "-layers", "100000"}, "num_layers is 100000, above the limit of 1024"},
		{[]string{"-o", filepath.Join(dir, "no", "x")}, "does not exist"},
		{[]string{"-o", dir, "-force"}, "is not a regular file"},
	} {
		code, _, stderr := runCmd(t, append([]string{"weights", "make"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %s; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if b, _ := os.ReadFile(path); string(b) != "keep me" {
		t.Error("the existing file was changed without -force")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the failed runs left files: %v", entries)
	}
	// -force replaces it.
	makeWeights(t, path, "-force")
	if _, err := cpu.LoadWeights(context.Background(), path, nil); err != nil {
		t.Fatal(err)
	}
	// The help is the command's.
	code, out, _ := runCmd(t, "help", "weights", "make")
	if code != 0 || !strings.Contains(out, "usage: fastwam weights make -o FILE") || !strings.Contains(out, "-hidden") {
		t.Errorf("help: exit %d\n%s", code, out)
	}
}
