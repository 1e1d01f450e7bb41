// Package cpu is the reference backend of the action expert: one denoise
// step computed in float32 on the host exactly as the specification states,
// with the per-chunk work (text embedding, cross-attention keys and values)
// done once in BindChunk and the per-schedule work (the modulation vectors
// of each timestep) done once per process.
//
// Matrix products go through a BLAS: OpenBLAS, loaded at run time without
// cgo when it is installed, or gonum's pure-Go implementation otherwise.
package cpu

import (
	"encoding/json"
	"fmt"
	"math"

	"github.com/fastwam/actionexpert/expert"
)

// Config is the action expert's architecture, as the training configuration
// (action_dit_config) names it, plus the sizes of the inputs it is fed.
type Config struct {
	HiddenDim   int     `json:"hidden_dim"`    // D
	FFNDim      int     `json:"ffn_dim"`       // F
	NumHeads    int     `json:"num_heads"`     // H
	HeadDim     int     `json:"attn_head_dim"` // Dh
	NumLayers   int     `json:"num_layers"`    // N
	TextDim     int     `json:"text_dim"`      // T
	FreqDim     int     `json:"freq_dim"`      // f
	Eps         float64 `json:"eps"`           // norm epsilon
	ActionDim   int     `json:"action_dim"`    // a
	ActionSteps int     `json:"action_tokens,omitempty"`

	// Sizes of the per-chunk inputs; they are not fixed by the weights.
	VideoTokens   int `json:"video_tokens,omitempty"`   // Sv
	ContextTokens int `json:"context_tokens,omitempty"` // L
}

// FullConfig is the released LIBERO action expert (about 1.02 B parameters).
func FullConfig() Config {
	return Config{HiddenDim: 1024, FFNDim: 4096, NumHeads: 24, HeadDim: 128, NumLayers: 30,
		TextDim: 4096, FreqDim: 256, Eps: 1e-6, ActionDim: 7, ActionSteps: 32,
		VideoTokens: 98, ContextTokens: 129}
}

// ropeMaxPositions is the length of the model's RoPE table: action chunks
// longer than this have no trained positions.
const ropeMaxPositions = 1024

// withDefaults fills the optional sizes: 32 actions, and the production
// 98 video and 129 context tokens.
func (c Config) withDefaults() Config {
	if c.ActionSteps == 0 {
		c.ActionSteps = 32
	}
	if c.VideoTokens == 0 {
		c.VideoTokens = 98
	}
	if c.ContextTokens == 0 {
		c.ContextTokens = 129
	}
	if c.Eps == 0 {
		c.Eps = 1e-6
	}
	return c
}

// Limits on a configuration's numbers. They are far above the released
// model (hidden 1024, FFN 4096, 24x128 heads, 30 layers, text 4096,
// 98 video and 129 context tokens) and low enough that no product of them
// the backend forms can overflow an int, so a hostile configuration is
// refused by name before anything is sized from it.
const (
	maxLayers    = 1024
	maxWidth     = 1 << 16 // hidden_dim, ffn_dim, text_dim, freq_dim, attention width
	maxHeads     = 1024
	maxHeadDim   = 1024
	maxActionDim = 1 << 12
	maxTokens    = 1 << 16 // video_tokens, context_tokens
	// MaxParams bounds the parameters a configuration may describe:
	// 16 Gi float32 parameters (64 GiB), 16 times the released model.
	MaxParams = 1 << 34
)

// Validate reports a configuration the backend cannot run: a number that is
// not positive or above its limit (named with the field and the limit), an
// odd head or frequency width, more action tokens than RoPE positions, or
// more than MaxParams parameters in all.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
		max  int
	}{
		{"hidden_dim", c.HiddenDim, maxWidth}, {"ffn_dim", c.FFNDim, maxWidth}, {"num_heads", c.NumHeads, maxHeads},
		{"attn_head_dim", c.HeadDim, maxHeadDim}, {"num_layers", c.NumLayers, maxLayers}, {"text_dim", c.TextDim, maxWidth},
		{"freq_dim", c.FreqDim, maxWidth}, {"action_dim", c.ActionDim, maxActionDim}, {"action_tokens", c.ActionSteps, ropeMaxPositions},
		{"video_tokens", c.VideoTokens, maxTokens}, {"context_tokens", c.ContextTokens, maxTokens},
	} {
		if f.v <= 0 {
			return fmt.Errorf("cpu: config %s must be positive, got %d", f.name, f.v)
		}
		if f.v > f.max {
			return fmt.Errorf("cpu: config %s is %d, above the limit of %d", f.name, f.v, f.max)
		}
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("cpu: config attn_head_dim must be even for RoPE, got %d", c.HeadDim)
	}
	if c.FreqDim%2 != 0 {
		return fmt.Errorf("cpu: config freq_dim must be even, got %d", c.FreqDim)
	}
	if a := c.NumHeads * c.HeadDim; a > maxWidth { // both at most 1024: no overflow
		return fmt.Errorf("cpu: config attention width num_heads*attn_head_dim = %d*%d = %d is above the limit of %d",
			c.NumHeads, c.HeadDim, a, maxWidth)
	}
	if !(c.Eps > 0) || c.Eps > 1 {
		return fmt.Errorf("cpu: config eps must be in (0, 1], got %v", c.Eps)
	}
	n, ok := c.numParams()
	if !ok || n > MaxParams {
		return fmt.Errorf("cpu: config describes more than %d parameters (%d layers, hidden %d, %dx%d heads, ffn %d, text %d)",
			MaxParams, c.NumLayers, c.HiddenDim, c.NumHeads, c.HeadDim, c.FFNDim, c.TextDim)
	}
	return nil
}

// numParams counts the scalar parameters of the configuration (spec §1)
// with overflow-checked arithmetic; ok is false when the count does not fit
// an int. It must agree with the tensor list of params.
func (c Config) numParams() (n int, ok bool) {
	D, F, A, T, f, a := c.HiddenDim, c.FFNDim, c.attn(), c.TextDim, c.FreqDim, c.ActionDim
	var acc checked
	// action encoder, text embedding, time embedding, time projection, head
	top := acc.sum(acc.mul(D, a), D, acc.mul(D, T), D, acc.mul(D, D), D,
		acc.mul(D, f), D, acc.mul(D, D), D, acc.mul(6, D, D), acc.mul(6, D), acc.mul(a, D), a)
	// modulation; self q,k,v,o; norms; cross q,k,v,o; norms; norm3; ffn
	layer := acc.sum(acc.mul(6, D),
		acc.mul(3, acc.sum(acc.mul(A, D), A)), acc.mul(D, A), D, acc.mul(2, A),
		acc.mul(3, acc.sum(acc.mul(A, D), A)), acc.mul(D, A), D, acc.mul(2, A),
		acc.mul(2, D), acc.mul(F, D), F, acc.mul(D, F), D)
	n = acc.sum(top, acc.mul(c.NumLayers, layer))
	return n, !acc.overflow
}

// checked is int arithmetic that remembers whether any result overflowed
// (operands are non-negative).
type checked struct{ overflow bool }

func (k *checked) mul(v ...int) int {
	p := 1
	for _, x := range v {
		if x < 0 || (x != 0 && p > math.MaxInt/x) {
			k.overflow = true
			return 0
		}
		p *= x
	}
	return p
}

func (k *checked) sum(v ...int) int {
	s := 0
	for _, x := range v {
		if x < 0 || s > math.MaxInt-x {
			k.overflow = true
			return 0
		}
		s += x
	}
	return s
}

// Dims is the step contract of this configuration.
func (c Config) Dims() expert.Dims {
	return expert.Dims{Layers: c.NumLayers, Heads: c.NumHeads, HeadDim: c.HeadDim,
		VideoTokens: c.VideoTokens, ContextTokens: c.ContextTokens, TextDim: c.TextDim,
		ActionTokens: c.ActionSteps, ActionDim: c.ActionDim}
}

// attn is the attention width A = H*Dh.
func (c Config) attn() int { return c.NumHeads * c.HeadDim }

// parseConfig reads a configuration from JSON. Keys of the training
// configuration that do not concern the action step are ignored.
func parseConfig(b []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return Config{}, fmt.Errorf("cpu: configuration JSON: %w", err)
	}
	return c, nil
}
