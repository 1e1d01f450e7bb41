package cpu

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/safetensors"
)

// CheckpointPrefix is the prefix of the action expert's keys inside a
// Fast-WAM training checkpoint's mixture-of-transformers state dict.
const CheckpointPrefix = "mixtures.action."

// ConfigMetadataKey is the safetensors metadata entry holding the JSON
// configuration (written by golden/export_checkpoint.py).
const ConfigMetadataKey = "fastwam_config"

// layerWeights are one block's parameters. Self-attention q, k and v are
// stored fused as one [3A, D] matrix so one matrix product serves all three.
type layerWeights struct {
	mod             []float32 // [6, D]
	qkv, qkvB       []float32 // [3A, D], [3A]
	normQ, normK    []float32 // [A]
	selfO, selfOB   []float32 // [D, A], [D]
	crossQ, crossQB []float32
	crossNormQ      []float32
	crossK, crossKB []float32
	crossNormK      []float32
	crossV, crossVB []float32
	crossO, crossOB []float32
	norm3W, norm3B  []float32 // [D]
	ffn0, ffn0B     []float32 // [F, D], [F]
	ffn2, ffn2B     []float32 // [D, F], [D]
}

// Weights are the parameters of the action expert, upcast to float32.
type Weights struct {
	cfg                   Config
	actionEnc, actionEncB []float32 // [D, a], [D]
	text0, text0B         []float32 // [D, T]
	text2, text2B         []float32 // [D, D]
	time0, time0B         []float32 // [D, f]
	time2, time2B         []float32 // [D, D]
	timeProj, timeProjB   []float32 // [6D, D]
	head, headB           []float32 // [a, D]
	layers                []layerWeights
}

// Config returns the architecture the weights were loaded for.
func (w *Weights) Config() Config { return w.cfg }

// ForInputs returns the same weights (sharing their memory) sized for
// chunks of videoTokens cached video tokens and contextTokens context
// tokens, which the parameters do not fix; zero keeps the current size.
func (w *Weights) ForInputs(videoTokens, contextTokens int) (*Weights, error) {
	c := w.cfg
	if videoTokens != 0 {
		c.VideoTokens = videoTokens
	}
	if contextTokens != 0 {
		c.ContextTokens = contextTokens
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	cp := *w
	cp.cfg = c
	return &cp, nil
}

// TinyWeights returns the embedded weights of the tiny golden model
// (golden/tiny/weights.safetensors, spec §11), sized for its inputs
// (8 video tokens, 5 context tokens).
func TinyWeights() (*Weights, error) {
	const name = "tiny/weights.safetensors"
	b, err := fs.ReadFile(golden.Tiny(), name)
	if err != nil {
		return nil, fmt.Errorf("cpu: embedded %s: %w", name, err)
	}
	w, err := ParseWeights("embedded "+name, b, nil)
	if err != nil {
		return nil, err
	}
	return w.ForInputs(8, 5)
}

// param names one tensor of the state dict, its expected shape and where it
// goes. qkv entries fill a third of the fused matrix.
type param struct {
	name  string
	shape []int
	dst   []float32
}

// params lists every tensor of the state dict (spec §1) with its shape and
// destination slice, allocating the slices first when alloc is set.
func (w *Weights) params(alloc bool) []param {
	c := w.cfg
	D, F, A, T, f, a := c.HiddenDim, c.FFNDim, c.attn(), c.TextDim, c.FreqDim, c.ActionDim
	mk := func(shape ...int) []float32 {
		n := 1
		for _, s := range shape {
			n *= s
		}
		return make([]float32, n)
	}
	var ps []param
	add := func(name string, dst *[]float32, shape ...int) {
		if alloc {
			*dst = mk(shape...)
		}
		ps = append(ps, param{name, shape, *dst})
	}
	add("action_encoder.weight", &w.actionEnc, D, a)
	add("action_encoder.bias", &w.actionEncB, D)
	add("text_embedding.0.weight", &w.text0, D, T)
	add("text_embedding.0.bias", &w.text0B, D)
	add("text_embedding.2.weight", &w.text2, D, D)
	add("text_embedding.2.bias", &w.text2B, D)
	add("time_embedding.0.weight", &w.time0, D, f)
	add("time_embedding.0.bias", &w.time0B, D)
	add("time_embedding.2.weight", &w.time2, D, D)
	add("time_embedding.2.bias", &w.time2B, D)
	add("time_projection.1.weight", &w.timeProj, 6*D, D)
	add("time_projection.1.bias", &w.timeProjB, 6*D)
	add("head.weight", &w.head, a, D)
	add("head.bias", &w.headB, a)
	if alloc {
		w.layers = make([]layerWeights, c.NumLayers)
	}
	for l := range w.layers {
		L := &w.layers[l]
		p := fmt.Sprintf("blocks.%d.", l)
		add(p+"modulation", &L.mod, 1, 6, D)
		if alloc {
			L.qkv, L.qkvB = mk(3*A, D), mk(3*A)
		}
		for i, n := range []string{"q", "k", "v"} {
			ps = append(ps,
				param{p + "self_attn." + n + ".weight", []int{A, D}, L.qkv[i*A*D : (i+1)*A*D]},
				param{p + "self_attn." + n + ".bias", []int{A}, L.qkvB[i*A : (i+1)*A]})
		}
		add(p+"self_attn.o.weight", &L.selfO, D, A)
		add(p+"self_attn.o.bias", &L.selfOB, D)
		add(p+"self_attn.norm_q.weight", &L.normQ, A)
		add(p+"self_attn.norm_k.weight", &L.normK, A)
		add(p+"cross_attn.q.weight", &L.crossQ, A, D)
		add(p+"cross_attn.q.bias", &L.crossQB, A)
		add(p+"cross_attn.k.weight", &L.crossK, A, D)
		add(p+"cross_attn.k.bias", &L.crossKB, A)
		add(p+"cross_attn.v.weight", &L.crossV, A, D)
		add(p+"cross_attn.v.bias", &L.crossVB, A)
		add(p+"cross_attn.o.weight", &L.crossO, D, A)
		add(p+"cross_attn.o.bias", &L.crossOB, D)
		add(p+"cross_attn.norm_q.weight", &L.crossNormQ, A)
		add(p+"cross_attn.norm_k.weight", &L.crossNormK, A)
		add(p+"norm3.weight", &L.norm3W, D)
		add(p+"norm3.bias", &L.norm3B, D)
		add(p+"ffn.0.weight", &L.ffn0, F, D)
		add(p+"ffn.0.bias", &L.ffn0B, F)
		add(p+"ffn.2.weight", &L.ffn2, D, F)
		add(p+"ffn.2.bias", &L.ffn2B, D)
	}
	return ps
}

// NumParams is the number of scalar parameters of the configuration.
func (w *Weights) NumParams() int {
	n := 0
	for _, p := range w.params(false) {
		n += len(p.dst)
	}
	return n
}

// LoadWeights reads the action expert from a safetensors file. Keys may sit
// under CheckpointPrefix; F32, F16 and BF16 storage are upcast to float32.
// The configuration comes from cfg when it is non-nil, else from the file's
// fastwam_config metadata, else from a JSON file beside the weights
// (<name>.json, then config.json). Missing, unexpected and misshaped
// tensors are all reported, by name, in one error.
func LoadWeights(path string, cfg *Config) (*Weights, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return fromFile(path, f, cfg)
}

// ParseWeights is LoadWeights for a safetensors image in memory; name is
// used in messages. The configuration comes from cfg or the metadata.
func ParseWeights(name string, data []byte, cfg *Config) (*Weights, error) {
	f, err := safetensors.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return fromFile(name, f, cfg)
}

func fromFile(path string, f *safetensors.File, cfg *Config) (*Weights, error) {
	var (
		c   Config
		err error
	)
	if cfg != nil {
		c = *cfg
	} else if c, err = findConfig(path, f); err != nil {
		return nil, err
	}
	c = c.withDefaults()
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	w := &Weights{cfg: c}
	params := w.params(true)

	prefix := ""
	names := f.Names()
	for _, n := range names {
		if strings.HasPrefix(n, CheckpointPrefix) {
			prefix = CheckpointPrefix
			break
		}
	}
	want := make(map[string]bool, len(params))
	var problems []string
	for _, p := range params {
		want[prefix+p.name] = true
		info, ok := f.Info(prefix + p.name)
		if !ok {
			problems = append(problems, fmt.Sprintf("missing %s %v", prefix+p.name, p.shape))
			continue
		}
		if !slices.Equal(info.Shape, p.shape) {
			problems = append(problems, fmt.Sprintf("%s has shape %v, want %v", info.Name, info.Shape, p.shape))
			continue
		}
		if _, err := f.Float32(info.Name, p.dst); err != nil {
			problems = append(problems, err.Error())
		}
	}
	for _, n := range names {
		if !want[n] {
			problems = append(problems, "unexpected tensor "+n)
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		const show = 12
		more := ""
		if len(problems) > show {
			more = fmt.Sprintf("\n  ... and %d more", len(problems)-show)
			problems = problems[:show]
		}
		return nil, fmt.Errorf("cpu: %s does not match the configuration (%d layers, hidden %d, %dx%d heads, ffn %d, text %d):\n  %s%s",
			path, c.NumLayers, c.HiddenDim, c.NumHeads, c.HeadDim, c.FFNDim, c.TextDim, strings.Join(problems, "\n  "), more)
	}
	if err := w.checkFinite(); err != nil {
		return nil, fmt.Errorf("cpu: %s: %w", path, err)
	}
	return w, nil
}

func (w *Weights) checkFinite() error {
	for _, p := range w.params(false) {
		if i := expert.FirstNonFinite(p.dst); i >= 0 {
			return fmt.Errorf("weight %s[%d] is %v", p.name, i, p.dst[i])
		}
	}
	return nil
}

func findConfig(path string, f *safetensors.File) (Config, error) {
	if js, ok := f.Metadata()[ConfigMetadataKey]; ok {
		c, err := parseConfig([]byte(js))
		if err != nil {
			return Config{}, fmt.Errorf("%s: metadata %s: %w", path, ConfigMetadataKey, err)
		}
		return c, nil
	}
	base := strings.TrimSuffix(path, filepath.Ext(path))
	for _, p := range []string{base + ".json", filepath.Join(filepath.Dir(path), "config.json")} {
		b, err := os.ReadFile(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return Config{}, fmt.Errorf("cpu: %w", err)
		}
		c, err := parseConfig(b)
		if err != nil {
			return Config{}, fmt.Errorf("%s: %w", p, err)
		}
		return c, nil
	}
	return Config{}, fmt.Errorf("cpu: %s has no %q metadata and no %s.json or config.json beside it: the configuration is unknown",
		path, ConfigMetadataKey, filepath.Base(base))
}

// RandomWeights makes weights of the given configuration with a fixed
// pseudo-random initialisation (uniform, scaled by 1/sqrt(fan_in) for
// matrices, gains near 1), for benchmarks and tests that need a model of a
// given size but not a trained one.
func RandomWeights(cfg Config, seed uint64) (*Weights, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	w := &Weights{cfg: cfg}
	r := rand.New(rand.NewPCG(seed, 1))
	for _, p := range w.params(true) {
		var scale, base float32
		switch {
		case len(p.shape) == 2:
			scale = float32(math.Sqrt(3 / float64(p.shape[1])))
		case strings.Contains(p.name, "norm"):
			scale, base = 0.2, 1
		default:
			scale = 0.1
		}
		for i := range p.dst {
			p.dst[i] = base + scale*(2*r.Float32()-1)
		}
	}
	return w, nil
}
