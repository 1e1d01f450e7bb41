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

// colCap is the im2col buffer's length in float32 (16 MB): a convolution
// is computed in bands of output rows whose columns fit in it.
const colCap = 1 << 22

// VAEEncoder runs the Wan2.2 VAE encoder at T = 1 (one frame) as rank-3
// operations on [C, h, w] activations (spec §4): a [3, H, W] image in
// [−1, 1] to the normalised latent mean [48, H/16, W/16]. Its scratch is
// made once, for one image size; RMSc, SiLU and im2col are shared among
// GOMAXPROCS goroutines, persistent workers of the encoder started on the
// first Encode (results do not depend on their number), so an Encode
// allocates nothing. Close stops them (so does the garbage collector, once
// the encoder is unreachable). A VAEEncoder is not safe for concurrent use.
type VAEEncoder struct {
	w      *VAEWeights
	height int
	width  int
	gemm   cpu.Gemm
	pool   *workerPool // the element-wise work and im2col
	rmsc   rmscTask
	im2c   im2colTask

	a, b, c, t, s []float32 // activations, each of the largest activation's length
	col           []float32 // im2col bands
	norm          []float64 // per-pixel factors of RMSc
	scores        []float32 // the attention's [n, n]
	invStd        [LatentChannels]float32

	// trace, when set (tests), sees each stage boundary's activation.
	trace func(name string, x []float32, c, h, w int)
}

// NewVAEEncoder makes an encoder for height × width images (positive
// multiples of 16, at most MaxVAESide) computing its products with gemm
// (nil: gonum's pure Go; see cpu.PickGemm).
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
	// A band is at least one output row of a 3×3 convolution, the widest
	// of which is 9·max(12, d) by W/2; colCap holds several unless the
	// image is very wide, and no band is larger than a whole convolution's.
	col := max(colCap, 9*max(12, d)*(width/2))
	col = min(col, 9*max(12, d)*p)
	e := &VAEEncoder{
		w: w, height: height, width: width, gemm: gemm, pool: newWorkerPool(runtime.GOMAXPROCS(0)),
		a: make([]float32, act), b: make([]float32, act), c: make([]float32, act),
		t: make([]float32, act), s: make([]float32, act),
		col: make([]float32, col), norm: make([]float64, p), scores: make([]float32, n*n),
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
	patchify(e.t, image, H, W)
	x := e.a
	e.conv(x, e.t, &w.Conv1, h, wd, 1)
	e.emit("conv1", x, dims[0], h, wd)
	for s := range 4 {
		st := &w.Stages[s]
		x0, y, z := x, e.b, e.c
		e.resBlock(y, x0, &st.Res[0], h, wd)
		e.resBlock(z, y, &st.Res[1], h, wd)
		oh, ow := h, wd
		if st.Down != nil {
			oh, ow = h/2, wd/2
			e.conv(y, z, st.Down, h, wd, 2)
			z = y
		}
		ft, fs := 1, 1
		if s == 1 || s == 2 {
			ft = 2
		}
		if s != 3 {
			fs = 2
		}
		addAvgDown(z, x0, dims[s], dims[s+1], h, wd, ft, fs)
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
	e.rmscSilu(e.t[:c*h*wd], x[:c*h*wd], w.HeadGamma, c, h*wd, true)
	e.conv(e.b, e.t, &w.Head, h, wd, 1)
	e.emit("head", e.b, 2*LatentChannels, h, wd)
	n := h * wd
	e.conv(latent, e.b, &w.Out, h, wd, 1)
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

// patchify writes the space-to-depth of image [3, H, W] into p
// [12, H/2, W/2] with the column offset r before the row offset q in the
// channel index (spec §4.2): p[c·4 + 2r + q, i, j] = x[c, 2i + q, 2j + r].
func patchify(p, x []float32, H, W int) {
	h, w := H/2, W/2
	for c := range 3 {
		for q := range 2 {
			for r := range 2 {
				dst := p[(c*4+2*r+q)*h*w:]
				for i := range h {
					src := x[c*H*W+(2*i+q)*W+r:]
					d := dst[i*w : (i+1)*w]
					for j := range d {
						d[j] = src[2*j]
					}
				}
			}
		}
	}
}

// conv writes the convolution cv of x [In, h, w] into y [Out, oh, ow]: a
// 1×1 convolution is one product; a 3×3 one with stride 1 pads a zero
// border of 1 (conv3, spec §4.1) and one with stride 2 pads one zero
// column on the right and one zero row at the bottom (Down, spec §4.4),
// each as im2col bands times the kernel.
func (e *VAEEncoder) conv(y, x []float32, cv *Conv, h, w, stride int) {
	oh, ow := h/stride, w/stride
	n := oh * ow
	y = y[:cv.Out*n]
	if cv.K == 1 {
		e.gemm.Sgemm(blas.NoTrans, blas.NoTrans, cv.Out, n, cv.In, 1, cv.W, cv.In, x[:cv.In*n], n, 0, y, n)
	} else {
		k := cv.In * cv.K * cv.K
		pad := 1
		if stride == 2 {
			pad = 0
		}
		band := max(1, len(e.col)/(k*ow))
		for r0 := 0; r0 < oh; r0 += band {
			r1 := min(oh, r0+band)
			m := (r1 - r0) * ow
			col := e.col[:k*m]
			e.im2c = im2colTask{col: col, x: x, h: h, w: w, k: cv.K, stride: stride, pad: pad, r0: r0, r1: r1, ow: ow}
			e.pool.run(cv.In, len(col), &e.im2c)
			e.gemm.Sgemm(blas.NoTrans, blas.NoTrans, cv.Out, m, k, 1, cv.W, k, col, m, 0, y[r0*ow:], n)
		}
	}
	for o := range cv.Out {
		b, row := cv.B[o], y[o*n:(o+1)*n]
		for i := range row {
			row[i] += b
		}
	}
}

// im2colTask is im2col over a range of input channels.
type im2colTask struct {
	col, x                           []float32
	h, w, k, stride, pad, r0, r1, ow int
}

func (t *im2colTask) run(lo, hi int) {
	im2col(t.col, t.x, lo, hi, t.h, t.w, t.k, t.stride, t.pad, t.r0, t.r1, t.ow)
}

// im2col writes the columns of a k×k convolution with the given stride and
// top/left padding of x [c, h, w], for output rows r0..r1−1 of width ow,
// into col [c·k·k, (r1−r0)·ow], the rows of the channels c0..c1−1:
// col[(ci·k + dy)·k + dx, (r − r0)·ow + j] = x[ci, stride·r + dy − pad, stride·j + dx − pad],
// zero where that is outside x.
func im2col(col, x []float32, c0, c1, h, w, k, stride, pad, r0, r1, ow int) {
	m := (r1 - r0) * ow
	for ci := c0; ci < c1; ci++ {
		plane := x[ci*h*w : (ci+1)*h*w]
		for dy := range k {
			for dx := range k {
				dst := col[((ci*k+dy)*k+dx)*m:][:m]
				// Output columns j whose input column stride·j + dx − pad is in 0..w−1.
				j0 := max(0, (pad-dx+stride-1)/stride)
				j1 := 0
				if last := w - 1 + pad - dx; last >= 0 {
					j1 = min(ow, last/stride+1)
				}
				for r := r0; r < r1; r++ {
					d := dst[(r-r0)*ow : (r-r0+1)*ow]
					iy := stride*r + dy - pad
					if iy < 0 || iy >= h || j0 >= j1 {
						clear(d)
						continue
					}
					clear(d[:j0])
					clear(d[j1:])
					src := plane[iy*w:]
					if stride == 1 {
						copy(d[j0:j1], src[j0+dx-pad:j1+dx-pad])
						continue
					}
					for j := j0; j < j1; j++ {
						d[j] = src[stride*j+dx-pad]
					}
				}
			}
		}
	}
}

// rmscSilu writes RMSc(x; γ) (spec §4.1: over the c channels at each of the
// n pixels, x·sqrt(c)/max(‖x‖₂, 1e-12)·γ), then SiLU when silu is set,
// into y. The norms and each value are computed in float64 and rounded
// once. norm is scratch of at least n. The pixels are shared among the
// encoder's workers.
func (e *VAEEncoder) rmscSilu(y, x, gamma []float32, c, n int, silu bool) {
	e.rmsc = rmscTask{y: y, x: x, gamma: gamma, c: c, n: n, silu: silu, norm: e.norm}
	e.pool.run(n, c*n, &e.rmsc)
}

// rmscTask is rmscSiluRange over a range of pixels.
type rmscTask struct {
	y, x, gamma []float32
	c, n        int
	silu        bool
	norm        []float64
}

func (t *rmscTask) run(lo, hi int) {
	rmscSiluRange(t.y, t.x, t.gamma, t.c, t.n, lo, hi, t.silu, t.norm)
}

// rmscSiluRange is rmscSilu for the pixels lo..hi−1.
func rmscSiluRange(y, x, gamma []float32, c, n, lo, hi int, silu bool, norm []float64) {
	ss := norm[lo:hi]
	clear(ss)
	for ch := range c {
		row := x[ch*n+lo : ch*n+hi]
		for i, v := range row {
			f := float64(v)
			ss[i] += f * f
		}
	}
	sc := math.Sqrt(float64(c))
	for i, s := range ss {
		ss[i] = sc / max(math.Sqrt(s), 1e-12)
	}
	// SiLU's exponentials go in blocks through kernels.Exp (vectorised
	// where the CPU allows, within 3 float64 ulp of math.Exp).
	const block = 256
	var f, ex [block]float64
	for ch := range c {
		g := float64(gamma[ch])
		row, out := x[ch*n+lo:ch*n+hi], y[ch*n+lo:ch*n+hi]
		for b0 := 0; b0 < len(row); b0 += block {
			r, o := row[b0:min(b0+block, len(row))], out[b0:min(b0+block, len(row))]
			s, fb := ss[b0:b0+len(r)], f[:len(r)]
			if !silu {
				for i, v := range r {
					o[i] = float32(float64(v) * s[i] * g)
				}
				continue
			}
			eb := ex[:len(r)]
			for i, v := range r {
				fb[i] = float64(v) * s[i] * g
				eb[i] = -fb[i]
			}
			kernels.Exp(eb)
			for i, v := range fb {
				o[i] = float32(v / (1 + eb[i]))
			}
		}
	}
}

// resBlock writes ResBlock(x) (spec §4.3) into y; y must not be x, and the
// block uses e.t (and e.s for the shortcut) as scratch.
func (e *VAEEncoder) resBlock(y, x []float32, rb *ResBlock, h, w int) {
	n := h * w
	in, out := rb.Conv2.In, rb.Conv2.Out
	short := x[:in*n]
	if rb.Shortcut != nil {
		e.conv(e.s, x, rb.Shortcut, h, w, 1)
		short = e.s[:out*n]
	}
	e.rmscSilu(e.t[:in*n], x[:in*n], rb.Gamma0, in, n, true)
	e.conv(y, e.t, &rb.Conv2, h, w, 1)
	e.rmscSilu(e.t[:out*n], y[:out*n], rb.Gamma3, out, n, true)
	e.conv(y, e.t, &rb.Conv6, h, w, 1)
	y = y[:out*n]
	for i, v := range short {
		y[i] += v
	}
}

// addAvgDown adds AvgDown(x0; in → out, ft, fs) (spec §4.5) to y
// [out, h/fs, w/fs], x0 being [in, h, w]: the channels of x0's
// (time, row, column) folding, time padded in front with ft − 1 zero
// frames, averaged in groups of g = in·ft·fs²/out.
func addAvgDown(y, x0 []float32, in, out, h, w, ft, fs int) {
	oh, ow := h/fs, w/fs
	per := ft * fs * fs // folded channels per input channel
	g := in * per / out
	inv := 1 / float32(g)
	for o := range out {
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

// attention adds the middle attention block (spec §4.7) to x [c, n] in
// place: RMSc, the 1×1 q, k, v, one head of width c over the n pixels in
// row-major order, the 1×1 proj.
func (e *VAEEncoder) attention(x []float32, n int) {
	w := e.w
	c := w.Proj.In
	y, qkv, o := e.t[:c*n], e.s[:3*c*n], e.c[:c*n]
	e.rmscSilu(y, x[:c*n], w.AttnGamma, c, n, false)
	e.conv(qkv, y, &w.QKV, 1, n, 1)
	q, k, v := qkv[:c*n], qkv[c*n:2*c*n], qkv[2*c*n:]
	s := e.scores[:n*n]
	// s[i, j] = q[:, i]·k[:, j] / sqrt(c): q and k are [c, n].
	e.gemm.Sgemm(blas.Trans, blas.NoTrans, n, n, c, float32(1/math.Sqrt(float64(c))), q, n, k, n, 0, s, n)
	kernels.SoftmaxRows(s, n, n)
	// o[:, i] = Σ_j s[i, j]·v[:, j]: o = v·sᵀ, [c, n].
	e.gemm.Sgemm(blas.NoTrans, blas.Trans, c, n, n, 1, v, n, s, n, 0, o, n)
	e.conv(y, o, &w.Proj, 1, n, 1)
	x = x[:c*n]
	for i, v := range y {
		x[i] += v
	}
}
