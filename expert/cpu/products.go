package cpu

// Product is one shape of weight product in the step: the linear layer
// out[M,N] = in[M,K]·Wᵀ + bias, with the weight W stored [N, K] as PyTorch
// stores it, computed as one Sgemm(NoTrans, Trans, M, N, K) call.
type Product struct {
	Name    string // the linear layers of this shape, e.g. "self q,k,v"
	M, N, K int
	PerStep int // calls of this shape in one step
}

// Flops is the work of one call, 2·M·N·K.
func (p Product) Flops() float64 { return 2 * float64(p.M) * float64(p.N) * float64(p.K) }

// StepProducts lists the weight products one step computes, one entry per
// distinct shape, in the order the step first meets them: the action
// encoder, the five per-layer shapes (self q,k,v fused; the two output
// projections; cross q; FFN in; FFN out) and the head. The per-chunk
// products (text embedding, cross keys and values) and the per-timestep ones
// (time MLP, modulation) are cached and not listed; the per-head attention
// products are counted by AttentionFlops.
func (c Config) StepProducts() []Product {
	c = c.withDefaults()
	S, D, A, F, a, n := c.ActionSteps, c.HiddenDim, c.attn(), c.FFNDim, c.ActionDim, c.NumLayers
	return []Product{
		{Name: "action encoder", M: S, N: D, K: a, PerStep: 1},
		{Name: "self q,k,v", M: S, N: 3 * A, K: D, PerStep: n},
		{Name: "self o, cross o", M: S, N: D, K: A, PerStep: 2 * n},
		{Name: "cross q", M: S, N: A, K: D, PerStep: n},
		{Name: "ffn in", M: S, N: F, K: D, PerStep: n},
		{Name: "ffn out", M: S, N: D, K: F, PerStep: n},
		{Name: "head", M: S, N: a, K: D, PerStep: 1},
	}
}

// AttentionFlops is the work of the per-head attention products of one
// step (scores and weighted values, self-attention over all Sv video and S
// action keys, cross-attention over all L context tokens).
func (c Config) AttentionFlops() float64 {
	c = c.withDefaults()
	S, A, Sv, L := float64(c.ActionSteps), float64(c.attn()), float64(c.VideoTokens), float64(c.ContextTokens)
	return float64(c.NumLayers) * (2*2*S*(Sv+S)*A + 2*2*S*L*A)
}

// StepFlops is the matrix-product work of one step with the per-chunk and
// per-timestep results cached: StepProducts plus AttentionFlops (spec §9:
// 55.40 GFLOP at full size, the spec's 55.42 less the cached time MLP).
func (c Config) StepFlops() float64 {
	f := c.AttentionFlops()
	for _, p := range c.StepProducts() {
		f += float64(p.PerStep) * p.Flops()
	}
	return f
}

// Gemm returns the BLAS the backend computes with, so a benchmark can time
// the same library, with the same thread count, on the step's shapes.
func (b *Backend) Gemm() Gemm { return b.gemm }
