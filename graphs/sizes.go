// Package graphs sizes the NPU graph set of docs/graphs.md (vae_encoder,
// prefill_<i>, action_context, action_step_ctx) and plans it: it chooses
// the contiguous layer ranges of the video DiT prefill so that every graph
// fits a per-context byte limit, and places the graphs in one or two
// processes under a per-process limit. Sizes are computed from the model
// configurations (the specs' formulas), never hard-coded.
package graphs

import "fmt"

// Weights is how a graph's weight tensors are stored in its context.
type Weights int

// The weight formats the planner knows.
const (
	// FP16 stores every tensor in 2 bytes per value.
	FP16 Weights = iota
	// W8 stores matrices (and convolution kernels) in 1 byte per value
	// plus, per output channel, a float32 scale and an int32 offset;
	// vectors (biases, gains, modulations, constant tables) in 4 bytes
	// (QNN's int32 bias, float32 gains).
	W8
	// W4 stores matrices in half a byte per value, plus one byte per
	// block of 64 input values (the block scale of QNN's low-power block
	// quantization) and, per output channel, a float32 scale and an int32
	// offset; vectors as W8.
	W4
)

// Block is W4's quantization block along a matrix's input axis.
const Block = 64

// ParseWeights reads "fp16", "w8" or "w4".
func ParseWeights(s string) (Weights, error) {
	switch s {
	case "fp16":
		return FP16, nil
	case "w8":
		return W8, nil
	case "w4":
		return W4, nil
	}
	return 0, fmt.Errorf("weight format %q: want fp16, w8 or w4", s)
}

// String is the format's name as ParseWeights reads it.
func (w Weights) String() string {
	switch w {
	case FP16:
		return "fp16"
	case W8:
		return "w8"
	case W4:
		return "w4"
	}
	return fmt.Sprintf("Weights(%d)", int(w))
}

// Tensors counts a graph's (or a layer's) parameters: Rows output channels
// of matrices with MatValues values in all, and VecValues values of
// vectors and constants.
type Tensors struct {
	MatValues int64 // values of matrices and convolution kernels
	Rows      int64 // their output channels (one scale and offset each when quantized)
	VecValues int64 // values of biases, gains, modulations and constant tables
}

// mat adds an out x in matrix.
func (t *Tensors) mat(out, in int) {
	t.MatValues += int64(out) * int64(in)
	t.Rows += int64(out)
}

// vec adds n vector values.
func (t *Tensors) vec(n int) { t.VecValues += int64(n) }

// Add returns t + u.
func (t Tensors) Add(u Tensors) Tensors {
	return Tensors{t.MatValues + u.MatValues, t.Rows + u.Rows, t.VecValues + u.VecValues}
}

// Params is the number of stored values (without quantization overhead).
func (t Tensors) Params() int64 { return t.MatValues + t.VecValues }

// Bytes is the size of the tensors stored as w.
func (t Tensors) Bytes(w Weights) int64 {
	switch w {
	case W8:
		return t.MatValues + 8*t.Rows + 4*t.VecValues
	case W4:
		return (t.MatValues+1)/2 + (t.MatValues+Block-1)/Block + 8*t.Rows + 4*t.VecValues
	default:
		return 2 * (t.MatValues + t.VecValues)
	}
}

// ActionConfig is the action expert's shape (action-step.md §2).
type ActionConfig struct {
	Hidden, FFN, Heads, HeadDim, Layers, TextDim, FreqDim, ActionDim, ActionTokens int
	VideoTokens, ContextTokens                                                     int
}

// FullAction is the released action expert for LIBERO (action-step.md §2, §0).
func FullAction() ActionConfig {
	return ActionConfig{Hidden: 1024, FFN: 4096, Heads: 24, HeadDim: 128, Layers: 30, TextDim: 4096, FreqDim: 256,
		ActionDim: 7, ActionTokens: 32, VideoTokens: 98, ContextTokens: 129}
}

// WorldConfig is the video DiT's shape (world-model.md §5, §6.2).
type WorldConfig struct {
	Dim, FFN, Heads, HeadDim, Layers, TextDim, FreqDim, ZDim int
	LatentH, LatentW, ContextTokens                          int
}

// FullWorld is Wan2.2-TI2V-5B's DiT on the 224x448 LIBERO image.
func FullWorld() WorldConfig {
	return WorldConfig{Dim: 3072, FFN: 14336, Heads: 24, HeadDim: 128, Layers: 30, TextDim: 4096, FreqDim: 256,
		ZDim: 48, LatentH: 14, LatentW: 28, ContextTokens: 129}
}

// VAEConfig is the VAE encoder's shape (world-model.md §4).
type VAEConfig struct {
	Dim, ZDim, ImageH, ImageW int
}

// FullVAE is Wan2.2's VAE (base width 160, 48 latent channels) on 224x448.
func FullVAE() VAEConfig { return VAEConfig{Dim: 160, ZDim: 48, ImageH: 224, ImageW: 448} }

func (c ActionConfig) validate() error {
	for _, v := range []struct {
		n string
		v int
	}{{"hidden", c.Hidden}, {"ffn", c.FFN}, {"heads", c.Heads}, {"head dim", c.HeadDim}, {"layers", c.Layers},
		{"text dim", c.TextDim}, {"freq dim", c.FreqDim}, {"action dim", c.ActionDim}, {"action tokens", c.ActionTokens},
		{"video tokens", c.VideoTokens}, {"context tokens", c.ContextTokens}} {
		if v.v <= 0 || v.v > 1<<20 {
			return fmt.Errorf("action expert %s %d: want 1..%d", v.n, v.v, 1<<20)
		}
	}
	return nil
}

func (c WorldConfig) validate() error {
	for _, v := range []struct {
		n string
		v int
	}{{"dim", c.Dim}, {"ffn", c.FFN}, {"heads", c.Heads}, {"head dim", c.HeadDim}, {"layers", c.Layers},
		{"text dim", c.TextDim}, {"freq dim", c.FreqDim}, {"z dim", c.ZDim}, {"latent height", c.LatentH},
		{"latent width", c.LatentW}, {"context tokens", c.ContextTokens}} {
		if v.v <= 0 || v.v > 1<<20 {
			return fmt.Errorf("video DiT %s %d: want 1..%d", v.n, v.v, 1<<20)
		}
	}
	if c.Heads*c.HeadDim != c.Dim {
		return fmt.Errorf("video DiT heads %d x head dim %d = %d, want the width %d", c.Heads, c.HeadDim, c.Heads*c.HeadDim, c.Dim)
	}
	if c.LatentH%2 != 0 || c.LatentW%2 != 0 {
		return fmt.Errorf("video DiT latent %dx%d: want even sizes (the 2x2 patch)", c.LatentH, c.LatentW)
	}
	return nil
}

func (c VAEConfig) validate() error {
	if c.Dim <= 0 || c.Dim > 1<<16 || c.ZDim <= 0 || c.ZDim > 1<<16 {
		return fmt.Errorf("VAE width %d, latent channels %d: want 1..%d", c.Dim, c.ZDim, 1<<16)
	}
	if c.ImageH <= 0 || c.ImageW <= 0 || c.ImageH%32 != 0 || c.ImageW%32 != 0 || c.ImageH > 1<<14 || c.ImageW > 1<<14 {
		return fmt.Errorf("VAE image %dx%d: want positive multiples of 32 up to %d", c.ImageH, c.ImageW, 1<<14)
	}
	return nil
}

// attnBlock is one attention's tensors: q, k, v (in -> a), o (a -> d),
// their biases and the two RMSNorm gains.
func attnBlock(t *Tensors, d, in, a int) {
	for range 3 {
		t.mat(a, in)
		t.vec(a)
	}
	t.mat(d, a)
	t.vec(d)
	t.vec(2 * a)
}

// ActionContextTensors is action_context: the text MLP and every layer's
// cross-attention k, v (with biases) and norm_k.
func ActionContextTensors(c ActionConfig) Tensors {
	var t Tensors
	a := c.Heads * c.HeadDim
	t.mat(c.Hidden, c.TextDim)
	t.vec(c.Hidden)
	t.mat(c.Hidden, c.Hidden)
	t.vec(c.Hidden)
	for range c.Layers {
		t.mat(a, c.Hidden)
		t.mat(a, c.Hidden)
		t.vec(3 * a)
	}
	return t
}

// ActionStepLayerTensors is one layer of action_step_ctx: everything of the
// block except the cross-attention k, v and norm_k (action-step.md §1.3).
func ActionStepLayerTensors(c ActionConfig) Tensors {
	var t Tensors
	d, a := c.Hidden, c.Heads*c.HeadDim
	t.vec(6 * d) // modulation
	attnBlock(&t, d, d, a)
	t.mat(a, d) // cross q
	t.vec(a)
	t.mat(d, a) // cross o
	t.vec(d)
	t.vec(a) // cross norm_q
	t.vec(2 * d)
	t.mat(c.FFN, d)
	t.vec(c.FFN)
	t.mat(d, c.FFN)
	t.vec(d)
	return t
}

// ActionStepCtxTensors is action_step_ctx: its layers, the time MLP and
// projection, the action encoder and head, and the constant RoPE and
// sinusoid tables.
func ActionStepCtxTensors(c ActionConfig) Tensors {
	var t Tensors
	d := c.Hidden
	for range c.Layers {
		t = t.Add(ActionStepLayerTensors(c))
	}
	t.mat(d, c.ActionDim)
	t.vec(d)
	t.mat(d, c.FreqDim)
	t.vec(d)
	t.mat(d, d)
	t.vec(d)
	t.mat(6*d, d)
	t.vec(6 * d)
	t.mat(c.ActionDim, d)
	t.vec(c.ActionDim)
	t.vec(2*c.ActionTokens*c.Heads*c.HeadDim/2 + c.FreqDim/2) // RoPE cos/sin, sinusoid frequencies
	return t
}

// ActionStepTensors is today's monolithic action_step: both parts.
func ActionStepTensors(c ActionConfig) Tensors {
	return ActionContextTensors(c).Add(ActionStepCtxTensors(c))
}

// WorldLayerTensors is one full prefill layer, with its modulation folded
// with the t = 0 time projection into one [6, D] constant.
func WorldLayerTensors(c WorldConfig) Tensors {
	var t Tensors
	d := c.Dim
	t.vec(6 * d)
	attnBlock(&t, d, d, d)
	attnBlock(&t, d, d, d)
	t.vec(2 * d)
	t.mat(c.FFN, d)
	t.vec(c.FFN)
	t.mat(d, c.FFN)
	t.vec(d)
	return t
}

// WorldLastLayerTensors is the trimmed last layer (world-model.md §5.6):
// its modulation, self_attn k and v with biases, and norm_k.
func WorldLastLayerTensors(c WorldConfig) Tensors {
	var t Tensors
	d := c.Dim
	t.vec(6 * d)
	t.mat(d, d)
	t.mat(d, d)
	t.vec(3 * d)
	return t
}

// WorldStemTensors is what prefill_0 adds: the patch embedding (a 2x2
// stride-2 convolution) and the video text MLP. The time MLP is folded.
func WorldStemTensors(c WorldConfig) Tensors {
	var t Tensors
	t.mat(c.Dim, 4*c.ZDim)
	t.vec(c.Dim)
	t.mat(c.Dim, c.TextDim)
	t.vec(c.Dim)
	t.mat(c.Dim, c.Dim)
	t.vec(c.Dim)
	return t
}

// WorldRangeConstants is every prefill graph's RoPE cos/sin tables.
func WorldRangeConstants(c WorldConfig) Tensors {
	return Tensors{VecValues: 2 * int64(c.LatentH/2*c.LatentW/2) * int64(c.Dim/2)}
}

// VAETensors is vae_encoder at T = 1: the last temporal tap of every 3x3x3
// kernel, the 1x1 shortcuts, the stride-2 downsamples, the middle
// attention, the head, conv1's first ZDim rows (normalisation folded), and
// the graph's constants (the one-hot patchify and AvgDown kernels, the
// zero padding rows and columns).
func VAETensors(c VAEConfig) Tensors {
	var t Tensors
	d := c.Dim
	dims := []int{d, d, 2 * d, 4 * d, 4 * d}
	conv3 := func(out, in int) { t.mat(out, 9*in); t.vec(out) }
	res := func(in, out int) {
		t.vec(in + out) // the two RMSc gains
		conv3(out, in)
		conv3(out, out)
		if in != out {
			t.mat(out, in)
			t.vec(out)
		}
	}
	t.vec(12 * 3 * 4) // patchify
	conv3(d, 12)
	h, w := c.ImageH/2, c.ImageW/2
	for s := range 4 {
		res(dims[s], dims[s+1])
		res(dims[s+1], dims[s+1])
		if s != 3 {
			conv3(dims[s+1], dims[s+1])
			t.vec(dims[s+1] * (h + w + 1)) // zero column and row
			h, w = h/2, w/2
		}
		if s == 1 || s == 2 {
			t.vec(2 * dims[s] * dims[s]) // the one-hot interleave kernel
		}
	}
	m := dims[4]
	res(m, m)
	t.vec(m)
	t.mat(3*m, m)
	t.vec(3 * m)
	t.mat(m, m)
	t.vec(m)
	res(m, m)
	t.vec(m)
	conv3(2*c.ZDim, m)
	t.mat(c.ZDim, 2*c.ZDim)
	t.vec(c.ZDim)
	return t
}
