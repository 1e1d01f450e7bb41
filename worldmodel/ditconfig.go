package worldmodel

import (
	"encoding/json"
	"fmt"

	"github.com/fastwam/actionexpert/internal/strictjson"
)

// DiTConfigMetadataKey is the safetensors metadata entry of a DiT weight
// file that holds its DiTConfig as a JSON object (docs/world-model.md).
const DiTConfigMetadataKey = "fastwam_world_config"

// DiTConfig is the video DiT's architecture (world-model.md §0, §6.2): the
// widths of the video expert and of the inputs it is fed.
type DiTConfig struct {
	HiddenDim      int `json:"hidden_dim"`      // D, also the attention width A = NumHeads·HeadDim
	FFNDim         int `json:"ffn_dim"`         // F
	NumHeads       int `json:"num_heads"`       // Hh
	HeadDim        int `json:"head_dim"`        // Dh
	NumLayers      int `json:"num_layers"`      // N
	TextDim        int `json:"text_dim"`        // T, the context's width
	FreqDim        int `json:"freq_dim"`        // f, the timestep sinusoid's width
	ProprioDim     int `json:"proprio_dim"`     // P, the proprio state's length
	LatentChannels int `json:"latent_channels"` // z, the VAE latent's channels
}

// FullDiTConfig is the released video expert of Fast-WAM (5.0 B
// parameters): 3072 wide, FFN 14336, 24 heads of 128, 30 layers, text 4096,
// sinusoid 256, proprio 8, latent 48.
func FullDiTConfig() DiTConfig {
	return DiTConfig{HiddenDim: 3072, FFNDim: 14336, NumHeads: 24, HeadDim: 128, NumLayers: 30,
		TextDim: 4096, FreqDim: 256, ProprioDim: 8, LatentChannels: LatentChannels}
}

// Limits on a DiT configuration: far above the released model, and low
// enough that no product of them the DiT forms overflows an int.
const (
	maxDiTLayers = 1024
	maxDiTWidth  = 1 << 16 // hidden, FFN, text and sinusoid widths
	maxDiTHeads  = 1024
	maxProprio   = 1 << 12
	maxLatentCh  = 1 << 12
	// MaxDiTParams bounds the parameters a DiT configuration may
	// describe: 16 Gi (64 GiB in float32), three times the released model.
	MaxDiTParams = 1 << 34
)

// Validate checks every size is positive and within its limit, that the
// heads tile the hidden width, and the 3-D RoPE rule of world-model.md §9:
// the head dim splits into Dh − 2⌊Dh/3⌋ temporal and twice ⌊Dh/3⌋ spatial
// dims, each of which must be even (24 gives 8 + 8 + 8; 16 fails).
func (c DiTConfig) Validate() error {
	for _, f := range []struct {
		name   string
		v, max int
	}{
		{"hidden_dim", c.HiddenDim, maxDiTWidth}, {"ffn_dim", c.FFNDim, maxDiTWidth},
		{"num_heads", c.NumHeads, maxDiTHeads}, {"head_dim", c.HeadDim, maxDiTWidth},
		{"num_layers", c.NumLayers, maxDiTLayers}, {"text_dim", c.TextDim, maxDiTWidth},
		{"freq_dim", c.FreqDim, maxDiTWidth}, {"proprio_dim", c.ProprioDim, maxProprio},
		{"latent_channels", c.LatentChannels, maxLatentCh},
	} {
		if f.v < 1 || f.v > f.max {
			return fmt.Errorf("worldmodel: DiT config: %s = %d, want 1..%d", f.name, f.v, f.max)
		}
	}
	if c.NumHeads*c.HeadDim != c.HiddenDim {
		return fmt.Errorf("worldmodel: DiT config: %d heads × head_dim %d = %d, want hidden_dim %d", c.NumHeads, c.HeadDim, c.NumHeads*c.HeadDim, c.HiddenDim)
	}
	if c.FreqDim%2 != 0 {
		return fmt.Errorf("worldmodel: DiT config: freq_dim %d is odd, want an even width (cos then sin halves)", c.FreqDim)
	}
	s := c.HeadDim / 3
	if t := c.HeadDim - 2*s; s%2 != 0 || t%2 != 0 || s == 0 {
		return fmt.Errorf("worldmodel: DiT config: head_dim %d splits into %d temporal + %d + %d spatial RoPE dims; each must be even and positive (world-model.md §9)", c.HeadDim, t, s, s)
	}
	if n := c.NumParams(); n > MaxDiTParams {
		return fmt.Errorf("worldmodel: DiT config describes %d parameters, more than the limit %d", n, int64(MaxDiTParams))
	}
	return nil
}

// NumParams is the number of parameters the configuration's checkpoint
// holds (every tensor of world-model.md §6.2 and the proprio encoder),
// computed in int64 so that a hostile configuration cannot overflow it.
func (c DiTConfig) NumParams() int64 {
	D, F, T, f, P, z := int64(c.HiddenDim), int64(c.FFNDim), int64(c.TextDim), int64(c.FreqDim), int64(c.ProprioDim), int64(c.LatentChannels)
	block := 6*D + 8*(D*D+D) + 4*D + 2*D + (F*D + F) + (D*F + D)
	stem := (D*z*4 + D) + (D*T + D) + (D*D + D) + (D*f + D) + (D*D + D) + (6*D*D + 6*D) + T*P + T
	return stem + int64(c.NumLayers)*block
}

// ParseDiTConfig reads a DiTConfig from its JSON object, strictly: every
// one of the nine fields present once, as an integer, and no other field.
func ParseDiTConfig(b []byte) (DiTConfig, error) {
	var c DiTConfig
	fields := map[string]*int{
		"hidden_dim": &c.HiddenDim, "ffn_dim": &c.FFNDim, "num_heads": &c.NumHeads, "head_dim": &c.HeadDim,
		"num_layers": &c.NumLayers, "text_dim": &c.TextDim, "freq_dim": &c.FreqDim,
		"proprio_dim": &c.ProprioDim, "latent_channels": &c.LatentChannels,
	}
	seen := map[string]bool{}
	err := strictjson.Object(b, func(key string, raw []byte) error {
		p, ok := fields[key]
		if !ok {
			return fmt.Errorf("unknown field %q", key)
		}
		seen[key] = true
		if err := json.Unmarshal(raw, p); err != nil {
			return fmt.Errorf("field %q is %s: want an integer", key, raw)
		}
		return nil
	})
	if err != nil {
		return DiTConfig{}, fmt.Errorf("worldmodel: DiT config: %w", err)
	}
	for _, k := range []string{"hidden_dim", "ffn_dim", "num_heads", "head_dim", "num_layers", "text_dim", "freq_dim", "proprio_dim", "latent_channels"} {
		if !seen[k] {
			return DiTConfig{}, fmt.Errorf("worldmodel: DiT config: field %q missing", k)
		}
	}
	return c, nil
}
