package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/internal/progress"
	"github.com/fastwam/actionexpert/worldmodel"
)

// worldConfigMetadataKey is the metadata entry of a world-model (video DiT
// and proprio encoder) weight file that holds its worldConfig as JSON.
const worldConfigMetadataKey = "fastwam_world_config"

// worldConfig is the configuration of the video DiT and proprio encoder
// weight file (the DiT weight file contract, docs/world-model.md "The
// weight files").
type worldConfig struct {
	HiddenDim      int `json:"hidden_dim"`
	FFNDim         int `json:"ffn_dim"`
	NumHeads       int `json:"num_heads"`
	HeadDim        int `json:"head_dim"`
	NumLayers      int `json:"num_layers"`
	TextDim        int `json:"text_dim"`
	FreqDim        int `json:"freq_dim"`
	ProprioDim     int `json:"proprio_dim"`
	LatentChannels int `json:"latent_channels"`
}

// tinyWorldConfig is weights make's default world model: small, valid, and
// the one of golden/tiny/world (its video K/V width 4 × 8 = 32 is the tiny
// action expert's, and so are its layers and text width).
var tinyWorldConfig = worldConfig{HiddenDim: 32, FFNDim: 64, NumHeads: 4, HeadDim: 8, NumLayers: 2, TextDim: 32,
	FreqDim: 256, ProprioDim: worldmodel.ProprioDim, LatentChannels: worldmodel.LatentChannels}

// Limits of weights make's world-model dimensions.
const (
	maxWorldWidth  = 1 << 16
	maxWorldLayers = 1024
)

// validate checks c as weights make writes it: every value positive and
// bounded, the model width split into heads (hidden = heads × head dim),
// a head dim the 3-D RoPE can split (⌊Dh/3⌋ and Dh − 2⌊Dh/3⌋ both even,
// spec §9) and an even freq_dim (the sinusoid's cos and sin halves).
func (c worldConfig) validate() error {
	for _, f := range []struct {
		name string
		v    int
		max  int
	}{
		{"hidden_dim", c.HiddenDim, maxWorldWidth}, {"ffn_dim", c.FFNDim, maxWorldWidth}, {"num_heads", c.NumHeads, maxWorldWidth},
		{"head_dim", c.HeadDim, maxWorldWidth}, {"num_layers", c.NumLayers, maxWorldLayers}, {"text_dim", c.TextDim, maxWorldWidth},
		{"freq_dim", c.FreqDim, maxWorldWidth}, {"proprio_dim", c.ProprioDim, maxWorldWidth}, {"latent_channels", c.LatentChannels, maxWorldWidth},
	} {
		if f.v < 1 || f.v > f.max {
			return fmt.Errorf("world config %s is %d: want 1..%d", f.name, f.v, f.max)
		}
	}
	if c.NumHeads*c.HeadDim != c.HiddenDim {
		return fmt.Errorf("world config num_heads*head_dim is %d*%d = %d: want hidden_dim %d (the video DiT's heads span its width)",
			c.NumHeads, c.HeadDim, c.NumHeads*c.HeadDim, c.HiddenDim)
	}
	if third := c.HeadDim / 3; third%2 != 0 || (c.HeadDim-2*third)%2 != 0 {
		return fmt.Errorf("world config head_dim %d: the 3-D RoPE splits it into %d + %d + %d dims, want all even (⌊Dh/3⌋ and Dh − 2⌊Dh/3⌋; 8, 24, 128 work, 16 does not)",
			c.HeadDim, c.HeadDim-2*third, third, third)
	}
	if c.FreqDim%2 != 0 {
		return fmt.Errorf("world config freq_dim is %d: want an even number (cos and sin halves)", c.FreqDim)
	}
	return nil
}

// Spec §7's random values: gains 1 + 0.2·N, biases 0.1·N, modulation
// 0.3·N, every other weight N/sqrt(fan-in).
func normalWeight(name string, shape ...int) tensor {
	fanIn := 1
	for _, s := range shape[1:] {
		fanIn *= s
	}
	return tensor{name, shape, 0, float32(1 / math.Sqrt(float64(fanIn))), true}
}
func normalBias(name string, n int) tensor        { return tensor{name, []int{n}, 0, 0.1, true} }
func normalGain(name string, shape ...int) tensor { return tensor{name, shape, 1, 0.2, true} }

// worldStateDict lists the video DiT's tensors (spec §6.2 without the
// mixtures.video. prefix, widths from c) and the proprio encoder's (§6.3),
// in that order. The last layer has only what its K and V need (its
// modulation, self_attn.k, self_attn.v and self_attn.norm_k) and head.* is
// left out, unless keepUnused.
func worldStateDict(c worldConfig, keepUnused bool) []tensor {
	D, F, T, f, z := c.HiddenDim, c.FFNDim, c.TextDim, c.FreqDim, c.LatentChannels
	var ts []tensor
	linear := func(name string, out, in int) {
		ts = append(ts, normalWeight(name+".weight", out, in), normalBias(name+".bias", out))
	}
	ts = append(ts, normalWeight("patch_embedding.weight", D, z, 1, 2, 2), normalBias("patch_embedding.bias", D))
	linear("text_embedding.0", D, T)
	linear("text_embedding.2", D, D)
	linear("time_embedding.0", D, f)
	linear("time_embedding.2", D, D)
	linear("time_projection.1", 6*D, D)
	if keepUnused {
		linear("head.head", 4*z, D)
		ts = append(ts, tensor{"head.modulation", []int{1, 2, D}, 0, 0.3, true})
	}
	for l := range c.NumLayers {
		p := "blocks." + strconv.Itoa(l) + "."
		ts = append(ts, tensor{p + "modulation", []int{1, 6, D}, 0, 0.3, true})
		if l == c.NumLayers-1 && !keepUnused {
			linear(p+"self_attn.k", D, D)
			linear(p+"self_attn.v", D, D)
			ts = append(ts, normalGain(p+"self_attn.norm_k.weight", D))
			continue
		}
		for _, attn := range []string{"self_attn", "cross_attn"} {
			for _, proj := range []string{"q", "k", "v", "o"} {
				linear(p+attn+"."+proj, D, D)
			}
			ts = append(ts, normalGain(p+attn+".norm_q.weight", D), normalGain(p+attn+".norm_k.weight", D))
		}
		ts = append(ts, normalGain(p+"norm3.weight", D), normalBias(p+"norm3.bias", D))
		linear(p+"ffn.0", F, D)
		linear(p+"ffn.2", D, F)
	}
	linear("proprio_encoder", T, c.ProprioDim)
	return ts
}

// vaeStateDict lists the Wan2.2 VAE's encoder-side tensors of spec §6.1 for
// base width d, in the released file's names and shapes (no prefix): the
// 84 encoder.* tensors (time_conv included, unused at T = 1 but in the
// released layout) and conv1's two, 86 in all.
func vaeStateDict(d int) []tensor {
	dims := [5]int{d, d, 2 * d, 4 * d, 4 * d}
	var ts []tensor
	conv := func(name string, shape ...int) {
		ts = append(ts, normalWeight(name+".weight", shape...), normalBias(name+".bias", shape[0]))
	}
	res := func(p string, in, out int) {
		ts = append(ts, normalGain(p+".residual.0.gamma", in, 1, 1, 1))
		conv(p+".residual.2", out, in, 3, 3, 3)
		ts = append(ts, normalGain(p+".residual.3.gamma", out, 1, 1, 1))
		conv(p+".residual.6", out, out, 3, 3, 3)
		if in != out {
			conv(p+".shortcut", out, in, 1, 1, 1)
		}
	}
	conv("encoder.conv1", d, 12, 3, 3, 3)
	for s := range 4 {
		p := "encoder.downsamples." + strconv.Itoa(s) + ".downsamples"
		res(p+".0", dims[s], dims[s+1])
		res(p+".1", dims[s+1], dims[s+1])
		if s < 3 {
			c := dims[s+1]
			conv(p+".2.resample.1", c, c, 3, 3)
			if s > 0 {
				conv(p+".2.time_conv", c, c, 3, 1, 1)
			}
		}
	}
	c := dims[4]
	res("encoder.middle.0", c, c)
	ts = append(ts, normalGain("encoder.middle.1.norm.gamma", c, 1, 1))
	conv("encoder.middle.1.to_qkv", 3*c, c, 1, 1)
	conv("encoder.middle.1.proj", c, c, 1, 1)
	res("encoder.middle.2", c, c)
	ts = append(ts, normalGain("encoder.head.0.gamma", c, 1, 1, 1))
	conv("encoder.head.2", 2*worldmodel.LatentChannels, c, 3, 3, 3)
	conv("conv1", 2*worldmodel.LatentChannels, 2*worldmodel.LatentChannels, 1, 1, 1)
	return ts
}

// vaeFormat is the "format" metadata of weights make's VAE files.
const vaeFormat = "fastwam-vae-random/1"

// makeWorld writes the world model's random weights (the DiT weight file
// contract) and says what it wrote.
func makeWorld(ctx context.Context, out string, c worldConfig, ts []tensor, keepUnused bool, st storageType, seed uint64, progTo io.Writer, stdout io.Writer) error {
	cfgJSON, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("weights: world configuration: %w", err)
	}
	meta := map[string]string{worldConfigMetadataKey: string(cfgJSON), "format": "pt",
		"note": "random world-model test weights written by fastwam weights make -model world, seed " + strconv.FormatUint(seed, 10)}
	n, err := writeTensors(ctx, out, meta, ts, st, seed, progress.New(progTo, "weights make", "tensors", len(ts), progress.DefaultInterval))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d tensors, %d parameters in %s, %d bytes (seed %d)\n", out, len(ts), numel(ts), st.name, n, seed)
	kept := ""
	if keepUnused {
		kept = " (unused tensors kept)"
	}
	fmt.Fprintf(stdout, "world config: %d layers, %dx%d heads, hidden %d, ffn %d, text %d, freq %d, proprio %d, latent %d%s\n",
		c.NumLayers, c.NumHeads, c.HeadDim, c.HiddenDim, c.FFNDim, c.TextDim, c.FreqDim, c.ProprioDim, c.LatentChannels, kept)
	return nil
}

// makeVAE writes the VAE encoder's random weights for base width d.
func makeVAE(ctx context.Context, out string, d int, ts []tensor, st storageType, seed uint64, progTo io.Writer, stdout io.Writer) error {
	meta := map[string]string{"format": vaeFormat, "dim": strconv.Itoa(d),
		"note": "random VAE encoder test weights written by fastwam weights make -model vae, seed " + strconv.FormatUint(seed, 10)}
	n, err := writeTensors(ctx, out, meta, ts, st, seed, progress.New(progTo, "weights make", "tensors", len(ts), progress.DefaultInterval))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d tensors, %d parameters in %s, %d bytes (seed %d)\n", out, len(ts), numel(ts), st.name, n, seed)
	fmt.Fprintf(stdout, "VAE encoder: base width d = %d (stages %d, %d, %d, %d), latent %d\n", d, d, 2*d, 4*d, 4*d, worldmodel.LatentChannels)
	return nil
}

// textEntrySpec is what -model text writes.
type textEntrySpec struct {
	task, encoder string
	rows, dim, n  int
	bf16          bool
}

// makeTextEntry writes one random text cache entry for the task into the
// folder dir: rows 0..n-1 N(0, 1) (rounded to bf16 when stored so), the
// rest zero, as worldmodel.WriteTextEntry writes it.
func makeTextEntry(dir string, s textEntrySpec, force bool, seed uint64, stdout io.Writer) error {
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return usageError("-model text: -o %s must be an existing folder (the text cache): %s", dir, statWhat(err))
	}
	if s.rows < 1 || s.dim < 1 || s.rows > 1<<12 || s.dim > 1<<16 {
		return usageError("-model text: text entry of %d × %d (-rows, -text-dim): want 1..%d rows of 1..%d values", s.rows, s.dim, 1<<12, 1<<16)
	}
	if s.n < 1 || s.n > s.rows {
		return usageError("-model text: text entry with %d tokens (-tokens): want 1..%d (-rows)", s.n, s.rows)
	}
	prompt := worldmodel.Prompt(s.task)
	path := filepath.Join(dir, worldmodel.TextCacheFileName(prompt))
	if err := checkWeightsOutput(path, force); err != nil {
		return err
	}
	e := &worldmodel.TextEntry{Prompt: prompt, Tokens: s.n, Encoder: s.encoder, Rows: s.rows, Dim: s.dim,
		Text: make([]float32, s.rows*s.dim)}
	r := rand.New(rand.NewPCG(seed, 0x7e47_cac4e))
	for i := range s.n * s.dim {
		e.Text[i] = float32(r.NormFloat64())
	}
	var buf bytes.Buffer
	if err := worldmodel.WriteTextEntry(&buf, e, s.bf16); err != nil {
		return usageError("%v", err)
	}
	if err := writeFile(path, func(w io.Writer) error {
		_, err := w.Write(buf.Bytes())
		return err
	}); err != nil {
		return fmt.Errorf("weights: %w", err)
	}
	dt := "F32"
	if s.bf16 {
		dt = "BF16"
	}
	fmt.Fprintf(stdout, "wrote %s: text cache entry for %q, %d × %d %s, %d tokens, encoder %q (seed %d)\n",
		path, s.task, s.rows, s.dim, dt, s.n, s.encoder, seed)
	return nil
}

// statWhat says what a failed folder check found.
func statWhat(err error) string {
	if err != nil {
		return err.Error()
	}
	return "it is not a folder"
}

func numel(ts []tensor) int64 {
	var n int64
	for _, t := range ts {
		n += t.numel()
	}
	return n
}

// modelFlags are the flags each -model reads besides -o, -force, -dtype,
// -seed and -progress.
var modelFlags = map[string][]string{
	"expert": {"layers", "heads", "head-dim", "text-dim", "hidden", "ffn", "freq-dim", "action-dim", "action-tokens", "video-tokens", "context-tokens", "eps"},
	"world":  {"layers", "heads", "head-dim", "text-dim", "hidden", "ffn", "freq-dim", "proprio-dim", "latent-channels", "keep-unused"},
	"vae":    {"vae-dim"},
	"text":   {"text-dim", "task", "rows", "tokens", "encoder"},
}

// checkModelFlags refuses an unknown -model and a flag given that the
// model does not read (it would be silently ignored).
func checkModelFlags(model string, set map[string]string) error {
	own, ok := modelFlags[model]
	if !ok {
		return usageError("-model must be expert, world, vae or text, got %q", model)
	}
	allowed := map[string]bool{"model": true, "o": true, "force": true, "dtype": true, "seed": true, "progress": true}
	for _, f := range own {
		allowed[f] = true
	}
	for _, name := range []string{"layers", "heads", "head-dim", "text-dim", "hidden", "ffn", "freq-dim", "action-dim", "action-tokens",
		"video-tokens", "context-tokens", "eps", "proprio-dim", "latent-channels", "keep-unused", "vae-dim", "task", "rows", "tokens", "encoder"} {
		if v, ok := set[name]; ok && !allowed[name] {
			return usageError("-%s %s does not apply to -model %s (it reads -%s)", name, v, model, strings.Join(own, ", -"))
		}
	}
	return nil
}

// makeWorldSide runs weights make for -model world, vae or text. The
// shared flags (layers, heads, head-dim, text-dim, hidden, ffn, freq-dim)
// were parsed into c with the action expert's defaults: a flag the user
// did not give takes the world model's default instead.
func makeWorldSide(ctx context.Context, model, out string, force bool, st storageType, seed uint64, progressMode string, stdout, stderr io.Writer,
	set map[string]string, c cpu.Config, w worldConfig, keepUnused bool, vaeDim int, text textEntrySpec) error {
	pick := func(flag string, v int, def int) int {
		if _, ok := set[flag]; ok {
			return v
		}
		return def
	}
	switch model {
	case "text":
		text.dim = pick("text-dim", c.TextDim, tinyWorldConfig.TextDim)
		text.bf16 = st.dtype == "BF16"
		if st.dtype == "F16" {
			return usageError("-model text: -dtype must be bf16 (the encoder's own numbers) or f32, got f16")
		}
		if text.task == "" {
			return usageError("-model text needs -task INSTRUCTION")
		}
		return makeTextEntry(out, text, force, seed, stdout)
	case "vae":
		if vaeDim < 1 || vaeDim > worldmodel.MaxVAEWidth {
			return usageError("-vae-dim is %d: want 1..%d (the released VAE's is %d)", vaeDim, worldmodel.MaxVAEWidth, worldmodel.VAEWidth)
		}
	case "world":
		w.NumLayers = pick("layers", c.NumLayers, w.NumLayers)
		w.NumHeads = pick("heads", c.NumHeads, w.NumHeads)
		w.HeadDim = pick("head-dim", c.HeadDim, w.HeadDim)
		w.TextDim = pick("text-dim", c.TextDim, w.TextDim)
		w.HiddenDim = pick("hidden", c.HiddenDim, w.NumHeads*w.HeadDim)
		w.FFNDim = pick("ffn", c.FFNDim, w.FFNDim)
		w.FreqDim = pick("freq-dim", c.FreqDim, w.FreqDim)
		if err := w.validate(); err != nil {
			return usageError("%v (set by the flag of the same name)", err)
		}
	}
	if err := checkWeightsOutput(out, force); err != nil {
		return err
	}
	var ts []tensor
	if model == "world" {
		ts = worldStateDict(w, keepUnused)
	} else {
		ts = vaeStateDict(vaeDim)
	}
	progressTo, err := progressOut(progressMode, stderr, numel(ts)*int64(st.size) > 256<<20)
	if err != nil {
		return err
	}
	if model == "world" {
		return makeWorld(ctx, out, w, ts, keepUnused, st, seed, progressTo, stdout)
	}
	return makeVAE(ctx, out, vaeDim, ts, st, seed, progressTo, stdout)
}
