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

// Validate reports a configuration the backend cannot run.
func (c Config) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"hidden_dim", c.HiddenDim}, {"ffn_dim", c.FFNDim}, {"num_heads", c.NumHeads},
		{"attn_head_dim", c.HeadDim}, {"num_layers", c.NumLayers}, {"text_dim", c.TextDim},
		{"freq_dim", c.FreqDim}, {"action_dim", c.ActionDim}, {"action_tokens", c.ActionSteps},
		{"video_tokens", c.VideoTokens}, {"context_tokens", c.ContextTokens},
	} {
		if f.v <= 0 {
			return fmt.Errorf("cpu: config %s must be positive, got %d", f.name, f.v)
		}
	}
	if c.HeadDim%2 != 0 {
		return fmt.Errorf("cpu: config attn_head_dim must be even for RoPE, got %d", c.HeadDim)
	}
	if c.FreqDim%2 != 0 {
		return fmt.Errorf("cpu: config freq_dim must be even, got %d", c.FreqDim)
	}
	if c.ActionSteps > ropeMaxPositions {
		return fmt.Errorf("cpu: %d action tokens exceed the %d RoPE positions", c.ActionSteps, ropeMaxPositions)
	}
	if !(c.Eps > 0) {
		return fmt.Errorf("cpu: config eps must be positive, got %v", c.Eps)
	}
	return nil
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
