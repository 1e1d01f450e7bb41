package worldmodel

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/fastwam/actionexpert/safetensors"
)

// DiTLayer is one block of the video expert (world-model.md §5.5), as the
// prefill uses it. Self-attention q, k and v are fused into one [3A, D]
// matrix (k and v only, [2A, D], in the trimmed last layer).
type DiTLayer struct {
	// Mod is the block's modulation with the folded time modulation
	// added, blocks.l.modulation[0] + TM, [6, D]: shift1, scale1,
	// gate1, shift2, scale2, gate2.
	Mod        []float32
	Trimmed    bool      // the last layer: only Mod, QKV (k, v), NormK are set (§5.6)
	QKV, QKVB  []float32 // [3A, D], [3A] (q, k, v rows); [2A, D], [2A] (k, v) when Trimmed
	NormQ      []float32 // self_attn.norm_q [A]
	NormK      []float32 // self_attn.norm_k [A]
	O, OB      []float32 // self_attn.o [D, A], [D]
	Norm3W     []float32 // norm3 [D]
	Norm3B     []float32
	CrossQ     []float32 // cross_attn.q [A, D], bias [A]
	CrossQB    []float32
	CrossNormQ []float32
	CrossK     []float32
	CrossKB    []float32
	CrossNormK []float32
	CrossV     []float32
	CrossVB    []float32
	CrossO     []float32 // cross_attn.o [D, A], bias [D]
	CrossOB    []float32
	FFN0       []float32 // ffn.0 [F, D], bias [F]
	FFN0B      []float32
	FFN2       []float32 // ffn.2 [D, F], bias [D]
	FFN2B      []float32
}

// DiTWeights are the video expert's parameters the prefill reads, upcast to
// float32, with the time modulation at t = 0 folded into every layer's
// modulation at load (§5.2), and the proprio encoder (§2.3, §6.3).
type DiTWeights struct {
	Config   DiTConfig
	PatchW   []float32 // patch_embedding [D, z·4], columns in (c, row offset, column offset) order
	PatchB   []float32 // [D]
	Text0    []float32 // text_embedding.0 [D, T]
	Text0B   []float32
	Text2    []float32 // text_embedding.2 [D, D]
	Text2B   []float32
	TM       []float32 // the folded time modulation at t = 0, [6, D] (already in Layers' Mod)
	ProprioW []float32 // proprio_encoder.weight [T, P]
	ProprioB []float32 // proprio_encoder.bias [T]
	Layers   []DiTLayer
}

// ditTensor is one tensor of the weight file contract: its key, shape,
// whether the prefill reads it, and where it goes.
type ditTensor struct {
	name     string
	shape    []int
	required bool
	set      *[]float32 // where a read tensor goes; nil: the time MLP (folded) or not read
}

// ditTensors lists every key of the DiT weight file contract for c in a
// fixed order. With w it allocates w's parameters and gives each read
// tensor its destination; without, it only describes.
func ditTensors(c DiTConfig, w *DiTWeights) []ditTensor {
	D, F, T, f, P, z := c.HiddenDim, c.FFNDim, c.TextDim, c.FreqDim, c.ProprioDim, c.LatentChannels
	A := c.NumHeads * c.HeadDim
	var ts []ditTensor
	add := func(name string, shape []int, required bool, set *[]float32) {
		ts = append(ts, ditTensor{name: name, shape: shape, required: required, set: set})
	}
	var dummy DiTWeights
	if w == nil {
		w = &dummy
	}
	add("patch_embedding.weight", []int{D, z, 1, 2, 2}, true, &w.PatchW)
	add("patch_embedding.bias", []int{D}, true, &w.PatchB)
	add("text_embedding.0.weight", []int{D, T}, true, &w.Text0)
	add("text_embedding.0.bias", []int{D}, true, &w.Text0B)
	add("text_embedding.2.weight", []int{D, D}, true, &w.Text2)
	add("text_embedding.2.bias", []int{D}, true, &w.Text2B)
	add("time_embedding.0.weight", []int{D, f}, true, nil)
	add("time_embedding.0.bias", []int{D}, true, nil)
	add("time_embedding.2.weight", []int{D, D}, true, nil)
	add("time_embedding.2.bias", []int{D}, true, nil)
	add("time_projection.1.weight", []int{6 * D, D}, true, nil)
	add("time_projection.1.bias", []int{6 * D}, true, nil)
	add("head.head.weight", []int{2 * 2 * z, D}, false, nil)
	add("head.head.bias", []int{2 * 2 * z}, false, nil)
	add("head.modulation", []int{1, 2, D}, false, nil)
	add("proprio_encoder.weight", []int{T, P}, true, &w.ProprioW)
	add("proprio_encoder.bias", []int{T}, true, &w.ProprioB)
	if w != &dummy {
		w.Layers = make([]DiTLayer, c.NumLayers)
	}
	for l := range c.NumLayers {
		L := &DiTLayer{}
		if w != &dummy {
			L = &w.Layers[l]
		}
		full := l < c.NumLayers-1
		p := "blocks." + strconv.Itoa(l) + "."
		add(p+"modulation", []int{1, 6, D}, true, &L.Mod)
		for _, n := range []string{"q", "k", "v"} {
			req := full || n != "q"
			add(p+"self_attn."+n+".weight", []int{A, D}, req, nil)
			add(p+"self_attn."+n+".bias", []int{A}, req, nil)
		}
		add(p+"self_attn.o.weight", []int{D, A}, full, &L.O)
		add(p+"self_attn.o.bias", []int{D}, full, &L.OB)
		add(p+"self_attn.norm_q.weight", []int{A}, full, &L.NormQ)
		add(p+"self_attn.norm_k.weight", []int{A}, true, &L.NormK)
		for _, n := range []struct {
			key  string
			w, b *[]float32
		}{{"q", &L.CrossQ, &L.CrossQB}, {"k", &L.CrossK, &L.CrossKB}, {"v", &L.CrossV, &L.CrossVB}} {
			add(p+"cross_attn."+n.key+".weight", []int{A, D}, full, n.w)
			add(p+"cross_attn."+n.key+".bias", []int{A}, full, n.b)
		}
		add(p+"cross_attn.o.weight", []int{D, A}, full, &L.CrossO)
		add(p+"cross_attn.o.bias", []int{D}, full, &L.CrossOB)
		add(p+"cross_attn.norm_q.weight", []int{A}, full, &L.CrossNormQ)
		add(p+"cross_attn.norm_k.weight", []int{A}, full, &L.CrossNormK)
		add(p+"norm3.weight", []int{D}, full, &L.Norm3W)
		add(p+"norm3.bias", []int{D}, full, &L.Norm3B)
		add(p+"ffn.0.weight", []int{F, D}, full, &L.FFN0)
		add(p+"ffn.0.bias", []int{F}, full, &L.FFN0B)
		add(p+"ffn.2.weight", []int{D, F}, full, &L.FFN2)
		add(p+"ffn.2.bias", []int{D}, full, &L.FFN2B)
	}
	return ts
}

func numel(shape []int) int {
	n := 1
	for _, s := range shape {
		n *= s
	}
	return n
}

func shapeString(s []int) string {
	return strings.ReplaceAll(fmt.Sprint(s), " ", ", ")
}

// LoadDiTWeights reads the video expert from a safetensors file in the DiT
// weight file contract (docs/world-model.md): the keys of world-model.md
// §6.2 without the "mixtures.video." prefix, plus proprio_encoder.weight
// [T, P] and proprio_encoder.bias [T]; head.* optional and never read; of
// the last layer only modulation, self_attn.k.*, self_attn.v.* and
// self_attn.norm_k.weight required (its other tensors optional, never
// read); any other key an error naming it; F32, F16 and BF16 storage upcast
// exactly. The configuration comes from the metadata entry
// DiTConfigMetadataKey (strict JSON), or is FullDiTConfig when the entry is
// absent. Every shape is checked against the configuration, and every
// dtype, before any parameter is allocated; every value read must be
// finite.
func LoadDiTWeights(path string) (*DiTWeights, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("worldmodel: DiT weights: %w", err)
	}
	defer f.Close()
	w, err := readDiTWeights(f)
	if err != nil {
		return nil, fmt.Errorf("worldmodel: DiT weights %s: %w", path, err)
	}
	return w, nil
}

func readDiTWeights(f *safetensors.File) (*DiTWeights, error) {
	cfg := FullDiTConfig()
	from := "the full-size default (no " + DiTConfigMetadataKey + " metadata)"
	if raw, ok := f.Metadata()[DiTConfigMetadataKey]; ok {
		from = "the file's " + DiTConfigMetadataKey + " metadata"
		c, err := ParseDiTConfig([]byte(raw))
		if err != nil {
			return nil, fmt.Errorf("metadata %q: %w", DiTConfigMetadataKey, err)
		}
		cfg = c
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	// Check the tensor table against the contract before allocating.
	spec := ditTensors(cfg, nil)
	known := make(map[string]int, len(spec))
	for i, t := range spec {
		known[t.name] = i
	}
	var problems []string
	for _, name := range f.Names() {
		i, ok := known[name]
		info, _ := f.Info(name)
		if !ok {
			problems = append(problems, fmt.Sprintf("unexpected tensor %q %s", name, shapeString(info.Shape)))
			continue
		}
		if d := info.DType; d != "F32" && d != "F16" && d != "BF16" {
			problems = append(problems, fmt.Sprintf("%q has dtype %s, want F32, F16 or BF16", name, d))
		}
		if want := spec[i].shape; !slices.Equal(info.Shape, want) {
			problems = append(problems, fmt.Sprintf("%q has shape %s, want %s", name, shapeString(info.Shape), shapeString(want)))
		}
	}
	for _, t := range spec {
		if _, ok := f.Info(t.name); t.required && !ok {
			problems = append(problems, fmt.Sprintf("missing %q %s", t.name, shapeString(t.shape)))
		}
	}
	if len(problems) > 0 {
		const show = 8
		n, more := len(problems), ""
		if len(problems) > show {
			more = fmt.Sprintf("\n  ... and %d more", len(problems)-show)
			problems = problems[:show]
		}
		return nil, fmt.Errorf("%d tensors do not match the configuration of %s, %+v:\n  %s%s", n, from, cfg, strings.Join(problems, "\n  "), more)
	}
	w := &DiTWeights{Config: cfg}
	read := func(name string, dst []float32) ([]float32, error) {
		v, err := f.Float32(name, dst)
		if err != nil {
			return nil, err
		}
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return nil, fmt.Errorf("%q: value %d is %v, want a finite number", name, i, x)
			}
		}
		return v, nil
	}
	D, A := cfg.HiddenDim, cfg.NumHeads*cfg.HeadDim
	time := map[string][]float32{}
	for _, t := range ditTensors(cfg, w) {
		switch {
		case !t.required:
			continue
		case t.set != nil:
			v, err := read(t.name, make([]float32, numel(t.shape)))
			if err != nil {
				return nil, err
			}
			*t.set = v
		case strings.HasPrefix(t.name, "time_"):
			v, err := read(t.name, nil)
			if err != nil {
				return nil, err
			}
			time[t.name] = v
		}
	}
	// Self-attention q, k, v into the fused matrices.
	for l := range w.Layers {
		L := &w.Layers[l]
		L.Trimmed = l == cfg.NumLayers-1
		names := []string{"q", "k", "v"}
		if L.Trimmed {
			names = names[1:]
		}
		L.QKV, L.QKVB = make([]float32, len(names)*A*D), make([]float32, len(names)*A)
		for i, n := range names {
			p := "blocks." + strconv.Itoa(l) + ".self_attn." + n
			if _, err := read(p+".weight", L.QKV[i*A*D:(i+1)*A*D]); err != nil {
				return nil, err
			}
			if _, err := read(p+".bias", L.QKVB[i*A:(i+1)*A]); err != nil {
				return nil, err
			}
		}
	}
	w.TM = foldTimeModulation(cfg, time)
	for l := range w.Layers {
		m := w.Layers[l].Mod
		for i := range m {
			m[i] += w.TM[i]
		}
	}
	return w, w.Validate()
}

// foldTimeModulation computes TM = reshape(lin(silu(lin(silu(lin(e;
// time_embedding.0)); time_embedding.2)); time_projection.1), [6, D]) at
// t = 0 (world-model.md §5.2), e the sinusoid at 0 (ones then zeros). It
// runs in float64 and rounds once: it depends only on the weights.
func foldTimeModulation(c DiTConfig, t map[string][]float32) []float32 {
	D, f := c.HiddenDim, c.FreqDim
	e := make([]float64, f)
	for j := range f / 2 {
		s, co := math.Sincos(0 * math.Pow(10000, -float64(j)/float64(f/2)))
		e[j], e[f/2+j] = co, s
	}
	lin := func(x []float64, w, b []float32, n int) []float64 {
		k := len(x)
		y := make([]float64, n)
		for o := range n {
			s := float64(b[o])
			row := w[o*k : (o+1)*k]
			for i, v := range row {
				s += float64(v) * x[i]
			}
			y[o] = s
		}
		return y
	}
	silu := func(x []float64) []float64 {
		for i, v := range x {
			x[i] = v / (1 + math.Exp(-v))
		}
		return x
	}
	h := silu(lin(e, t["time_embedding.0.weight"], t["time_embedding.0.bias"], D))
	tt := silu(lin(h, t["time_embedding.2.weight"], t["time_embedding.2.bias"], D))
	tm := lin(tt, t["time_projection.1.weight"], t["time_projection.1.bias"], 6*D)
	out := make([]float32, 6*D)
	for i, v := range tm {
		out[i] = float32(v)
	}
	return out
}

// Validate checks that every parameter of w has the length its place in
// the configuration w.Config requires (as LoadDiTWeights makes them), so
// that a hand-built DiTWeights cannot make the DiT index outside a slice.
func (w *DiTWeights) Validate() error {
	if w == nil {
		return errors.New("worldmodel: DiT weights: none")
	}
	c := w.Config
	if err := c.Validate(); err != nil {
		return err
	}
	D, F, T, P, z, A := c.HiddenDim, c.FFNDim, c.TextDim, c.ProprioDim, c.LatentChannels, c.NumHeads*c.HeadDim
	var err error
	need := func(name string, v []float32, n int) {
		if err == nil && len(v) != n {
			err = fmt.Errorf("worldmodel: DiT weights: %s has %d values, want %d", name, len(v), n)
		}
	}
	need("patch_embedding.weight", w.PatchW, D*z*4)
	need("patch_embedding.bias", w.PatchB, D)
	need("text_embedding.0.weight", w.Text0, D*T)
	need("text_embedding.0.bias", w.Text0B, D)
	need("text_embedding.2.weight", w.Text2, D*D)
	need("text_embedding.2.bias", w.Text2B, D)
	need("proprio_encoder.weight", w.ProprioW, T*P)
	need("proprio_encoder.bias", w.ProprioB, T)
	if err == nil && len(w.Layers) != c.NumLayers {
		err = fmt.Errorf("worldmodel: DiT weights: %d layers, want %d", len(w.Layers), c.NumLayers)
	}
	for l := range w.Layers {
		L := &w.Layers[l]
		p := "blocks." + strconv.Itoa(l) + "."
		last := l == c.NumLayers-1
		if err == nil && L.Trimmed != last {
			err = fmt.Errorf("worldmodel: DiT weights: layer %d trimmed = %v, want %v (only the last layer is trimmed)", l, L.Trimmed, last)
		}
		rows := 3
		if last {
			rows = 2
		}
		need(p+"modulation", L.Mod, 6*D)
		need(p+"self_attn.{q,k,v}.weight", L.QKV, rows*A*D)
		need(p+"self_attn.{q,k,v}.bias", L.QKVB, rows*A)
		need(p+"self_attn.norm_k.weight", L.NormK, A)
		if last {
			continue
		}
		need(p+"self_attn.norm_q.weight", L.NormQ, A)
		need(p+"self_attn.o.weight", L.O, D*A)
		need(p+"self_attn.o.bias", L.OB, D)
		need(p+"norm3.weight", L.Norm3W, D)
		need(p+"norm3.bias", L.Norm3B, D)
		need(p+"cross_attn.q.weight", L.CrossQ, A*D)
		need(p+"cross_attn.q.bias", L.CrossQB, A)
		need(p+"cross_attn.norm_q.weight", L.CrossNormQ, A)
		need(p+"cross_attn.k.weight", L.CrossK, A*D)
		need(p+"cross_attn.k.bias", L.CrossKB, A)
		need(p+"cross_attn.norm_k.weight", L.CrossNormK, A)
		need(p+"cross_attn.v.weight", L.CrossV, A*D)
		need(p+"cross_attn.v.bias", L.CrossVB, A)
		need(p+"cross_attn.o.weight", L.CrossO, D*A)
		need(p+"cross_attn.o.bias", L.CrossOB, D)
		need(p+"ffn.0.weight", L.FFN0, F*D)
		need(p+"ffn.0.bias", L.FFN0B, F)
		need(p+"ffn.2.weight", L.FFN2, D*F)
		need(p+"ffn.2.bias", L.FFN2B, D)
	}
	return err
}
