// Package kernels holds the element-wise and row-wise float32 kernels of
// the transformer blocks that the action expert (expert/cpu) and the video
// DiT (worldmodel) share (action-step.md §3): LayerNorm with adaLN
// modulation or an affine, RMSNorm, softmax, GELU (tanh form), SiLU, the
// gated residual add, interleaved RoPE with a per-pair angle table, a
// float64 exponential, and the VAE's channel RMS-norm + SiLU pass
// (AddSquares, ScaleSiLU).
//
// Every kernel computes in float64 where the reference does and rounds
// once to float32, except ScaleSiLU, which works in float32 with Cephes'
// expf polynomial (within 4 + 2|f| ulp of a float64 SiLU, tested). On
// amd64 CPUs with AVX2 the hot loops run as assembly (kernels_amd64.s,
// rmssilu_amd64.s) that performs the portable loops' operations in the
// same order, so the results are the same bits on every CPU.
//
// The package imports nothing of this module; it stands on the lowest
// floor (internal/layers).
package kernels
