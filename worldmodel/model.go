package worldmodel

import (
	"context"
	"fmt"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/cpu"
)

// ModelOptions say where the world model's parts come from.
type ModelOptions struct {
	DiTWeights string // the video DiT and proprio encoder, in the DiT weight file contract
	VAEWeights string // the Wan2.2 VAE (LoadVAEWeights)
	StateStats string // the checkpoint's dataset_stats.json
	StateKey   string // its state key; "" means "default" (LIBERO's)
	// TextCache is the per-instruction text cache; zero Rows and Dim take
	// TextRows and the DiT's text width.
	TextCache TextCache
	// Frame is the image preprocessing; the zero value is LiberoFrame().
	// Its frame size sets the latent grid and Sv (both sides multiples of
	// 32).
	Frame FrameConfig
	// Gemm computes the products; nil means cpu.PickGemm("auto", "", 0).
	Gemm cpu.Gemm
}

// Observation is one cycle's input: the camera images in the frame
// configuration's camera order, the raw proprio state (the 8 values of
// world-model.md §2.1) and the task instruction (without the prompt
// prefix).
type Observation struct {
	Images      []Image
	State       []float32
	Instruction string
}

// StageTimes are the wall-clock durations of one Run's stages.
type StageTimes struct {
	Preprocess, VAE, Text, Proprio, Prefill time.Duration
}

// Output is what Run writes: the caller's buffers (see Model.NewOutput for
// their sizes) and what Run reports.
type Output struct {
	// Keys and Values are the per-layer video K and V, [N, 1, Sv, A]
	// each, both F32 or both F16 (expert.TensorView, so they may be a
	// backend's own input buffers).
	Keys, Values expert.TensorView
	Context      []float32 // [L, T]: the text rows, then the proprio row
	Mask         []bool    // [L], all true
	// Valid is true when the last Run returned nil.
	Valid bool
	Times StageTimes
}

// Model is the whole world model on the CPU (world-model.md §0): camera
// images, proprio state and instruction to the video K/V cache, the
// context and its mask, as the action expert's chunk needs them. A Model
// is not safe for concurrent use.
type Model struct {
	pre   *Preprocessor
	vae   *VAEEncoder
	dit   *DiT
	norm  *StateNormalizer
	cache TextCache

	image, latent, pnorm, row []float32
	instr                     string     // the instruction of text
	text                      *TextEntry // nil until the first Run
}

// LoadModel reads every part named by opts and sizes the model for the
// frame configuration. ctx is checked between parts.
func LoadModel(ctx context.Context, opts ModelOptions) (*Model, error) {
	if opts.Frame.Cameras == nil {
		opts.Frame = LiberoFrame()
	}
	pre, err := NewPreprocessor(opts.Frame)
	if err != nil {
		return nil, err
	}
	fw, fh := opts.Frame.Size()
	if fw%32 != 0 || fh%32 != 0 {
		return nil, fmt.Errorf("worldmodel: frame of %d × %d (width × height): want both sides multiples of 32 (the VAE's stride 16 and the DiT's 2 × 2 patch)", fw, fh)
	}
	if opts.Gemm == nil {
		if opts.Gemm, _, err = cpu.PickGemm("auto", "", 0); err != nil {
			return nil, err
		}
	}
	dw, err := LoadDiTWeights(opts.DiTWeights)
	if err != nil {
		return nil, err
	}
	c := dw.Config
	if c.LatentChannels != LatentChannels {
		return nil, fmt.Errorf("worldmodel: %s: the DiT takes %d latent channels, the VAE gives %d", opts.DiTWeights, c.LatentChannels, LatentChannels)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	vw, err := LoadVAEWeights(opts.VAEWeights)
	if err != nil {
		return nil, err
	}
	vae, err := NewVAEEncoder(vw, fh, fw, opts.Gemm)
	if err != nil {
		return nil, err
	}
	key := opts.StateKey
	if key == "" {
		key = "default"
	}
	norm, err := LoadStateNormalizer(opts.StateStats, key, c.ProprioDim)
	if err != nil {
		return nil, err
	}
	tc := opts.TextCache
	if tc.Rows == 0 {
		tc.Rows = TextRows
	}
	if tc.Dim == 0 {
		tc.Dim = c.TextDim
	}
	if tc.Dim != c.TextDim {
		return nil, fmt.Errorf("worldmodel: text cache of width %d, the DiT's text width is %d", tc.Dim, c.TextDim)
	}
	dit, err := NewDiT(dw, opts.Gemm, DiTSize{LatentHeight: fh / 16, LatentWidth: fw / 16, ContextRows: tc.Rows + 1})
	if err != nil {
		return nil, err
	}
	return &Model{
		pre: pre, vae: vae, dit: dit, norm: norm, cache: tc,
		image: make([]float32, 3*fw*fh), latent: make([]float32, LatentChannels*(fh/16)*(fw/16)),
		pnorm: make([]float32, c.ProprioDim), row: make([]float32, c.TextDim),
	}, nil
}

// Dims are the sizes of a Model's outputs.
type Dims struct {
	Layers, VideoTokens, Width int // N, Sv, A: Keys and Values are [N, 1, Sv, A]
	ContextRows, TextDim       int // L, T: Context is [L, T]
}

// Dims returns the sizes of the model's outputs.
func (m *Model) Dims() Dims {
	c := m.dit.cfg
	return Dims{Layers: c.NumLayers, VideoTokens: m.dit.sv, Width: c.HiddenDim, ContextRows: m.dit.size.ContextRows, TextDim: c.TextDim}
}

// NewOutput allocates an Output of the model's sizes, K and V in F16 when
// f16, else F32.
func (m *Model) NewOutput(f16 bool) *Output {
	d := m.Dims()
	n := d.Layers * d.VideoTokens * d.Width
	o := &Output{Context: make([]float32, d.ContextRows*d.TextDim), Mask: make([]bool, d.ContextRows)}
	if f16 {
		o.Keys, o.Values = expert.TensorView{F16: make([]uint16, n)}, expert.TensorView{F16: make([]uint16, n)}
	} else {
		o.Keys, o.Values = expert.TensorView{F32: make([]float32, n)}, expert.TensorView{F32: make([]float32, n)}
	}
	return o
}

// Run computes one cycle: preprocessing (§1), the VAE latent (§4), the
// text rows (looked up in the cache only when the instruction differs from
// the last successful one), the proprio row (§2), the context and mask
// (§3.3), and the DiT prefill (§5) into out's buffers.
//
// Run sets out.Valid to false first and to true only on success. An input
// it refuses (buffers of the wrong size, an image of the wrong size or
// encoding, a state of the wrong length or not finite, an instruction
// without a cache entry) is refused before anything is computed, and out's
// buffers are left untouched. When ctx is cancelled during the run, Run
// returns ctx.Err() and out's buffers may hold a mix of old and new
// values; out.Valid says they are not valid. After warm-up, Run allocates
// nothing of its own (the VAE's worker goroutines and the OpenBLAS
// binding's calls aside).
func (m *Model) Run(ctx context.Context, obs Observation, out *Output) error {
	out.Valid = false
	d := m.Dims()
	n := d.Layers * d.VideoTokens * d.Width
	k, v := out.Keys, out.Values
	oneEach := (k.F32 == nil) != (k.F16 == nil) && (v.F32 == nil) != (v.F16 == nil)
	if !oneEach || k.Len() != n || v.Len() != n || (k.F32 == nil) != (v.F32 == nil) {
		return fmt.Errorf("worldmodel: output K/V of %d and %d values: want %d each, both F32 or both F16", out.Keys.Len(), out.Values.Len(), n)
	}
	if len(out.Context) != d.ContextRows*d.TextDim || len(out.Mask) != d.ContextRows {
		return fmt.Errorf("worldmodel: output context of %d values and mask of %d: want %d × %d and %d", len(out.Context), len(out.Mask), d.ContextRows, d.TextDim, d.ContextRows)
	}
	if err := m.norm.Normalize(m.pnorm, obs.State); err != nil {
		return err
	}
	t0 := time.Now()
	text := m.text
	if text == nil || obs.Instruction != m.instr {
		e, err := m.cache.Lookup(obs.Instruction)
		if err != nil {
			return err
		}
		text = e
	}
	t1 := time.Now()
	if err := m.pre.Tensor(m.image, obs.Images...); err != nil {
		return err
	}
	// Every input is accepted from here on.
	m.text, m.instr = text, obs.Instruction
	t2 := time.Now()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := m.vae.Encode(m.latent, m.image); err != nil {
		return err
	}
	t3 := time.Now()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ProprioToken(m.row, m.dit.w.ProprioW, m.dit.w.ProprioB, m.pnorm); err != nil {
		return err
	}
	if err := AssembleContext(out.Context, m.text.Text, m.row); err != nil {
		return err
	}
	ContextMask(out.Mask)
	t4 := time.Now()
	if err := m.dit.Prefill(ctx, m.latent, out.Context, out.Keys, out.Values); err != nil {
		return err
	}
	t5 := time.Now()
	out.Times = StageTimes{Text: t1.Sub(t0), Preprocess: t2.Sub(t1), VAE: t3.Sub(t2), Proprio: t4.Sub(t3), Prefill: t5.Sub(t4)}
	out.Valid = true
	return nil
}
