package worldmodel

import (
	"context"
	"fmt"
	"math"

	"github.com/x448/float16"
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/internal/kernels"
)

// ditEps is the epsilon of the DiT's LayerNorms and RMSNorms (§5, action-step.md §3.4–3.5).
const ditEps = 1e-6

// DiTSize is what the weights do not fix: the latent's grid and the
// context's rows. The token count Sv is (LatentHeight/2)·(LatentWidth/2):
// 98 for the LIBERO 224 × 448 frame (latent 14 × 28), 49 for 224 × 224.
type DiTSize struct {
	LatentHeight, LatentWidth int // h, w of the latent [z, h, w]; each even
	ContextRows               int // L: text rows + the proprio row (129)
}

// MaxDiTTokens bounds Sv, the video tokens of one frame (the RoPE table of
// upstream holds 1024 positions per axis; a 1024 × 1024 image gives 1024).
const MaxDiTTokens = 1 << 12

// MaxContextRows bounds L.
const MaxContextRows = 1 << 12

// DiT is the video DiT's prefill at t = 0 (world-model.md §5) for one
// latent size: the latent and the context to every layer's video K and V.
// Its scratch is made once; Prefill allocates nothing. The products go
// through the sgemm given to NewDiT; the rest runs on the calling
// goroutine. A DiT is not safe for concurrent use.
type DiT struct {
	w    *DiTWeights
	cfg  DiTConfig
	size DiTSize
	gemm cpu.Gemm
	sv   int // video tokens

	ropeCos, ropeSin []float64 // [Sv, Dh/2], the 3-D table of §5.4

	patches, x, h, qkv, o, tmp, qc []float32
	ctx1, ctxV, ff, scores         []float32

	// The cross-attention keys and values of every full layer, [L, A]
	// each. Rows 0..L−2 (the text rows) depend only on the context's
	// text rows: they are kept while those stay the same (textKey holds
	// their bits, textValid says whether kc/vc hold them); the last row
	// (the proprio token) is computed on every call.
	kc, vc    [][]float32
	textKey   []float32
	textValid bool

	// trace, when set (tests), sees the patch embedding ("x0", [Sv, D])
	// and the video context embedding ("ctx_v", [L, D]).
	trace func(name string, v []float32)
}

// NewDiT makes a prefill for the latent and context size, computing its
// products with gemm (nil: gonum's pure Go; see cpu.PickGemm).
func NewDiT(w *DiTWeights, gemm cpu.Gemm, size DiTSize) (*DiT, error) {
	if err := w.Validate(); err != nil {
		return nil, err
	}
	h, wd, L := size.LatentHeight, size.LatentWidth, size.ContextRows
	if h < 2 || wd < 2 || h%2 != 0 || wd%2 != 0 || (h/2)*(wd/2) > MaxDiTTokens || h > 2048 || wd > 2048 {
		return nil, fmt.Errorf("worldmodel: DiT: latent grid %d × %d: want both sides even and positive, and at most %d tokens (h/2 · w/2)", h, wd, MaxDiTTokens)
	}
	if L < 1 || L > MaxContextRows {
		return nil, fmt.Errorf("worldmodel: DiT: %d context rows, want 1..%d", L, MaxContextRows)
	}
	if gemm == nil {
		gemm = gonum.Implementation{}
	}
	c := w.Config
	D, F, A, H := c.HiddenDim, c.FFNDim, c.NumHeads*c.HeadDim, c.NumHeads
	sv := (h / 2) * (wd / 2)
	d := &DiT{
		w: w, cfg: c, size: size, gemm: gemm, sv: sv,
		patches: make([]float32, sv*c.LatentChannels*4),
		x:       make([]float32, sv*D), h: make([]float32, sv*D),
		qkv: make([]float32, sv*3*A), o: make([]float32, sv*A), tmp: make([]float32, sv*D),
		qc: make([]float32, sv*A), ctx1: make([]float32, L*D), ctxV: make([]float32, L*D),
		ff: make([]float32, sv*F), scores: make([]float32, H*sv*max(sv, L)),
		kc: make([][]float32, c.NumLayers-1), vc: make([][]float32, c.NumLayers-1),
		textKey: make([]float32, (L-1)*c.TextDim),
	}
	for l := range d.kc {
		d.kc[l], d.vc[l] = make([]float32, L*A), make([]float32, L*A)
	}
	d.ropeCos, d.ropeSin = Rope3DTable(c.HeadDim, 1, h/2, wd/2)
	return d, nil
}

// Tokens is Sv, the video tokens of one frame.
func (d *DiT) Tokens() int { return d.sv }

// Config is the architecture of the DiT's weights.
func (d *DiT) Config() DiTConfig { return d.cfg }

// Size is the latent and context size the DiT was made for.
func (d *DiT) Size() DiTSize { return d.size }

// KVLen is the length of each of Prefill's K and V buffers, N·Sv·A.
func (d *DiT) KVLen() int { return d.cfg.NumLayers * d.sv * d.cfg.HiddenDim }

// Rope3DTable returns the 3-D RoPE angle table of world-model.md §5.4 for
// the tokens of a frames × height × width grid in (f, y, x) row-major
// order, [tokens, Dh/2] cosines and sines: the head's pairs split into
// (Dh − 2⌊Dh/3⌋)/2 temporal, then ⌊Dh/3⌋/2 height and ⌊Dh/3⌋/2 width
// pairs, pair m of an axis of width d turned by pos·10000^(−2m/d). The
// frequencies and angles are float64 as upstream's torch.polar table.
func Rope3DTable(dh, frames, height, width int) (cos, sin []float64) {
	half := dh / 2
	ds := dh / 3
	dt := dh - 2*ds
	omega := func(d int) []float64 {
		w := make([]float64, d/2)
		for m := range w {
			w[m] = 1 / math.Pow(10000, float64(2*m)/float64(d))
		}
		return w
	}
	wt, wh, ww := omega(dt), omega(ds), omega(ds)
	n := frames * height * width
	cos, sin = make([]float64, n*half), make([]float64, n*half)
	for f := range frames {
		for y := range height {
			for x := range width {
				s := (f*height+y)*width + x
				row := s * half
				j := 0
				for _, axis := range []struct {
					pos int
					w   []float64
				}{{f, wt}, {y, wh}, {x, ww}} {
					for _, w := range axis.w {
						sin[row+j], cos[row+j] = math.Sincos(float64(axis.pos) * w)
						j++
					}
				}
			}
		}
	}
	return cos, sin
}

// Prefill runs the DiT at t = 0 on latent [z, h, w] (the normalised VAE
// latent) and context [L, T] (text rows then the proprio row) and writes
// every layer's video K and V, [N, 1, Sv, A] each, straight into keys and
// values (both F32 or both F16, IEEE half rounded to nearest even from the
// float32 result). Layer l's entry comes from the tokens entering layer l;
// the last layer computes only its K and V (§5.6). The context's text rows
// (all but the last) are embedded, and their cross-attention K and V
// computed, only when they differ from the last call's (bit for bit); the
// result is the same either way.
//
// Buffers of the wrong length, a latent or context value that is not
// finite, are refused before anything is computed. When ctx is cancelled
// during the run, Prefill returns ctx.Err() and keys and values hold a mix
// of layers: they are not valid.
func (d *DiT) Prefill(ctx context.Context, latent, cond []float32, keys, values expert.TensorView) error {
	c := d.cfg
	z, h, w, L, T := c.LatentChannels, d.size.LatentHeight, d.size.LatentWidth, d.size.ContextRows, c.TextDim
	if len(latent) != z*h*w {
		return fmt.Errorf("worldmodel: DiT: latent of %d values, want %d × %d × %d = %d", len(latent), z, h, w, z*h*w)
	}
	if len(cond) != L*T {
		return fmt.Errorf("worldmodel: DiT: context of %d values, want %d × %d = %d", len(cond), L, T, L*T)
	}
	n := d.KVLen()
	f32 := keys.F32 != nil
	if f32 != (values.F32 != nil) || (keys.F32 != nil) == (keys.F16 != nil) || (values.F32 != nil) == (values.F16 != nil) {
		return fmt.Errorf("worldmodel: DiT: keys and values must both be F32 or both F16, exactly one of each set")
	}
	if keys.Len() != n || values.Len() != n {
		return fmt.Errorf("worldmodel: DiT: K/V buffers of %d and %d values, want %d × 1 × %d × %d = %d each", keys.Len(), values.Len(), c.NumLayers, d.sv, c.HiddenDim, n)
	}
	if i := firstNonFinite(latent); i >= 0 {
		return fmt.Errorf("worldmodel: DiT: latent value %d (channel %d, row %d, column %d) is %v, want a finite number", i, i/(h*w), i/w%h, i%w, latent[i])
	}
	if i := firstNonFinite(cond); i >= 0 {
		return fmt.Errorf("worldmodel: DiT: context value %d (row %d, column %d) is %v, want a finite number", i, i/T, i%T, cond[i])
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	D, F, A, sv := c.HiddenDim, c.FFNDim, c.NumHeads*c.HeadDim, d.sv
	// §5.1: patches [Sv, z·4] in (c, row offset, column offset) order.
	for y := range h / 2 {
		for x := range w / 2 {
			p := d.patches[(y*(w/2)+x)*z*4:][:z*4]
			for ch := range z {
				base := ch*h*w + 2*y*w + 2*x
				p[ch*4], p[ch*4+1] = latent[base], latent[base+1]
				p[ch*4+2], p[ch*4+3] = latent[base+w], latent[base+w+1]
			}
		}
	}
	d.linear(d.x, d.patches, sv, z*4, d.w.PatchW, d.w.PatchB, D)
	if d.trace != nil {
		d.trace("x0", d.x)
	}
	// §5.3: the video expert's own text embedding of the context.
	// §5.3, §5.6: the text rows' ctx_v and cross-attention K/V only when
	// the text rows changed; the proprio row's always. Each part is
	// computed the same way whether the other is cached or not, so the
	// results do not depend on the cache.
	nt := L - 1
	if !d.textValid || !sameFloatBits(d.textKey, cond[:nt*T]) {
		d.textValid = false
		if err := d.textRows(ctx, cond[:nt*T]); err != nil {
			return err
		}
		copy(d.textKey, cond[:nt*T])
		d.textValid = true
	}
	d.embedContext(d.ctx1[nt*D:], d.ctxV[nt*D:], cond[nt*T:], 1)
	for l := range d.kc {
		d.crossKV(l, nt, 1)
	}
	if d.trace != nil {
		d.trace("ctx_v", d.ctxV)
	}
	x, hb := d.x, d.h
	for l := range d.w.Layers {
		if err := ctx.Err(); err != nil {
			return err
		}
		Ly := &d.w.Layers[l]
		m := Ly.Mod
		shift1, scale1, gate1 := m[0:D], m[D:2*D], m[2*D:3*D]
		shift2, scale2, gate2 := m[3*D:4*D], m[4*D:5*D], m[5*D:6*D]
		kernels.LayerNormModulate(hb, x, D, scale1, shift1, ditEps)
		rows := 3 * A
		if Ly.Trimmed {
			rows = 2 * A
		}
		qkv := d.qkv[:sv*rows]
		d.linear(qkv, hb, sv, D, Ly.QKV, Ly.QKVB, rows)
		kOff := rows - 2*A // k's column in the fused rows
		if !Ly.Trimmed {
			kernels.RMSNormStrided(qkv, sv, A, rows, 0, Ly.NormQ, ditEps)
		}
		kernels.RMSNormStrided(qkv, sv, A, rows, kOff, Ly.NormK, ditEps)
		half := c.HeadDim / 2
		for s := range sv {
			cs, sn := d.ropeCos[s*half:(s+1)*half], d.ropeSin[s*half:(s+1)*half]
			if !Ly.Trimmed {
				kernels.Rope(qkv[s*rows:s*rows+A], c.NumHeads, c.HeadDim, cs, sn)
			}
			kernels.Rope(qkv[s*rows+kOff:s*rows+kOff+A], c.NumHeads, c.HeadDim, cs, sn)
		}
		d.store(keys, values, l, qkv, rows, kOff, f32)
		if Ly.Trimmed {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		d.attention(d.o, qkv, rows, qkv[A:], rows, qkv[2*A:], rows, sv)
		d.linear(d.tmp, d.o, sv, A, Ly.O, Ly.OB, D)
		kernels.AddGated(x, d.tmp, gate1, D)
		// Cross-attention: no gate, no modulation, no RoPE.
		kernels.LayerNormAffine(hb, x, D, Ly.Norm3W, Ly.Norm3B, ditEps)
		d.linear(d.qc, hb, sv, D, Ly.CrossQ, Ly.CrossQB, A)
		kernels.RMSNormRows(d.qc, A, Ly.CrossNormQ, ditEps)
		d.attention(d.o, d.qc, A, d.kc[l], A, d.vc[l], A, L)
		d.linear(d.tmp, d.o, sv, A, Ly.CrossO, Ly.CrossOB, D)
		for i, v := range d.tmp {
			x[i] += v
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		kernels.LayerNormModulate(hb, x, D, scale2, shift2, ditEps)
		d.linear(d.ff, hb, sv, D, Ly.FFN0, Ly.FFN0B, F)
		kernels.GELU(d.ff)
		d.linear(d.tmp, d.ff, sv, F, Ly.FFN2, Ly.FFN2B, D)
		kernels.AddGated(x, d.tmp, gate2, D)
	}
	return nil
}

// textRows computes the ctx_v rows and every full layer's cross-attention
// K/V rows of the context's text rows (all rows but the last).
func (d *DiT) textRows(ctx context.Context, text []float32) error {
	nt := d.size.ContextRows - 1
	if nt == 0 {
		return nil
	}
	d.embedContext(d.ctx1, d.ctxV, text, nt)
	for l := range d.kc {
		if err := ctx.Err(); err != nil {
			return err
		}
		d.crossKV(l, 0, nt)
	}
	return nil
}

// embedContext writes ctx_v = lin(gelu(lin(rows; text_embedding.0));
// text_embedding.2) of n context rows into out, h1 its scratch.
func (d *DiT) embedContext(h1, out, rows []float32, n int) {
	c := d.cfg
	d.linear(h1[:n*c.HiddenDim], rows, n, c.TextDim, d.w.Text0, d.w.Text0B, c.HiddenDim)
	kernels.GELU(h1[:n*c.HiddenDim])
	d.linear(out[:n*c.HiddenDim], h1[:n*c.HiddenDim], n, c.HiddenDim, d.w.Text2, d.w.Text2B, c.HiddenDim)
}

// crossKV computes layer l's cross-attention K (RMS-normed) and V of the
// n ctx_v rows from row r0.
func (d *DiT) crossKV(l, r0, n int) {
	D, A := d.cfg.HiddenDim, d.cfg.HiddenDim
	Ly := &d.w.Layers[l]
	src := d.ctxV[r0*D : (r0+n)*D]
	k, v := d.kc[l][r0*A:(r0+n)*A], d.vc[l][r0*A:(r0+n)*A]
	d.linear(k, src, n, D, Ly.CrossK, Ly.CrossKB, A)
	kernels.RMSNormRows(k, A, Ly.CrossNormK, ditEps)
	d.linear(v, src, n, D, Ly.CrossV, Ly.CrossVB, A)
}

// sameFloatBits reports whether a and b hold the same float32 bit patterns.
func sameFloatBits(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return false
		}
	}
	return true
}

// store copies layer l's k and v (columns kOff and kOff+A of the fused
// rows) into the output buffers.
func (d *DiT) store(keys, values expert.TensorView, l int, qkv []float32, rows, kOff int, f32 bool) {
	A, sv := d.cfg.HiddenDim, d.sv
	base := l * sv * A
	for s := range sv {
		k, v := qkv[s*rows+kOff:][:A], qkv[s*rows+kOff+A:][:A]
		o := base + s*A
		if f32 {
			copy(keys.F32[o:o+A], k)
			copy(values.F32[o:o+A], v)
			continue
		}
		kd, vd := keys.F16[o:o+A], values.F16[o:o+A]
		for i := range A {
			kd[i] = float16.Fromfloat32(k[i]).Bits()
			vd[i] = float16.Fromfloat32(v[i]).Bits()
		}
	}
}

// attention writes into out [Sv, A] softmax(q·kᵀ/√Dh)·v per head, for the
// Sv queries q (row stride ldq) over nk keys k and values v (strides ldk,
// ldv), no mask (every mask of the prefill is all true, §5.3, §5.5).
func (d *DiT) attention(out, q []float32, ldq int, k []float32, ldk int, v []float32, ldv, nk int) {
	c := d.cfg
	A, Dh, sv := c.HiddenDim, c.HeadDim, d.sv
	scale := float32(1 / math.Sqrt(float64(Dh)))
	for hd := range c.NumHeads {
		off, sc := hd*Dh, d.scores[hd*sv*nk:(hd+1)*sv*nk]
		d.gemm.Sgemm(blas.NoTrans, blas.Trans, sv, nk, Dh, scale, q[off:], ldq, k[off:], ldk, 0, sc, nk)
		kernels.SoftmaxRows(sc, sv, nk)
		d.gemm.Sgemm(blas.NoTrans, blas.NoTrans, sv, Dh, nk, 1, sc, nk, v[off:], ldv, 0, out[off:], A)
	}
}

// linear computes out[m, n] = in[m, k]·wᵀ + bias for a PyTorch weight
// w [n, k], one sgemm.
func (d *DiT) linear(out, in []float32, m, k int, w, bias []float32, n int) {
	for r := range m {
		copy(out[r*n:(r+1)*n], bias)
	}
	d.gemm.Sgemm(blas.NoTrans, blas.Trans, m, n, k, 1, in, k, w, k, 1, out, n)
}

// Flops is the matrix-product work of one Prefill whose context's text
// rows differ from the last call's, 2 per multiply-add: the patch and
// text embeddings, every full layer's products and attention, and the
// trimmed last layer's k and v.
func (d *DiT) Flops() float64 {
	c := d.cfg
	D, F, T, z := float64(c.HiddenDim), float64(c.FFNDim), float64(c.TextDim), float64(c.LatentChannels)
	sv, L := float64(d.sv), float64(d.size.ContextRows)
	f := 2*sv*z*4*D + 2*L*T*D + 2*L*D*D
	full := 2*sv*D*3*D + 2*2*sv*sv*D + 2*sv*D*D + // self q,k,v, attention, o
		2*sv*D*D + 2*2*L*D*D + 2*2*sv*L*D + 2*sv*D*D + // cross q, k, v, attention, o
		2*2*sv*D*F // FFN
	return f + float64(c.NumLayers-1)*full + 2*sv*D*2*D
}

// TextFlops is the part of Flops spent on the context's text rows (their
// ctx_v and every full layer's cross-attention K and V), which a Prefill
// skips when the text rows are the same as the last call's.
func (d *DiT) TextFlops() float64 {
	c := d.cfg
	D, T, nt := float64(c.HiddenDim), float64(c.TextDim), float64(d.size.ContextRows-1)
	return 2*nt*T*D + 2*nt*D*D + float64(c.NumLayers-1)*2*2*nt*D*D
}

// firstNonFinite returns the index of the first NaN or ±Inf of v, or −1.
func firstNonFinite(v []float32) int {
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return i
		}
	}
	return -1
}
