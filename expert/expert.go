// Package expert defines the contract of one Fast-WAM action-expert denoise
// step, the per-chunk inputs it cross-attends to, and the flow-matching loop
// that runs a step backend N times to turn noise into a chunk of actions.
//
// A Backend separates what is constant for a chunk (the per-layer video KV
// cache, the text context and its mask), bound once with BindChunk, from what
// changes at every step (the latents and the timestep), passed to Step. The
// CPU reference (package expert/cpu) and the QNN HTP backend (package
// expert/htp) both implement it, so the loop in this package runs unchanged on
// either.
package expert

import (
	"context"
	"fmt"
	"math"
)

// Dims is the input/output contract of one denoise step: the shapes of the
// six inputs and of the prediction. All tensors are row-major float32 with
// the batch axis (always 1) dropped.
//
//	latents      [ActionTokens, ActionDim]
//	video keys   [Layers, VideoTokens, Heads*HeadDim]
//	video values [Layers, VideoTokens, Heads*HeadDim]
//	context      [ContextTokens, TextDim]
//	context mask [ContextTokens]
//	prediction   [ActionTokens, ActionDim]
type Dims struct {
	Layers        int // transformer blocks, one KV-cache entry each (30)
	Heads         int // attention heads (24)
	HeadDim       int // width of one head (128)
	VideoTokens   int // cached video tokens per layer, Sv (98)
	ContextTokens int // text tokens plus the proprio token, L (129)
	TextDim       int // width of a raw context row, T (4096)
	ActionTokens  int // actions per chunk, S (32)
	ActionDim     int // width of one action, a (7)
}

// FullDims is the contract of the released LIBERO two-camera action expert,
// the one the shipped action_step context binary implements.
func FullDims() Dims {
	return Dims{Layers: 30, Heads: 24, HeadDim: 128, VideoTokens: 98, ContextTokens: 129,
		TextDim: 4096, ActionTokens: 32, ActionDim: 7}
}

// AttnWidth is Heads*HeadDim, the width of one cached key or value row.
func (d Dims) AttnWidth() int { return d.Heads * d.HeadDim }

// LatentLen is the number of elements of the latents and of the prediction.
func (d Dims) LatentLen() int { return d.ActionTokens * d.ActionDim }

// KVLen is the number of elements of the video keys (and of the values).
func (d Dims) KVLen() int { return d.Layers * d.VideoTokens * d.AttnWidth() }

// ContextLen is the number of elements of the context.
func (d Dims) ContextLen() int { return d.ContextTokens * d.TextDim }

// Validate reports a contract with a non-positive size.
func (d Dims) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"layers", d.Layers}, {"heads", d.Heads}, {"head dim", d.HeadDim},
		{"video tokens", d.VideoTokens}, {"context tokens", d.ContextTokens},
		{"text dim", d.TextDim}, {"action tokens", d.ActionTokens}, {"action dim", d.ActionDim},
	} {
		if f.v <= 0 {
			return fmt.Errorf("expert: %s must be positive, got %d", f.name, f.v)
		}
	}
	return nil
}

// String prints the contract as tensor shapes.
func (d Dims) String() string {
	return fmt.Sprintf("latents [1,%d,%d] video_keys/values [%d,1,%d,%d] context [1,%d,%d] mask [1,%d]",
		d.ActionTokens, d.ActionDim, d.Layers, d.VideoTokens, d.AttnWidth(),
		d.ContextTokens, d.TextDim, d.ContextTokens)
}

// Chunk holds the inputs that are constant for every denoise step of one
// action chunk. Backends read the slices during BindChunk and may keep
// references to them until the next BindChunk or Close, so the caller must
// not modify them while a chunk is being denoised.
type Chunk struct {
	VideoKeys   []float32 // [Layers, VideoTokens, AttnWidth], RMS-normed and RoPE'd by the world model
	VideoValues []float32 // [Layers, VideoTokens, AttnWidth]
	Context     []float32 // [ContextTokens, TextDim], before the expert's text embedding
	ContextMask []bool    // [ContextTokens], true where a context token may be attended

	// VisibleVideo is the number of leading video tokens the action queries
	// may attend to (V1 in the specification). Zero means all of them, which
	// is the production case of a single-frame video.
	VisibleVideo int
}

// ValidateChunk checks the chunk against the contract: every length, a finite
// value everywhere, at least one attendable context token and a visible
// video count within range. The error names the offending input.
func (d Dims) ValidateChunk(c *Chunk) error {
	if c == nil {
		return fmt.Errorf("expert: chunk is nil")
	}
	if err := checkTensor("video_keys", c.VideoKeys, d.KVLen(), d.kvShape()); err != nil {
		return err
	}
	if err := checkTensor("video_values", c.VideoValues, d.KVLen(), d.kvShape()); err != nil {
		return err
	}
	if err := checkTensor("context", c.Context, d.ContextLen(), fmt.Sprintf("[1,%d,%d]", d.ContextTokens, d.TextDim)); err != nil {
		return err
	}
	if len(c.ContextMask) != d.ContextTokens {
		return fmt.Errorf("expert: context_mask has %d elements, want %d ([1,%d])", len(c.ContextMask), d.ContextTokens, d.ContextTokens)
	}
	any := false
	for _, m := range c.ContextMask {
		any = any || m
	}
	if !any {
		return fmt.Errorf("expert: context_mask masks every context token; at least one must be attendable")
	}
	if c.VisibleVideo < 0 || c.VisibleVideo > d.VideoTokens {
		return fmt.Errorf("expert: visible video tokens %d out of range [0,%d]", c.VisibleVideo, d.VideoTokens)
	}
	return nil
}

func (d Dims) kvShape() string {
	return fmt.Sprintf("[%d,1,%d,%d]", d.Layers, d.VideoTokens, d.AttnWidth())
}

// CheckLatents checks a latents or prediction vector against the contract.
func (d Dims) CheckLatents(name string, x []float32) error {
	return checkTensor(name, x, d.LatentLen(), fmt.Sprintf("[1,%d,%d]", d.ActionTokens, d.ActionDim))
}

func checkTensor(name string, x []float32, want int, shape string) error {
	if len(x) != want {
		return fmt.Errorf("expert: %s has %d elements, want %d (%s)", name, len(x), want, shape)
	}
	if i := FirstNonFinite(x); i >= 0 {
		return fmt.Errorf("expert: %s[%d] is %v; inputs must be finite", name, i, x[i])
	}
	return nil
}

// FirstNonFinite returns the index of the first NaN or infinite element of
// x, or -1 when every element is finite.
func FirstNonFinite(x []float32) int {
	for i, v := range x {
		// v-v is 0 for finite v and NaN for NaN and ±Inf.
		if f := float64(v); f-f != 0 {
			return i
		}
	}
	return -1
}

// Backend runs one denoise step of the action expert.
//
// A backend is used by one goroutine at a time: BindChunk, then any number of
// Step calls for that chunk, then the next BindChunk. Close releases the
// backend's resources; it is safe to call more than once.
type Backend interface {
	// Dims reports the I/O contract the backend implements.
	Dims() Dims
	// BindChunk makes c the constant input of the following steps. It
	// validates c and precomputes or uploads whatever depends on it only.
	BindChunk(ctx context.Context, c *Chunk) error
	// Step writes the predicted velocity for latents at timestep tau
	// (sigma*1000) into pred. latents and pred have Dims().LatentLen()
	// elements and must not alias.
	Step(ctx context.Context, latents []float32, tau float32, pred []float32) error
	// Close releases the backend.
	Close() error
}

// RandomChunk makes a chunk of the contract's sizes filled with seeded
// standard-normal values and every context token attendable: synthetic
// input for benchmarks and smoke tests.
func (d Dims) RandomChunk(seed uint64) *Chunk {
	c := &Chunk{
		VideoKeys:   Noise(seed, d.KVLen()),
		VideoValues: Noise(seed+1, d.KVLen()),
		Context:     Noise(seed+2, d.ContextLen()),
		ContextMask: make([]bool, d.ContextTokens),
	}
	for i := range c.ContextMask {
		c.ContextMask[i] = true
	}
	return c
}

// Cosine is the cosine similarity of a and b accumulated in float64. Two
// all-zero vectors have cosine 1; one zero vector against a non-zero one
// has cosine 0.
func Cosine(a, b []float32) float64 {
	var ab, aa, bb float64
	for i := range a {
		x, y := float64(a[i]), float64(b[i])
		ab += x * y
		aa += x * x
		bb += y * y
	}
	if aa == 0 && bb == 0 {
		return 1
	}
	if aa == 0 || bb == 0 {
		return 0
	}
	return ab / math.Sqrt(aa*bb)
}

// MaxAbsDiff is max |a[i]-b[i]|.
func MaxAbsDiff(a, b []float32) float64 {
	m := 0.0
	for i := range a {
		if d := math.Abs(float64(a[i]) - float64(b[i])); d > m || d != d {
			m = d
		}
	}
	return m
}
