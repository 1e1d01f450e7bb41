package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/safetensors"
	"github.com/fastwam/actionexpert/worldmodel"
)

// contractKeys is the DiT weight file contract's key set for c, written
// here from the contract (docs/world-model.md) and spec §6.2/§6.3, not
// from the generator: spec §6.2's keys without "mixtures.video.", the
// last layer only its modulation, self_attn.k, self_attn.v and
// self_attn.norm_k (all of it, and head.*, when full), and the proprio
// encoder's two.
func contractKeys(c worldConfig, full bool) map[string][]int {
	D, F, T := c.HiddenDim, c.FFNDim, c.TextDim
	k := map[string][]int{
		"patch_embedding.weight": {D, c.LatentChannels, 1, 2, 2}, "patch_embedding.bias": {D},
		"text_embedding.0.weight": {D, T}, "text_embedding.0.bias": {D},
		"text_embedding.2.weight": {D, D}, "text_embedding.2.bias": {D},
		"time_embedding.0.weight": {D, c.FreqDim}, "time_embedding.0.bias": {D},
		"time_embedding.2.weight": {D, D}, "time_embedding.2.bias": {D},
		"time_projection.1.weight": {6 * D, D}, "time_projection.1.bias": {6 * D},
		"proprio_encoder.weight": {T, c.ProprioDim}, "proprio_encoder.bias": {T},
	}
	if full {
		k["head.head.weight"], k["head.head.bias"], k["head.modulation"] = []int{4 * c.LatentChannels, D}, []int{4 * c.LatentChannels}, []int{1, 2, D}
	}
	for l := range c.NumLayers {
		p := fmt.Sprintf("blocks.%d.", l)
		k[p+"modulation"] = []int{1, 6, D}
		k[p+"self_attn.k.weight"], k[p+"self_attn.k.bias"] = []int{D, D}, []int{D}
		k[p+"self_attn.v.weight"], k[p+"self_attn.v.bias"] = []int{D, D}, []int{D}
		k[p+"self_attn.norm_k.weight"] = []int{D}
		if l == c.NumLayers-1 && !full {
			continue
		}
		k[p+"self_attn.q.weight"], k[p+"self_attn.q.bias"] = []int{D, D}, []int{D}
		k[p+"self_attn.o.weight"], k[p+"self_attn.o.bias"] = []int{D, D}, []int{D}
		k[p+"self_attn.norm_q.weight"] = []int{D}
		for _, x := range []string{"q", "k", "v", "o"} {
			k[p+"cross_attn."+x+".weight"], k[p+"cross_attn."+x+".bias"] = []int{D, D}, []int{D}
		}
		k[p+"cross_attn.norm_q.weight"], k[p+"cross_attn.norm_k.weight"] = []int{D}, []int{D}
		k[p+"norm3.weight"], k[p+"norm3.bias"] = []int{D}, []int{D}
		k[p+"ffn.0.weight"], k[p+"ffn.0.bias"] = []int{F, D}, []int{F}
		k[p+"ffn.2.weight"], k[p+"ffn.2.bias"] = []int{D, F}, []int{D}
	}
	return k
}

// checkWorldWeightsFile checks a world-model weight file against the DiT
// weight file contract for the configuration want: exactly the contract's
// keys (full: with head.* and the whole last layer), their shapes, one
// storage type of F32/F16/BF16, finite values, and the
// fastwam_world_config metadata holding exactly the nine integers of want.
//
// DiT loader: when h-dit's loader of this contract is merged, load path
// with it here too (and compare its configuration with want), so that
// every world-model file these tests write is also read by the product.
func checkWorldWeightsFile(t *testing.T, path string, want worldConfig, full bool, dtype string) {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := contractKeys(want, full)
	got := f.Names()
	for _, n := range got {
		shape, ok := keys[n]
		if !ok {
			t.Errorf("%s: key %q is not in the contract", path, n)
			continue
		}
		info, _ := f.Info(n)
		if !slices.Equal(info.Shape, shape) {
			t.Errorf("%s: %s has shape %v, want %v", path, n, info.Shape, shape)
		}
		if info.DType != dtype {
			t.Errorf("%s: %s has dtype %s, want %s", path, n, info.DType, dtype)
		}
		v, err := f.Float32(n, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("%s: %s[%d] = %v", path, n, i, x)
			}
		}
	}
	for n := range keys {
		if !slices.Contains(got, n) {
			t.Errorf("%s: contract key %q missing", path, n)
		}
	}
	raw, ok := f.Metadata()["fastwam_world_config"]
	if !ok {
		t.Fatalf("%s: no fastwam_world_config metadata", path)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		t.Fatalf("%s: fastwam_world_config %q: %v", path, raw, err)
	}
	wantKeys := []string{"ffn_dim", "freq_dim", "head_dim", "hidden_dim", "latent_channels", "num_heads", "num_layers", "proprio_dim", "text_dim"}
	if k := slices.Sorted(maps.Keys(m)); !slices.Equal(k, wantKeys) {
		t.Errorf("%s: fastwam_world_config keys %v, want %v", path, k, wantKeys)
	}
	var c worldConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil || c != want {
		t.Errorf("%s: fastwam_world_config %s (%v), want %+v", path, raw, err, want)
	}
}

// tensorStats returns the mean and standard deviation of a tensor's values.
func tensorStats(t *testing.T, path, name string) (mean, std float64) {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	v, err := f.Float32(name, nil)
	if err != nil {
		t.Fatal(err)
	}
	return valueStats(v)
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, stderr := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("%v: exit %d\n%s\n%s", args, code, out, stderr)
	}
	return out
}

func TestWeightsMakeWorld(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "world.safetensors")
	out := mustRun(t, "weights", "make", "-model", "world", "-o", p)
	if !strings.Contains(out, "world config: 2 layers, 4x8 heads, hidden 32") {
		t.Errorf("output: %s", out)
	}
	checkWorldWeightsFile(t, p, tinyWorldConfig, false, "F32")

	// Every config value from its flag; the unused tensors kept; bf16, f16.
	c := worldConfig{HiddenDim: 48, FFNDim: 40, NumHeads: 2, HeadDim: 24, NumLayers: 3, TextDim: 20, FreqDim: 10, ProprioDim: 5, LatentChannels: 6}
	flags := []string{"-hidden", "48", "-ffn", "40", "-heads", "2", "-head-dim", "24", "-layers", "3", "-text-dim", "20", "-freq-dim", "10",
		"-proprio-dim", "5", "-latent-channels", "6"}
	for _, tc := range []struct {
		dtype, st string
		full      bool
	}{{"f32", "F32", true}, {"bf16", "BF16", false}, {"f16", "F16", true}} {
		q := filepath.Join(dir, tc.dtype+".safetensors")
		args := append([]string{"weights", "make", "-model", "world", "-o", q, "-dtype", tc.dtype}, flags...)
		if tc.full {
			args = append(args, "-keep-unused")
		}
		mustRun(t, args...)
		checkWorldWeightsFile(t, q, c, tc.full, tc.st)
	}

	// Spec §7's values: matrices N/sqrt(fan-in), gains 1 + 0.2N, biases
	// 0.1N, modulation 0.3N (checked on tensors large enough to tell).
	big := filepath.Join(dir, "big.safetensors")
	mustRun(t, "weights", "make", "-model", "world", "-o", big, "-heads", "4", "-head-dim", "32", "-ffn", "256", "-layers", "2")
	for _, tc := range []struct {
		name      string
		mean, std float64
	}{
		{"blocks.0.ffn.0.weight", 0, 1 / math.Sqrt(128)},
		{"blocks.0.ffn.2.weight", 0, 1 / math.Sqrt(256)},
		{"patch_embedding.weight", 0, 1 / math.Sqrt(48*4)},
		{"time_projection.1.bias", 0, 0.1},
		{"blocks.0.modulation", 0, 0.3},
		{"blocks.1.modulation", 0, 0.3},
	} {
		mean, std := tensorStats(t, big, tc.name)
		if math.Abs(mean-tc.mean) > 0.2*tc.std || math.Abs(std/tc.std-1) > 0.1 {
			t.Errorf("%s: mean %.4f, std %.4f; want about %.4f and %.4f", tc.name, mean, std, tc.mean, tc.std)
		}
	}
	var gains []float32
	f, err := safetensors.Open(big)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range f.Names() {
		if strings.HasSuffix(n, "norm_q.weight") || strings.HasSuffix(n, "norm_k.weight") || strings.HasSuffix(n, "norm3.weight") {
			v, _ := f.Float32(n, nil)
			gains = append(gains, v...)
		}
	}
	f.Close()
	var gm, gs float64
	for _, g := range gains {
		gm += float64(g)
	}
	gm /= float64(len(gains))
	for _, g := range gains {
		gs += (float64(g) - gm) * (float64(g) - gm)
	}
	if gs = math.Sqrt(gs / float64(len(gains))); math.Abs(gm-1) > 0.03 || math.Abs(gs/0.2-1) > 0.15 {
		t.Errorf("%d gains: mean %.4f, std %.4f; want about 1 and 0.2", len(gains), gm, gs)
	}

	// Same flags and seed, same bytes; another seed, other bytes.
	again := filepath.Join(dir, "again.safetensors")
	mustRun(t, "weights", "make", "-model", "world", "-o", again)
	other := filepath.Join(dir, "other.safetensors")
	mustRun(t, "weights", "make", "-model", "world", "-o", other, "-seed", "2")
	a, _ := os.ReadFile(p)
	b, _ := os.ReadFile(again)
	o, _ := os.ReadFile(other)
	if !bytes.Equal(a, b) {
		t.Error("the same flags and seed wrote different files")
	}
	if len(a) != len(o) || bytes.Equal(a, o) {
		t.Error("seed 2 wrote the bytes of seed 1 (or another layout)")
	}
}

func TestWeightsMakeVAE(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "vae.safetensors")
	mustRun(t, "weights", "make", "-model", "vae", "-vae-dim", "4", "-o", p)
	w, err := worldmodel.LoadVAEWeights(p)
	if err != nil {
		t.Fatal(err)
	}
	if w.Dim != 4 {
		t.Errorf("d = %d, want 4", w.Dim)
	}
	// The key set and shapes are those of golden/vae/weights.safetensors,
	// which golden/make_vae_golden.py wrote at d = 4 in the released layout.
	ref, err := safetensors.Open("../../golden/vae/weights.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	f, err := safetensors.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if g, r := slices.Sorted(slices.Values(f.Names())), slices.Sorted(slices.Values(ref.Names())); !slices.Equal(g, r) || len(g) != 86 {
		t.Fatalf("keys %v\nwant (golden/vae) %v", g, r)
	}
	for _, n := range ref.Names() {
		gi, _ := f.Info(n)
		ri, _ := ref.Info(n)
		if !slices.Equal(gi.Shape, ri.Shape) || gi.DType != "F32" {
			t.Errorf("%s: %s %v, want F32 %v", n, gi.DType, gi.Shape, ri.Shape)
		}
	}
	mean, std := tensorStats(t, p, "encoder.head.2.weight")
	if math.Abs(mean) > 0.02 || math.Abs(std*math.Sqrt(16*27)-1) > 0.05 {
		t.Errorf("encoder.head.2.weight: mean %.4f, std %.4f; want N(0, 1)/sqrt(16·27)", mean, std)
	}

	// The default width is spec §9's 16; bf16 loads too; same seed, same bytes.
	d16 := filepath.Join(dir, "d16.safetensors")
	mustRun(t, "weights", "make", "-model", "vae", "-dtype", "bf16", "-o", d16)
	if w, err := worldmodel.LoadVAEWeights(d16); err != nil || w.Dim != 16 {
		t.Fatalf("d = 16 file: %v", err)
	}
	again := filepath.Join(dir, "again.safetensors")
	mustRun(t, "weights", "make", "-model", "vae", "-vae-dim", "4", "-o", again)
	a, _ := os.ReadFile(p)
	b, _ := os.ReadFile(again)
	if !bytes.Equal(a, b) {
		t.Error("the same flags and seed wrote different files")
	}
}

func TestWeightsMakeText(t *testing.T) {
	dir := t.TempDir()
	const task = "put the bowl on the plate"
	out := mustRun(t, "weights", "make", "-model", "text", "-task", task, "-tokens", "5", "-rows", "12", "-text-dim", "6", "-o", dir)
	if !strings.Contains(out, "12 × 6 BF16, 5 tokens") {
		t.Errorf("output: %s", out)
	}
	e, err := worldmodel.TextCache{Dir: dir, Rows: 12, Dim: 6, Encoder: "random"}.Lookup(task)
	if err != nil {
		t.Fatal(err)
	}
	nonzero := 0
	for i, v := range e.Text {
		if v != 0 {
			nonzero++
		}
		if i >= 5*6 && v != 0 {
			t.Fatalf("padding value %d is %v", i, v)
		}
	}
	if e.Tokens != 5 || nonzero < 25 {
		t.Errorf("%d tokens, %d nonzero values; want 5 tokens of random values", e.Tokens, nonzero)
	}
	// F32, another encoder name; the defaults (128 rows of 32).
	f32 := t.TempDir()
	mustRun(t, "weights", "make", "-model", "text", "-task", task, "-dtype", "f32", "-encoder", "x", "-o", f32)
	if e, err := (worldmodel.TextCache{Dir: f32, Rows: 128, Dim: 32, Encoder: "x"}).Lookup(task); err != nil || e.Tokens != 16 {
		t.Fatalf("f32 entry: %v", err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-task", task, "-o", dir}, "already exists; want a new file"},
		{[]string{"-o", dir}, "-model text needs -task INSTRUCTION"},
		{[]string{"-task", "x", "-o", dir, "-dtype", "f16"}, "-dtype must be bf16"},
		{[]string{"-task", "x", "-o", dir, "-tokens", "200"}, "text entry with 200 tokens (-tokens): want 1..128"},
		{[]string{"-task", "x", "-o", dir, "-rows", "0"}, "text entry of 0 × 32"},
		{[]string{"-task", "x", "-o", filepath.Join(dir, "none")}, "must be an existing folder"},
		{[]string{"-task", "x", "-o", dir, "-layers", "2"}, "-layers 2 does not apply to -model text"},
	} {
		code, _, stderr := runCmd(t, append([]string{"weights", "make", "-model", "text"}, tc.args...)...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, %s; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the failed runs left files: %v", entries)
	}
}

func TestWeightsMakeWorldErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "w.safetensors")
	if err := os.WriteFile(path, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	x := filepath.Join(dir, "x")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-model", "world", "-o", path}, "already exists; want a new file (replace it with -force)"},
		{[]string{"-model", "vae", "-o", path}, "already exists; want a new file (replace it with -force)"},
		{[]string{"-model", "dit", "-o", x}, `-model must be expert, world, vae or text, got "dit"`},
		{[]string{"-model", "world", "-o", x, "-head-dim", "16", "-hidden", "64"}, "head_dim 16: the 3-D RoPE splits it into 6 + 5 + 5 dims"},
		{[]string{"-model", "world", "-o", x, "-head-dim", "7", "-hidden", "28"}, "head_dim 7: the 3-D RoPE splits it into 3 + 2 + 2 dims"},
		{[]string{"-model", "world", "-o", x, "-hidden", "48"}, "num_heads*head_dim is 4*8 = 32: want hidden_dim 48"},
		{[]string{"-model", "world", "-o", x, "-layers", "0"}, "world config num_layers is 0: want 1..1024"},
		{[]string{"-model", "world", "-o", x, "-heads", "-1"}, "world config hidden_dim is -8: want 1..65536"},
		{[]string{"-model", "world", "-o", x, "-proprio-dim", "0"}, "world config proprio_dim is 0"},
		{[]string{"-model", "world", "-o", x, "-latent-channels", "70000"}, "world config latent_channels is 70000"},
		{[]string{"-model", "world", "-o", x, "-freq-dim", "255"}, "world config freq_dim is 255: want an even number"},
		{[]string{"-model", "world", "-o", x, "-action-dim", "7"}, "-action-dim 7 does not apply to -model world"},
		{[]string{"-model", "world", "-o", x, "-vae-dim", "7"}, "-vae-dim 7 does not apply to -model world"},
		{[]string{"-model", "vae", "-o", x, "-vae-dim", "0"}, "-vae-dim is 0: want 1..1024"},
		{[]string{"-model", "vae", "-o", x, "-hidden", "8"}, "-hidden 8 does not apply to -model vae (it reads -vae-dim)"},
		{[]string{"-o", x, "-proprio-dim", "8"}, "-proprio-dim 8 does not apply to -model expert"},
		{[]string{"-model", "vae", "-o", x, "-dtype", "f64"}, `-dtype must be f32, f16 or bf16, got "f64"`},
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
	mustRun(t, "weights", "make", "-model", "vae", "-vae-dim", "2", "-o", path, "-force")
	if _, err := worldmodel.LoadVAEWeights(path); err != nil {
		t.Fatal(err)
	}
}
