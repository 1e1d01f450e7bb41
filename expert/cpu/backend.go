package cpu

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/kernels"
	"github.com/fastwam/actionexpert/internal/openblas"
)

// Gemm is the one BLAS routine the backend uses, with the argument contract
// of gonum's blas.Float32Level3.Sgemm (row-major matrices).
type Gemm interface {
	Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int)
}

// Options tune the backend's linear algebra.
type Options struct {
	// BLAS is "auto" (OpenBLAS when it loads, else gonum; the default),
	// "openblas" (fail when it does not load) or "gonum".
	BLAS string
	// OpenBLASPath overrides the OpenBLAS library to load.
	OpenBLASPath string
	// Threads is the number of goroutines a step (and BindChunk) runs on;
	// zero means runtime.GOMAXPROCS. They share the column blocks of every
	// weight product (linearBlock wide), the attention heads and the rows
	// of the element-wise work, and each part calls a single-threaded BLAS:
	// New sets OpenBLAS to one thread, process-wide. (OpenBLAS's own
	// threads spin on a core for about 0.1 s after each call, so they would
	// take the cores from the goroutines, and each of the attention's many
	// small products would pay their start-up.) Results do not depend on
	// Threads.
	Threads int
}

// modCacheSize bounds the per-timestep modulation cache: a fixed schedule
// uses N entries, so this holds several schedules before it starts over.
const modCacheSize = 128

// Backend is the CPU reference implementation of expert.Backend.
type Backend struct {
	w        *Weights
	cfg      Config
	dims     expert.Dims
	gemm     Gemm
	blasName string
	workers  int // goroutines a step runs on, at least 1

	ropeCos, ropeSin []float64             // [S, Dh/2]
	modCache         map[float32][]float32 // timestep -> [layers, 6, D]

	// Per-chunk state, set by BindChunk.
	bound          bool
	videoK, videoV []float32   // [layers, Sv, A], views of the chunk's slices
	visible        int         // video tokens the actions attend to
	ctxTokens      int         // attended context tokens (masked ones dropped)
	crossK, crossV [][]float32 // per layer [ctxTokens, A]

	// Scratch, reused by every step. scores holds every head's attention
	// weights, [H, S, keys], so the workers' heads do not share any.
	x, h, qkv, o, tmp, qc, ff, scores []float32
}

// New makes a backend over loaded weights.
func New(w *Weights, opts Options) (*Backend, error) {
	gemm, name, err := PickGemm(opts.BLAS, opts.OpenBLASPath, 1)
	if err != nil {
		return nil, err
	}
	c := w.cfg
	S, D, A, F := c.ActionSteps, c.HiddenDim, c.attn(), c.FFNDim
	workers := opts.Threads
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	b := &Backend{
		w: w, cfg: c, dims: c.Dims(), gemm: gemm, blasName: name, workers: workers,
		modCache: make(map[float32][]float32),
		x:        make([]float32, S*D),
		h:        make([]float32, S*D),
		qkv:      make([]float32, S*3*A),
		o:        make([]float32, S*A),
		tmp:      make([]float32, S*D),
		qc:       make([]float32, S*A),
		ff:       make([]float32, S*F),
		scores:   make([]float32, c.NumHeads*S*(max(c.VideoTokens, c.ContextTokens)+S)),
	}
	b.ropeCos, b.ropeSin = kernels.RopeTables(S, c.HeadDim)
	return b, nil
}

// Load reads weights from a safetensors file (see LoadWeights; ctx stops a
// long load) and makes a backend over them.
func Load(ctx context.Context, path string, cfg *Config, opts Options) (*Backend, error) {
	w, err := LoadWeights(ctx, path, cfg)
	if err != nil {
		return nil, err
	}
	return New(w, opts)
}

// PickGemm returns the sgemm to compute with, by name: "auto" or ""
// (OpenBLAS when it loads, else gonum's pure Go), "openblas" (an error when
// it does not load) or "gonum"; path overrides the OpenBLAS library. When
// OpenBLAS is chosen and threads > 0, its thread count is set to threads,
// process-wide (New uses 1: its goroutines share the work); threads ≤ 0
// leaves OpenBLAS's own default (every core), which suits callers with few,
// large products such as the world model's. The string names the choice.
func PickGemm(name, path string, threads int) (Gemm, string, error) {
	switch name {
	case "", "auto", "openblas":
		l, err := openblas.Load(path)
		if err == nil {
			if threads > 0 {
				l.SetThreads(threads)
			}
			return l, l.String(), nil
		}
		if name == "openblas" {
			return nil, "", fmt.Errorf("cpu: %w", err)
		}
		// auto without OpenBLAS: say how to get the fast path, since
		// the only visible sign is a much slower step.
		return gonum.Implementation{}, "gonum (pure Go: OpenBLAS not found; for the fast path install it, e.g. apt-get install libopenblas0-pthread)", nil
	case "gonum":
		return gonum.Implementation{}, "gonum (pure Go)", nil
	}
	return nil, "", fmt.Errorf("cpu: unknown BLAS %q (want auto, openblas or gonum)", name)
}

// Dims implements expert.Backend.
func (b *Backend) Dims() expert.Dims { return b.dims }

// BLAS names the linear-algebra implementation in use and the number of
// goroutines that call it.
func (b *Backend) BLAS() string { return fmt.Sprintf("%s, %d workers", b.blasName, b.workers) }

// Workers is the number of goroutines a step runs on (Options.Threads).
func (b *Backend) Workers() int { return b.workers }

// Weights returns the backend's parameters.
func (b *Backend) Weights() *Weights { return b.w }

// Close implements expert.Backend. The weights stay usable.
func (b *Backend) Close() error {
	b.bound = false
	b.videoK, b.videoV, b.crossK, b.crossV = nil, nil, nil, nil
	return nil
}

// BindChunk implements expert.Backend: it embeds the context and computes
// every layer's cross-attention keys and values, once per chunk. Masked
// context tokens are dropped here, which is exactly what a -inf score does.
func (b *Backend) BindChunk(ctx context.Context, c *expert.Chunk) error {
	b.bound = false
	if err := b.dims.ValidateChunk(c); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	cfg := b.cfg
	D, T, A := cfg.HiddenDim, cfg.TextDim, cfg.attn()
	var rows []float32
	for i, m := range c.ContextMask {
		if m {
			rows = append(rows, c.Context[i*T:(i+1)*T]...)
		}
	}
	lc := len(rows) / T
	e1 := make([]float32, lc*D)
	b.linearThen(e1, rows, lc, T, b.w.text0, b.w.text0B, D, kernels.GELU)
	emb := make([]float32, lc*D)
	b.linear(emb, e1, lc, D, b.w.text2, b.w.text2B, D)

	if len(b.crossK) != cfg.NumLayers {
		b.crossK, b.crossV = make([][]float32, cfg.NumLayers), make([][]float32, cfg.NumLayers)
	}
	for l := range b.w.layers {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("cpu: bind chunk: %w", err)
		}
		L := &b.w.layers[l]
		if cap(b.crossK[l]) < lc*A {
			b.crossK[l], b.crossV[l] = make([]float32, lc*A), make([]float32, lc*A)
		}
		k, v := b.crossK[l][:lc*A], b.crossV[l][:lc*A]
		b.linear(k, emb, lc, D, L.crossK, L.crossKB, A)
		kernels.RMSNormRows(k, A, L.crossNormK, cfg.Eps)
		b.linear(v, emb, lc, D, L.crossV, L.crossVB, A)
		b.crossK[l], b.crossV[l] = k, v
	}
	b.videoK, b.videoV = c.VideoKeys, c.VideoValues
	b.visible = c.VisibleVideo
	if b.visible == 0 {
		b.visible = cfg.VideoTokens
	}
	b.ctxTokens = lc
	b.bound = true
	return nil
}

// Step implements expert.Backend.
func (b *Backend) Step(ctx context.Context, latents []float32, tau float32, pred []float32) error {
	if !b.bound {
		return fmt.Errorf("cpu: step without a bound chunk")
	}
	if err := b.dims.CheckLatents("latents_action", latents); err != nil {
		return fmt.Errorf("cpu: %w", err)
	}
	if len(pred) != b.dims.LatentLen() {
		return fmt.Errorf("cpu: prediction buffer has %d elements, want %d", len(pred), b.dims.LatentLen())
	}
	if math.IsNaN(float64(tau)) || math.IsInf(float64(tau), 0) {
		return fmt.Errorf("cpu: timestep is %v; it must be finite", tau)
	}
	cfg := b.cfg
	S, D, A, F, a := cfg.ActionSteps, cfg.HiddenDim, cfg.attn(), cfg.FFNDim, cfg.ActionDim
	eps := cfg.Eps
	mod := b.modulation(tau)
	x, h := b.x, b.h
	b.linear(x, latents, S, a, b.w.actionEnc, b.w.actionEncB, D)
	// rows runs f over the token rows [lo, hi) on the backend's workers.
	rows := func(f func(lo, hi int)) { b.parallel(S, f) }
	for l := range b.w.layers {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("cpu: step: %w", err)
		}
		L := &b.w.layers[l]
		m := mod[l*6*D : (l+1)*6*D]
		shift1, scale1, gate1 := m[0:D], m[D:2*D], m[2*D:3*D]
		shift2, scale2, gate2 := m[3*D:4*D], m[4*D:5*D], m[5*D:6*D]

		// (a) self-attention over [video keys ; action keys].
		rows(func(lo, hi int) {
			kernels.LayerNormModulate(h[lo*D:hi*D], x[lo*D:hi*D], D, scale1, shift1, eps)
		})
		b.linear(b.qkv, h, S, D, L.qkv, L.qkvB, 3*A)
		rows(func(lo, hi int) {
			qkv := b.qkv[lo*3*A : hi*3*A]
			kernels.RMSNormStrided(qkv, hi-lo, A, 3*A, 0, L.normQ, eps)
			kernels.RMSNormStrided(qkv, hi-lo, A, 3*A, A, L.normK, eps)
			b.rope(qkv, lo, hi, 3*A, 0)
			b.rope(qkv, lo, hi, 3*A, A)
		})
		kvOff := l * cfg.VideoTokens * A
		b.selfAttention(b.videoK[kvOff:], b.videoV[kvOff:])
		b.linear(b.tmp, b.o, S, A, L.selfO, L.selfOB, D)

		// (b) cross-attention to the text context: no gate, no modulation.
		rows(func(lo, hi int) {
			xr := x[lo*D : hi*D]
			kernels.AddGated(xr, b.tmp[lo*D:hi*D], gate1, D)
			kernels.LayerNormAffine(h[lo*D:hi*D], xr, D, L.norm3W, L.norm3B, eps)
		})
		b.linear(b.qc, h, S, D, L.crossQ, L.crossQB, A)
		rows(func(lo, hi int) { kernels.RMSNormRows(b.qc[lo*A:hi*A], A, L.crossNormQ, eps) })
		b.crossAttention(b.crossK[l], b.crossV[l])
		b.linear(b.tmp, b.o, S, A, L.crossO, L.crossOB, D)

		// (c) feed-forward.
		rows(func(lo, hi int) {
			xr, tr := x[lo*D:hi*D], b.tmp[lo*D:hi*D]
			for i := range xr {
				xr[i] += tr[i]
			}
			kernels.LayerNormModulate(h[lo*D:hi*D], xr, D, scale2, shift2, eps)
		})
		b.linearThen(b.ff, h, S, D, L.ffn0, L.ffn0B, F, kernels.GELU)
		b.linear(b.tmp, b.ff, S, F, L.ffn2, L.ffn2B, D)
		kernels.AddGated(x, b.tmp, gate2, D)
	}
	b.linear(pred, x, S, D, b.w.head, b.w.headB, a)
	return nil
}

// linearBlock is the width of the column blocks linear splits a product
// into. The blocks are fixed by the shape alone, so the result does not
// depend on how many workers share them (a BLAS may round a product of
// other widths differently).
const linearBlock = 512

// linear computes out[m,n] = in[m,k]·wᵀ + bias for a PyTorch weight w[n,k].
// Wide products are computed in blocks of linearBlock output columns (rows
// of w), one Sgemm call each, which the workers share.
func (b *Backend) linear(out, in []float32, m, k int, w, bias []float32, n int) {
	b.linearThen(out, in, m, k, w, bias, n, nil)
}

// linearThen is linear followed by act applied in place to every output
// row's segment of each column block, by the worker that computed the
// block, while the block is in its cache (nil: no activation). act must
// treat every element alone, so the result does not depend on the blocks.
func (b *Backend) linearThen(out, in []float32, m, k int, w, bias []float32, n int, act func([]float32)) {
	part := func(lo, hi int) {
		for r := 0; r < m; r++ {
			copy(out[r*n+lo:r*n+hi], bias[lo:hi])
		}
		b.gemm.Sgemm(blas.NoTrans, blas.Trans, m, hi-lo, k, 1, in, k, w[lo*k:], k, 1, out[lo:], n)
		if act != nil {
			for r := 0; r < m; r++ {
				act(out[r*n+lo : r*n+hi])
			}
		}
	}
	if n <= linearBlock || float64(m)*float64(n)*float64(k) < 1<<20 { // not worth splitting
		part(0, n)
		return
	}
	b.parallel((n+linearBlock-1)/linearBlock, func(lo, hi int) {
		for blk := lo; blk < hi; blk++ {
			part(blk*linearBlock, min((blk+1)*linearBlock, n))
		}
	})
}

// parallel calls f on contiguous parts [lo, hi) of [0, n) that cover it
// once, from up to b.workers goroutines (the calling one among them), and
// returns when every part is done. The parts are handed out on demand,
// about four per worker, and the caller waits for the parts, not for the
// goroutines: a goroutine that only gets a core after the caller has taken
// all the parts finds none left and exits without calling f, so a worker
// that loses its core to another process holds nobody up. Every caller's
// parts write disjoint data and compute each element the same way whatever
// the split, so results do not depend on the number of workers.
func (b *Backend) parallel(n int, f func(lo, hi int)) {
	w := min(b.workers, n)
	if w <= 1 {
		f(0, n)
		return
	}
	chunk := max(1, n/(4*w))
	parts := int64((n + chunk - 1) / chunk)
	var next, done atomic.Int64
	finished := make(chan struct{})
	work := func() {
		for {
			lo := int(next.Add(int64(chunk))) - chunk
			if lo >= n {
				return
			}
			f(lo, min(lo+chunk, n))
			if done.Add(1) == parts {
				close(finished)
			}
		}
	}
	for range w - 1 {
		go work()
	}
	work()
	<-finished
}

// selfAttention writes b.o[S,A]: per head, one softmax over the visible
// video keys followed by the action keys (spec §5), q/k/v in b.qkv. The
// workers take whole heads.
func (b *Backend) selfAttention(videoK, videoV []float32) {
	cfg := b.cfg
	S, A, Dh := cfg.ActionSteps, cfg.attn(), cfg.HeadDim
	V1 := b.visible
	ld := V1 + S
	scale := float32(1 / math.Sqrt(float64(Dh)))
	b.parallel(cfg.NumHeads, func(lo, hi int) {
		for h := lo; h < hi; h++ {
			c, sc := h*Dh, b.scores[h*S*ld:(h+1)*S*ld]
			q, k, v, o := b.qkv[c:], b.qkv[A+c:], b.qkv[2*A+c:], b.o[c:]
			b.gemm.Sgemm(blas.NoTrans, blas.Trans, S, V1, Dh, scale, q, 3*A, videoK[c:], A, 0, sc, ld)
			b.gemm.Sgemm(blas.NoTrans, blas.Trans, S, S, Dh, scale, q, 3*A, k, 3*A, 0, sc[V1:], ld)
			kernels.SoftmaxRows(sc, S, ld)
			b.gemm.Sgemm(blas.NoTrans, blas.NoTrans, S, Dh, V1, 1, sc, ld, videoV[c:], A, 0, o, A)
			b.gemm.Sgemm(blas.NoTrans, blas.NoTrans, S, Dh, S, 1, sc[V1:], ld, v, 3*A, 1, o, A)
		}
	})
}

// crossAttention writes b.o[S,A] from the queries in b.qc and the chunk's
// cross-attention keys and values of one layer; the workers take whole
// heads.
func (b *Backend) crossAttention(k, v []float32) {
	cfg := b.cfg
	S, A, Dh, L := cfg.ActionSteps, cfg.attn(), cfg.HeadDim, b.ctxTokens
	scale := float32(1 / math.Sqrt(float64(Dh)))
	b.parallel(cfg.NumHeads, func(lo, hi int) {
		for h := lo; h < hi; h++ {
			c, sc := h*Dh, b.scores[h*S*L:(h+1)*S*L]
			b.gemm.Sgemm(blas.NoTrans, blas.Trans, S, L, Dh, scale, b.qc[c:], A, k[c:], A, 0, sc, L)
			kernels.SoftmaxRows(sc, S, L)
			b.gemm.Sgemm(blas.NoTrans, blas.NoTrans, S, Dh, L, 1, sc, L, v[c:], A, 0, b.o[c:], A)
		}
	})
}

// rope rotates, in the rows of m (row stride ld) that hold the tokens
// [lo, hi), the A-wide block at column off: each head's interleaved pairs
// (2j, 2j+1) by position·ω_j. The rotation runs in float64 with float64
// tables, as the reference does.
func (b *Backend) rope(m []float32, lo, hi, ld, off int) {
	cfg := b.cfg
	half := cfg.HeadDim / 2
	for s := lo; s < hi; s++ {
		r := (s - lo) * ld
		kernels.Rope(m[r+off:r+off+cfg.attn()], cfg.NumHeads, cfg.HeadDim, b.ropeCos[s*half:(s+1)*half], b.ropeSin[s*half:(s+1)*half])
	}
}

// modulation returns the six modulation vectors of every layer for timestep
// tau, [layers, 6, D], computing them once per distinct timestep.
func (b *Backend) modulation(tau float32) []float32 {
	if m, ok := b.modCache[tau]; ok {
		return m
	}
	cfg := b.cfg
	D, f := cfg.HiddenDim, cfg.FreqDim
	e := sinusoid(tau, f)
	t1 := make([]float32, D)
	b.linear(t1, e, 1, f, b.w.time0, b.w.time0B, D)
	kernels.SiLU(t1)
	t := make([]float32, D)
	b.linear(t, t1, 1, D, b.w.time2, b.w.time2B, D)
	kernels.SiLU(t)
	tm := make([]float32, 6*D)
	b.linear(tm, t, 1, D, b.w.timeProj, b.w.timeProjB, 6*D)
	out := make([]float32, cfg.NumLayers*6*D)
	for l := range b.w.layers {
		mod := b.w.layers[l].mod
		for i := 0; i < 6*D; i++ {
			out[l*6*D+i] = mod[i] + tm[i]
		}
	}
	if len(b.modCache) >= modCacheSize {
		clear(b.modCache)
	}
	b.modCache[tau] = out
	return out
}

// sinusoid is the timestep embedding: cos(τ·ω'_j) then sin(τ·ω'_j),
// ω'_j = 10000^(-j/half), computed in float64 and rounded to float32.
func sinusoid(tau float32, dim int) []float32 {
	half := dim / 2
	e := make([]float32, dim)
	for j := 0; j < half; j++ {
		w := math.Pow(10000, -float64(j)/float64(half))
		s, c := math.Sincos(float64(tau) * w)
		e[j], e[half+j] = float32(c), float32(s)
	}
	return e
}
