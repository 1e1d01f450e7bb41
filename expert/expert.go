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
	"slices"
	"unsafe"
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

// InputError reports an input outside the step contract. Every error of
// ValidateChunk and CheckLatents is one, so a caller can tell bad input
// (errors.As) from a failing backend.
type InputError struct {
	Input string // the input's name: video_keys, context_mask, latents_action, ...
	Index int    // the first non-finite element, or -1 for a size or value problem
	msg   string
}

func (e *InputError) Error() string { return "expert: " + e.msg }

// NonFinite reports whether the input holds a NaN or an infinity.
func (e *InputError) NonFinite() bool { return e.Index >= 0 }

// InvalidInput returns an *InputError for a value of input that a backend
// cannot accept (not a non-finite one), so callers handle it as bad input.
func InvalidInput(input, format string, args ...any) error {
	return inputErr(input, -1, format, args...)
}

func inputErr(input string, index int, format string, args ...any) error {
	return &InputError{Input: input, Index: index, msg: fmt.Sprintf(format, args...)}
}

// ValidateChunk checks the chunk against the contract: every length, a finite
// value everywhere, at least one attendable context token and a visible
// video count within range. The error is an *InputError naming the input.
func (d Dims) ValidateChunk(c *Chunk) error {
	if c == nil {
		return inputErr("chunk", -1, "chunk is nil")
	}
	kv := func() string { return fmt.Sprintf("[%d,1,%d,%d]", d.Layers, d.VideoTokens, d.AttnWidth()) }
	if err := checkTensor("video_keys", c.VideoKeys, d.KVLen(), kv); err != nil {
		return err
	}
	if err := checkTensor("video_values", c.VideoValues, d.KVLen(), kv); err != nil {
		return err
	}
	ctxShape := func() string { return fmt.Sprintf("[1,%d,%d]", d.ContextTokens, d.TextDim) }
	if err := checkTensor("context", c.Context, d.ContextLen(), ctxShape); err != nil {
		return err
	}
	return d.ValidateMask(c.ContextMask, c.VisibleVideo)
}

// ValidateMask checks the small per-chunk inputs, as ValidateChunk does
// after the tensors: the context mask's length, at least one attendable
// context token, and a visible video count within [0, VideoTokens]. The
// error is an *InputError naming the input.
func (d Dims) ValidateMask(mask []bool, visibleVideo int) error {
	if len(mask) != d.ContextTokens {
		return inputErr("context_mask", -1, "context_mask has %d elements, want %d ([1,%d])", len(mask), d.ContextTokens, d.ContextTokens)
	}
	if !slices.Contains(mask, true) {
		return inputErr("context_mask", -1, "context_mask masks every context token; at least one must be attendable")
	}
	if visibleVideo < 0 || visibleVideo > d.VideoTokens {
		return inputErr("visible_video", -1, "visible video tokens %d out of range [0,%d]", visibleVideo, d.VideoTokens)
	}
	return nil
}

// NonFiniteInput returns the *InputError ValidateChunk reports for the
// non-finite value v at index of input, for a caller that checks the
// values itself while moving them (see InputBinder).
func NonFiniteInput(input string, index int, v float32) error {
	return inputErr(input, index, "%s[%d] is %v; inputs must be finite", input, index, v)
}

// CheckLatents checks a latents or prediction vector against the contract.
// It allocates only when it reports an error.
func (d Dims) CheckLatents(name string, x []float32) error {
	return checkTensor(name, x, d.LatentLen(), func() string { return fmt.Sprintf("[1,%d,%d]", d.ActionTokens, d.ActionDim) })
}

// checkTensor checks a tensor's length and values; shape formats the
// expected shape for the message.
func checkTensor(name string, x []float32, want int, shape func() string) error {
	if len(x) != want {
		return inputErr(name, -1, "%s has %d elements, want %d (%s)", name, len(x), want, shape())
	}
	if i := FirstNonFinite(x); i >= 0 {
		return NonFiniteInput(name, i, x[i])
	}
	return nil
}

// FirstNonFinite returns the index of the first NaN or infinite element of
// x, or -1 when every element is finite. The per-chunk inputs are tens of
// megabytes, so it tests eight values at a time, two per 64-bit word, and
// looks for the exact index only in a block that holds one.
func FirstNonFinite(x []float32) int {
	// View whole blocks of eight values as four words (slice data is at
	// least 4-byte aligned, and unaligned 8-byte loads are fine on amd64
	// and arm64).
	blocks := len(x) / 8
	var words []uint64
	if blocks > 0 {
		words = unsafe.Slice((*uint64)(unsafe.Pointer(&x[0])), 4*blocks)
	}
	for b := 0; b < blocks; b++ {
		w := words[4*b : 4*b+4 : 4*b+4]
		if hasNonFinite(w[0])|hasNonFinite(w[1])|hasNonFinite(w[2])|hasNonFinite(w[3]) != 0 {
			return scanFinite(x, 8*b, 8*b+8)
		}
	}
	return scanFinite(x, 8*blocks, len(x))
}

// hasNonFinite is non-zero when either float32 packed in w has an all-ones
// exponent (NaN or ±Inf). z has a zero 32-bit lane exactly there; z never
// sets a lane's top bit, so subtracting one sets that bit only in a zero
// lane (or, by its borrow, in the lane above one).
func hasNonFinite(w uint64) uint64 {
	const (
		expMask   = 0x7f800000_7f800000
		lowOnes   = 0x00000001_00000001
		laneSigns = 0x80000000_80000000
	)
	z := (w & expMask) ^ expMask
	return (z - lowOnes) &^ z & laneSigns
}

// scanFinite returns the first non-finite index of x[lo:hi], or -1.
func scanFinite(x []float32, lo, hi int) int {
	for i := lo; i < hi; i++ {
		if !finite(x[i]) {
			return i
		}
	}
	return -1
}

func finite(v float32) bool { return math.Float32bits(v)&0x7f800000 != 0x7f800000 }

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

// TensorView is a writable view of one of a backend's per-chunk input
// buffers in the element type the backend keeps it in: exactly one of F32
// and F16 is set, with the tensor's element count.
type TensorView struct {
	F32 []float32
	F16 []uint16 // IEEE 754 binary16 bit patterns, host byte order
}

// Len is the view's element count.
func (v TensorView) Len() int { return len(v.F32) + len(v.F16) }

// InputViews are the views of the three large per-chunk inputs, laid out
// as in Chunk.
type InputViews struct {
	VideoKeys, VideoValues, Context TensorView
}

// InputBinder is an optional interface of a Backend whose caller may write
// the per-chunk tensors straight into the backend's own input buffers
// (shared device memory, say), so that a chunk's data crosses memory once
// on its way from a message to the device, instead of being copied into a
// Chunk and then again by BindChunk.
//
// Inputs unbinds the bound chunk (a Step fails until the next bind) and
// returns the views; the caller fills every element of the three and
// calls BindInputs with the mask and the visible video count, which
// validates them as ValidateMask does (and whatever else the backend
// requires) and binds what the views hold. The caller is responsible for
// the values being finite: it checks them while writing them and does not
// call BindInputs for a chunk that is not. The views are valid until the
// next BindInputs, BindChunk, a Reload or Close; nothing else may call the
// backend while they are being written. A chunk bound this way lives only
// in the backend's buffers: a backend that reloads itself (the HTP one,
// after a DSP restart) cannot rebind it.
type InputBinder interface {
	Backend
	Inputs() (InputViews, error)
	BindInputs(ctx context.Context, mask []bool, visibleVideo int) error
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
