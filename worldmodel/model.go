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
	// KV, when not nil, computes the video K/V from the image tensor and
	// the context instead of the CPU VAE and DiT (for example the HTP
	// graph chain, expert/htp/prefill.Chain). VAEWeights is then not
	// read; DiTWeights still gives the sizes and the proprio encoder.
	// The caller keeps KV open while the Model is in use and closes it.
	KV KVStage
}

// KVStage is the part of Run that turns the preprocessed image tensor
// ([3, H, W]) and the assembled context ([L, T]) into the per-layer video
// K and V ([N, 1, Sv, A] each): the CPU VAE and DiT, or an accelerator's
// graphs. LoadModel checks its sizes against the model's.
type KVStage interface {
	// ImageLen, ContextLen and KVLen are the values RunKV's image,
	// context, keys and values must hold.
	ImageLen() int
	ContextLen() int
	KVLen() int
	// RunKV writes keys and values (both F32 or both F16). A cancelled
	// ctx may leave them partly written.
	RunKV(ctx context.Context, image, context []float32, keys, values expert.TensorView) error
}

// cpuKV is the CPU KVStage: the VAE encoder, then the DiT prefill.
type cpuKV struct {
	imgLen int
	vae    *VAEEncoder
	dit    *DiT
	latent []float32
	vaeDur time.Duration // the last run's VAE time
}

func (c *cpuKV) ImageLen() int   { return c.imgLen }
func (c *cpuKV) ContextLen() int { return c.dit.size.ContextRows * c.dit.cfg.TextDim }
func (c *cpuKV) KVLen() int      { return c.dit.KVLen() }

func (c *cpuKV) RunKV(ctx context.Context, image, cond []float32, keys, values expert.TensorView) error {
	t0 := time.Now()
	if err := c.vae.Encode(c.latent, image); err != nil {
		return err
	}
	c.vaeDur = time.Since(t0)
	if err := ctx.Err(); err != nil {
		return err
	}
	return c.dit.Prefill(ctx, c.latent, cond, keys, values)
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

// StageTimes are the wall-clock durations of one Run's stages. With a
// ModelOptions.KV stage, Prefill is the whole stage (VAE graph and
// prefill chain) and VAE is zero.
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

// Model is the whole world model (world-model.md §0), on the CPU or with
// its K/V stage on an accelerator (ModelOptions.KV): camera
// images, proprio state and instruction to the video K/V cache, the
// context and its mask, as the action expert's chunk needs them. A Model
// is not safe for concurrent use.
type Model struct {
	pre   *Preprocessor
	kv    KVStage // the CPU VAE and DiT (*cpuKV) or ModelOptions.KV
	dit   *DiT
	norm  *StateNormalizer
	cache TextCache

	image, pnorm, row []float32
	instr             string     // the instruction of text
	text              *TextEntry // nil until the first Run
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
	kv := opts.KV
	if kv == nil {
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
		kv = &cpuKV{imgLen: 3 * fw * fh, vae: vae, dit: dit, latent: make([]float32, LatentChannels*(fh/16)*(fw/16))}
	}
	m := &Model{
		pre: pre, kv: kv, dit: dit, norm: norm, cache: tc,
		image: make([]float32, 3*fw*fh),
		pnorm: make([]float32, c.ProprioDim), row: make([]float32, c.TextDim),
	}
	d := m.Dims()
	if kv.ImageLen() != len(m.image) || kv.ContextLen() != d.ContextRows*d.TextDim || kv.KVLen() != d.Layers*d.VideoTokens*d.Width {
		return nil, fmt.Errorf("worldmodel: the K/V stage takes an image of %d values and a context of %d and gives K/V of %d each; "+
			"the model needs %d (3 × %d × %d), %d (%d × %d) and %d (%d layers × %d tokens × %d)",
			kv.ImageLen(), kv.ContextLen(), kv.KVLen(), len(m.image), fh, fw, d.ContextRows*d.TextDim, d.ContextRows, d.TextDim,
			d.Layers*d.VideoTokens*d.Width, d.Layers, d.VideoTokens, d.Width)
	}
	return m, nil
}

// Dims are the sizes of a Model's outputs.
type Dims struct {
	Layers, VideoTokens, Width int // N, Sv, A: Keys and Values are [N, 1, Sv, A]
	ContextRows, TextDim       int // L, T: Context is [L, T]
}

// Close stops the CPU K/V stage's worker goroutines (the VAE encoder's);
// a K/V stage given in ModelOptions.KV stays the caller's to close. The
// model must not be run after Close. Calling it again does nothing.
func (m *Model) Close() {
	if c, ok := m.kv.(*cpuKV); ok {
		c.vae.Close()
	}
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
	if err := ProprioToken(m.row, m.dit.w.ProprioW, m.dit.w.ProprioB, m.pnorm); err != nil {
		return err
	}
	if err := AssembleContext(out.Context, m.text.Text, m.row); err != nil {
		return err
	}
	ContextMask(out.Mask)
	t3 := time.Now()
	if err := m.kv.RunKV(ctx, m.image, out.Context, out.Keys, out.Values); err != nil {
		return err
	}
	t4 := time.Now()
	out.Times = StageTimes{Text: t1.Sub(t0), Preprocess: t2.Sub(t1), Proprio: t3.Sub(t2), Prefill: t4.Sub(t3)}
	if c, ok := m.kv.(*cpuKV); ok {
		out.Times.VAE, out.Times.Prefill = c.vaeDur, out.Times.Prefill-c.vaeDur
	}
	out.Valid = true
	return nil
}
