package cpu

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/golden"
)

// tensorEntry is one tensor to write into a test safetensors image.
type tensorEntry struct {
	dtype string
	shape []int
	data  []byte
}

// rewrite reads the tiny weights, lets edit change the tensor set, and
// writes a new image with the same metadata.
func rewrite(t *testing.T, edit func(map[string]tensorEntry)) []byte {
	t.Helper()
	m, meta := tinyTensors(t)
	edit(m)
	return image(t, meta, m, nil)
}

func TestWeightErrorsNameTheTensor(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(map[string]tensorEntry)
		want []string
	}{
		{"missing", func(m map[string]tensorEntry) { delete(m, "blocks.1.cross_attn.norm_k.weight") },
			[]string{"missing blocks.1.cross_attn.norm_k.weight"}},
		{"extra", func(m map[string]tensorEntry) { m["blocks.9.surprise"] = tensorEntry{"F32", []int{1}, make([]byte, 4)} },
			[]string{"unexpected tensor blocks.9.surprise"}},
		{"misshaped", func(m map[string]tensorEntry) {
			e := m["blocks.0.self_attn.q.weight"]
			e.shape = []int{e.shape[1], e.shape[0]}
			m["blocks.0.self_attn.q.weight"] = e
		}, []string{"blocks.0.self_attn.q.weight has shape [64 32], want [32 64]"}},
		{"several at once", func(m map[string]tensorEntry) {
			delete(m, "head.bias")
			delete(m, "time_projection.1.weight")
		}, []string{"missing head.bias", "missing time_projection.1.weight"}},
		{"integer dtype", func(m map[string]tensorEntry) {
			e := m["head.bias"]
			e.dtype = "I32"
			m["head.bias"] = e
		}, []string{"head.bias has dtype I32, want F32, F16 or BF16"}},
		{"NaN weight", func(m map[string]tensorEntry) {
			b := append([]byte(nil), m["blocks.0.norm3.bias"].data...)
			binary.LittleEndian.PutUint32(b[8:], math.Float32bits(float32(math.NaN())))
			m["blocks.0.norm3.bias"] = tensorEntry{"F32", []int{64}, b}
		}, []string{"blocks.0.norm3.bias[2] is NaN"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseWeights(context.Background(), "w.safetensors", rewrite(t, tc.edit), nil)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestWeightFileErrors(t *testing.T) {
	dir := t.TempDir()
	src, err := fs.ReadFile(golden.Tiny(), "tiny/weights.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	trunc := filepath.Join(dir, "trunc.safetensors")
	os.WriteFile(trunc, src[:len(src)-100], 0o644)
	if _, err := LoadWeights(context.Background(), trunc, nil); err == nil || !strings.Contains(err.Error(), "trunc.safetensors") {
		t.Errorf("truncated: %v", err)
	}
	if _, err := LoadWeights(context.Background(), filepath.Join(dir, "absent.safetensors"), nil); err == nil {
		t.Error("absent file loaded")
	}
	// No metadata and no JSON beside: the configuration is unknown.
	noMeta := rewrite(t, func(map[string]tensorEntry) {})
	noMeta = stripMetadata(t, noMeta)
	p := filepath.Join(dir, "plain.safetensors")
	os.WriteFile(p, noMeta, 0o644)
	if _, err := LoadWeights(context.Background(), p, nil); err == nil || !strings.Contains(err.Error(), "configuration is unknown") {
		t.Errorf("no config: %v", err)
	}
	// A JSON beside the file supplies it.
	cfgJSON, _ := fs.ReadFile(golden.Tiny(), "tiny/config.json")
	os.WriteFile(filepath.Join(dir, "plain.json"), cfgJSON, 0o644)
	if _, err := LoadWeights(context.Background(), p, nil); err != nil {
		t.Errorf("config beside the weights: %v", err)
	}
	// A wrong explicit configuration reports the mismatch by name.
	cfg := FullConfig()
	if _, err := LoadWeights(context.Background(), p, &cfg); err == nil || !strings.Contains(err.Error(), "action_encoder.weight has shape [64 7], want [1024 7]") {
		t.Errorf("full config on tiny weights: %v", err)
	}
}

func stripMetadata(t *testing.T, img []byte) []byte {
	t.Helper()
	n := binary.LittleEndian.Uint64(img)
	var h map[string]any
	if err := json.Unmarshal(img[8:8+n], &h); err != nil {
		t.Fatal(err)
	}
	delete(h, "__metadata__")
	hb, _ := json.Marshal(h)
	for len(hb)%8 != 0 {
		hb = append(hb, ' ')
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(hb)))
	return append(append(out, hb...), img[8+n:]...)
}

func TestStepInputErrors(t *testing.T) {
	ctx := context.Background()
	c, err := golden.LoadTiny(t.Context(), "tiny/case_all.npz")
	if err != nil {
		t.Fatal(err)
	}
	b := newTiny(t, "tiny/weights.safetensors", "gonum", c)
	pred := make([]float32, len(c.Latents))
	if err := b.Step(ctx, c.Latents, 1000, pred); err == nil || !strings.Contains(err.Error(), "without a bound chunk") {
		t.Errorf("step before bind: %v", err)
	}
	bad := c.Chunk
	bad.VideoKeys = bad.VideoKeys[:10]
	if err := b.BindChunk(ctx, &bad); err == nil || !strings.Contains(err.Error(), "video_keys has 10 elements") {
		t.Errorf("short keys: %v", err)
	}
	if err := b.BindChunk(ctx, &c.Chunk); err != nil {
		t.Fatal(err)
	}
	nan := append([]float32(nil), c.Latents...)
	nan[7] = float32(math.NaN())
	for _, tc := range []struct {
		name    string
		latents []float32
		tau     float32
		pred    []float32
		want    string
	}{
		{"short latents", c.Latents[1:], 1000, pred, "latents_action has 223 elements"},
		{"NaN latents", nan, 1000, pred, "latents_action[7] is NaN"},
		{"Inf timestep", c.Latents, float32(math.Inf(1)), pred, "timestep is +Inf"},
		{"short pred", c.Latents, 1000, pred[:3], "prediction buffer has 3 elements"},
	} {
		if err := b.Step(ctx, tc.latents, tc.tau, tc.pred); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	// A failed bind leaves no chunk bound: nothing half-computed is used.
	if err := b.BindChunk(ctx, &bad); err == nil {
		t.Fatal("bad chunk bound")
	}
	if err := b.Step(ctx, c.Latents, 1000, pred); err == nil {
		t.Error("step after a failed bind used the previous chunk")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.BindChunk(cctx, &c.Chunk); err == nil {
		t.Error("bind with a cancelled context succeeded")
	}
}
