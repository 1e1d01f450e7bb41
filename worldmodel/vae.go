package worldmodel

import (
	"fmt"
	"math"
	"runtime"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/internal/kernels"
)

// MaxVAESide bounds the image height and width the encoder accepts: at the
// real width (d = 160) a 1024 × 1024 image needs about 1 GB of
// activations, and the middle attention's score matrix grows with the
// fourth power of the side.
const MaxVAESide = 1024

// VAEEncoder runs the Wan2.2 VAE encoder at T = 1 (one frame) as rank-3
// operations on [C, h, w] activations (spec §4): a [3, H, W] image in
// [−1, 1] to the normalised latent mean [48, H/16, W/16]. Its scratch is
// made once, for one image size; RMSc, SiLU and the copies around the
// convolutions' products are shared among GOMAXPROCS goroutines,
// persistent workers of the encoder started on the first Encode (results
// do not depend on their number), so an Encode allocates nothing. The 3×3
// convolutions are nine products each, on the input with its zero border
// (vaeconv.go); the encoder keeps their weights reordered tap by tap, a
// second copy of nearly all the weights. Close stops them (so does the garbage collector, once
// the encoder is unreachable). A VAEEncoder is not safe for concurrent use.
type VAEEncoder struct {
	w       *VAEWeights
	height  int
	width   int
	gemm    cpu.Gemm
	pool    *workerPool // the element-wise work
	rmsc    rmscTask
	avg     avgDownTask
	patch   patchTask
	phase   phaseTask
	compact compactTask

	a, b, c, t, s []float32           // activations, each of the largest activation's length
	pad           []float32           // a 3×3 convolution's input with its zero border (vaeconv.go)
	wide          []float32           // a 3×3 convolution's output rows, padded width
	taps          map[*Conv][]float32 // each 3×3 convolution's weights tap by tap (convTaps)
	norm          []float64           // per-pixel sums of squares of RMSc
	factor        []float32           // per-pixel factors of RMSc
	scores        []float32           // the attention's [n, n]
	invStd        [LatentChannels]float32

	// trace, when set (tests), sees each stage boundary's activation.
	trace func(name string, x []float32, c, h, w int)
}

// NewVAEEncoder makes an encoder for height × width images (positive
// multiples of 16, at most MaxVAESide) computing its products with gemm
// (nil: gonum's pure Go; see cpu.PickGemm). It copies the 3×3
// convolutions' weights, reordered; w must not change afterwards.
func NewVAEEncoder(w *VAEWeights, height, width int, gemm cpu.Gemm) (*VAEEncoder, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	if height < 16 || width < 16 || height%16 != 0 || width%16 != 0 || height > MaxVAESide || width > MaxVAESide {
		return nil, fmt.Errorf("worldmodel: VAE encoder: image of %d × %d (height × width): want each side a multiple of 16 in 16..%d", height, width, MaxVAESide)
	}
	if gemm == nil {
		gemm = gonum.Implementation{}
	}
	d := w.Dim
	p := height * width / 4 // pixels after patchify
	n := p / 64             // tokens of the middle attention
	act := max(12, d) * p
	act = max(act, 12*d*n, 2*LatentChannels*n)
	pad, wide := padLength(w, height, width)
	e := &VAEEncoder{
		w: w, height: height, width: width, gemm: gemm, pool: newWorkerPool(runtime.GOMAXPROCS(0)),
		a: make([]float32, act), b: make([]float32, act), c: make([]float32, act),
		t: make([]float32, act), s: make([]float32, act),
		pad: make([]float32, pad), wide: make([]float32, wide), taps: map[*Conv][]float32{},
		norm: make([]float64, p), factor: make([]float32, p), scores: make([]float32, n*n),
	}
	for _, cv := range allConv3(w) {
		e.taps[cv] = convTaps(cv)
	}
	for i, s := range vaeLatentStd {
		e.invStd[i] = 1 / s // upstream's reciprocal in float32 (spec §4.9)
	}
	runtime.AddCleanup(e, (*workerPool).close, e.pool)
	return e, nil
}

// Close stops the encoder's worker goroutines. The encoder must not be
// used afterwards. Calling Close again does nothing.
func (e *VAEEncoder) Close() { e.pool.close() }

// LatentShape is the latent's [48, H/16, W/16].
func (e *VAEEncoder) LatentShape() [3]int {
	return [3]int{LatentChannels, e.height / 16, e.width / 16}
}

// Encode writes the normalised latent mean [48, H/16, W/16] of image
// [3, H, W] (the [1, 3, H, W] tensor of Preprocessor.Tensor) into latent.
// A buffer of the wrong length, or an image holding a value that is not
// finite, is refused before anything is computed.
func (e *VAEEncoder) Encode(latent, image []float32) error {
	H, W := e.height, e.width
	if len(image) != 3*H*W {
		return fmt.Errorf("worldmodel: VAE encoder: image of %d values, want 3 × %d × %d = %d", len(image), H, W, 3*H*W)
	}
	if want := LatentChannels * (H / 16) * (W / 16); len(latent) != want {
		return fmt.Errorf("worldmodel: VAE encoder: latent buffer of %d values, want %d × %d × %d = %d", len(latent), LatentChannels, H/16, W/16, want)
	}
	for i, v := range image {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("worldmodel: VAE encoder: image value %d (channel %d, row %d, column %d) is %v, want a finite number", i, i/(H*W), i/W%H, i%W, v)
		}
	}
	w := e.w
	dims := vaeDims(w.Dim)
	h, wd := H/2, W/2
	e.patch = patchTask{pad: e.pad, x: image, H: H, W: W}
	e.pool.run(12, 3*H*W, &e.patch)
	x := e.a
	e.conv3(x, &w.Conv1, h, wd, 1, nil)
	e.emit("conv1", x, dims[0], h, wd)
	for s := range 4 {
		st := &w.Stages[s]
		x0, y, z := x, e.b, e.c
		e.resBlock(y, x0, &st.Res[0], h, wd)
		e.resBlock(z, y, &st.Res[1], h, wd)
		oh, ow := h, wd
		if st.Down != nil {
			oh, ow = h/2, wd/2
			e.phaseInput(z, dims[s+1], h, wd)
			e.conv3(y, st.Down, h, wd, 2, nil)
			z = y
		}
		ft, fs := 1, 1
		if s == 1 || s == 2 {
			ft = 2
		}
		if s != 3 {
			fs = 2
		}
		e.avg = avgDownTask{y: z, x0: x0, in: dims[s], out: dims[s+1], h: h, w: wd, ft: ft, fs: fs}
		e.pool.run(dims[s+1], dims[s]*h*wd, &e.avg)
		// The stage's output becomes e.a; the buffers rotate.
		e.a, e.b, e.c = z, x0, other(e.b, e.c, z, x0)
		x, h, wd = e.a, oh, ow
		e.emit(stageNames[s], x, dims[s+1], h, wd)
	}
	c := dims[4]
	e.resBlock(e.b, x, &w.Middle0, h, wd)
	e.attention(e.b, h*wd)
	e.resBlock(x, e.b, &w.Middle2, h, wd)
	e.emit("middle", x, c, h, wd)
	e.rmscSilu(e.pad, x[:c*h*wd], w.HeadGamma, c, h, wd, true, true)
	e.conv3(e.b, &w.Head, h, wd, 1, nil)
	e.emit("head", e.b, 2*LatentChannels, h, wd)
	n := h * wd
	e.conv1x1(latent, e.b, &w.Out, n)
	e.emit("mu", latent, LatentChannels, h, wd)
	for ch := range LatentChannels {
		m, inv := vaeLatentMean[ch], e.invStd[ch]
		row := latent[ch*n : (ch+1)*n]
		for i, v := range row {
			row[i] = (v - m) * inv
		}
	}
	return nil
}

// Flops is the useful work of one Encode, 2 per multiply-add: every
// convolution's product at its output size (the last temporal tap only)
// and the attention's two products.
func (e *VAEEncoder) Flops() float64 {
	w := e.w
	n := float64(e.height * e.width / 4) // pixels at the current resolution
	conv := func(c *Conv, pixels float64) float64 {
		return 2 * float64(c.Out*c.In*c.K*c.K) * pixels
	}
	res := func(r *ResBlock, pixels float64) float64 {
		f := conv(&r.Conv2, pixels) + conv(&r.Conv6, pixels)
		if r.Shortcut != nil {
			f += conv(r.Shortcut, pixels)
		}
		return f
	}
	f := conv(&w.Conv1, n)
	for s := range w.Stages {
		st := &w.Stages[s]
		f += res(&st.Res[0], n) + res(&st.Res[1], n)
		if st.Down != nil {
			n /= 4
			f += conv(st.Down, n)
		}
	}
	c := float64(w.Proj.In)
	f += res(&w.Middle0, n) + res(&w.Middle2, n) + conv(&w.QKV, n) + conv(&w.Proj, n) + 2*2*n*n*c
	return f + conv(&w.Head, n) + conv(&w.Out, n)
}

// stageNames name the stage boundaries for the trace.
var stageNames = [4]string{"stage0", "stage1", "stage2", "stage3"}

// other returns whichever of b, c is neither z nor x0: the third buffer.
func other(b, c, z, x0 []float32) []float32 {
	if &b[0] != &z[0] && &b[0] != &x0[0] {
		return b
	}
	return c
}

// emit hands an activation to the trace, when one is set.
func (e *VAEEncoder) emit(name string, x []float32, c, h, w int) {
	if e.trace != nil {
		e.trace(name, x[:c*h*w], c, h, w)
	}
}

// patchTask writes the space-to-depth of image x [3, H, W] (spec §4.2)
// into pad, laid out for a stride-1 3×3 convolution of [12, H/2, W/2],
// over a range of its 12 channels. The column offset r comes before the
// row offset q in the channel index: channel c·4 + 2r + q holds
// x[c, 2i + q, 2j + r] at (i, j).
type patchTask struct {
	pad, x []float32
	H, W   int
}

func (t *patchTask) run(lo, hi int) {
	H, W := t.H, t.W
	h, w := H/2, W/2
	wp, plane, _ := padGeometry(h, w, 1)
	for ch := lo; ch < hi; ch++ {
		c, r, q := ch/4, ch%4/2, ch%2
		p := t.pad[ch*plane : (ch+1)*plane]
		clear(p[:wp])
		clear(p[(h+1)*wp:])
		for i := range h {
			d := p[(i+1)*wp : (i+2)*wp]
			d[0], d[w+1] = 0, 0
			src := t.x[c*H*W+(2*i+q)*W+r:]
			for j := range w {
				d[j+1] = src[2*j]
			}
		}
	}
}

// rmscSilu writes RMSc(x; γ) (spec §4.1: over the c channels at each of
// the h·w pixels of x [c, h, w], x·sqrt(c)/max(‖x‖₂, 1e-12)·γ), then SiLU
// when silu is set, into y: as [c, h, w] when padded is false, else into
// e.pad laid out for a stride-1 3×3 convolution (y is then e.pad). The
// norms are computed in float64 (kernels.AddSquares) and each pixel's
// factor sqrt(c)/‖x‖ rounded once to float32; the scaling and SiLU are
// float32 (kernels.ScaleSiLU, within a few float32 ulp of float64). Both
// run on AVX2 where the CPU has it, the same bits as their portable
// loops. The rows are shared among the encoder's workers.
func (e *VAEEncoder) rmscSilu(y, x, gamma []float32, c, h, w int, silu, padded bool) {
	e.rmsc = rmscTask{y: y, x: x, gamma: gamma, c: c, h: h, w: w, xwp: w, silu: silu, padded: padded, norm: e.norm, factor: e.factor}
	e.pool.run(h, c*h*w, &e.rmsc)
}

// rmscSiluWide is rmscSilu (SiLU, into e.pad) of a stride-1 3×3
// convolution's output still in e.wide (rows w + 2 wide) plus its bias
// (in float32, as conv3 would have added it).
func (e *VAEEncoder) rmscSiluWide(gamma, bias []float32, c, h, w int) {
	e.rmsc = rmscTask{y: e.pad, x: e.wide, bias: bias, gamma: gamma, c: c, h: h, w: w, xwp: w + 2, silu: true, padded: true, norm: e.norm, factor: e.factor}
	e.pool.run(h, c*h*w, &e.rmsc)
}

// rmscTask is rmscSilu over a range of image rows. Its input x is
// [c, h, xwp] (the first w columns of each row used), plus bias[channel]
// when bias is not nil.
type rmscTask struct {
	y, x, gamma, bias []float32
	c, h, w, xwp      int
	silu, padded      bool
	norm              []float64
	factor            []float32
}

func (t *rmscTask) run(lo, hi int) {
	c, h, w := t.c, t.h, t.w
	ss := t.norm[lo*w : hi*w]
	clear(ss)
	var b float32
	for ch := range c {
		if t.bias != nil {
			b = t.bias[ch]
		}
		for r := lo; r < hi; r++ {
			kernels.AddSquares(ss[(r-lo)*w:][:w], t.x[(ch*h+r)*t.xwp:][:w], b)
		}
	}
	sc := math.Sqrt(float64(c))
	fs := t.factor[lo*w : hi*w]
	for i, s := range ss {
		fs[i] = float32(sc / max(math.Sqrt(s), 1e-12))
	}
	// The output layout: plane length, row width and the first pixel's
	// offset.
	plane, wp, off := h*w, w, 0
	if t.padded {
		wp = w + 2
		plane, off = (h+2)*wp, wp+1
	}
	for ch := range c {
		g := t.gamma[ch]
		if t.bias != nil {
			b = t.bias[ch]
		}
		p := t.y[ch*plane : (ch+1)*plane]
		if t.padded {
			if lo == 0 {
				clear(p[:wp])
			}
			if hi == h {
				clear(p[(h+1)*wp:])
			}
		}
		for r := lo; r < hi; r++ {
			if t.padded {
				p[(r+1)*wp], p[(r+1)*wp+w+1] = 0, 0
			}
			kernels.ScaleSiLU(p[off+r*wp:][:w], t.x[(ch*h+r)*t.xwp:][:w], b, fs[(r-lo)*w:][:w], g, t.silu)
		}
	}
}

// resBlock writes ResBlock(x) (spec §4.3) into y; y must not be x, and the
// block uses e.pad, e.wide (and e.s for the shortcut) as scratch. The
// first convolution's output goes from e.wide straight into the second
// RMSc.
func (e *VAEEncoder) resBlock(y, x []float32, rb *ResBlock, h, w int) {
	n := h * w
	in, out := rb.Conv2.In, rb.Conv2.Out
	short := x[:in*n]
	if rb.Shortcut != nil {
		e.conv1x1(e.s, x, rb.Shortcut, n)
		short = e.s[:out*n]
	}
	e.rmscSilu(e.pad, x[:in*n], rb.Gamma0, in, h, w, true, true)
	e.conv3Products(&rb.Conv2, h, w, 1)
	e.rmscSiluWide(rb.Gamma3, rb.Conv2.B, out, h, w)
	e.conv3(y, &rb.Conv6, h, w, 1, short)
}

// addAvgDown adds AvgDown(x0; in → out, ft, fs) (spec §4.5) to y
// [out, h/fs, w/fs], x0 being [in, h, w]: the channels of x0's
// (time, row, column) folding, time padded in front with ft − 1 zero
// frames, averaged in groups of g = in·ft·fs²/out; the output channels
// o0..o1−1 only.
func addAvgDown(y, x0 []float32, in, out, h, w, ft, fs, o0, o1 int) {
	oh, ow := h/fs, w/fs
	per := ft * fs * fs // folded channels per input channel
	g := in * per / out
	inv := 1 / float32(g)
	for o := o0; o < o1; o++ {
		dst := y[o*oh*ow : (o+1)*oh*ow]
		for k := range g {
			q := o*g + k
			ci, rem := q/per, q%per
			tau, a, b := rem/(fs*fs), rem/fs%fs, rem%fs
			if tau != ft-1 {
				continue // the zero frame in front
			}
			for i := range oh {
				src := x0[ci*h*w+(fs*i+a)*w+b:]
				d := dst[i*ow : (i+1)*ow]
				for j := range d {
					d[j] += src[fs*j] * inv
				}
			}
		}
	}
}

// avgDownTask is addAvgDown over a range of output channels.
type avgDownTask struct {
	y, x0                 []float32
	in, out, h, w, ft, fs int
}

func (t *avgDownTask) run(lo, hi int) {
	addAvgDown(t.y, t.x0, t.in, t.out, t.h, t.w, t.ft, t.fs, lo, hi)
}

// attention adds the middle attention block (spec §4.7) to x [c, n] in
// place: RMSc, the 1×1 q, k, v, one head of width c over the n pixels in
// row-major order, the 1×1 proj.
func (e *VAEEncoder) attention(x []float32, n int) {
	w := e.w
	c := w.Proj.In
	y, qkv, o := e.t[:c*n], e.s[:3*c*n], e.c[:c*n]
	e.rmscSilu(y, x[:c*n], w.AttnGamma, c, 1, n, false, false)
	e.conv1x1(qkv, y, &w.QKV, n)
	q, k, v := qkv[:c*n], qkv[c*n:2*c*n], qkv[2*c*n:]
	s := e.scores[:n*n]
	// s[i, j] = q[:, i]·k[:, j] / sqrt(c): q and k are [c, n].
	e.gemm.Sgemm(blas.Trans, blas.NoTrans, n, n, c, float32(1/math.Sqrt(float64(c))), q, n, k, n, 0, s, n)
	kernels.SoftmaxRows(s, n, n)
	// o[:, i] = Σ_j s[i, j]·v[:, j]: o = v·sᵀ, [c, n].
	e.gemm.Sgemm(blas.NoTrans, blas.Trans, c, n, n, 1, v, n, s, n, 0, o, n)
	e.conv1x1(y, o, &w.Proj, n)
	x = x[:c*n]
	for i, v := range y {
		x[i] += v
	}
}
