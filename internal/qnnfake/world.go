package qnnfake

import (
	"fmt"
	"slices"
)

// WorldDims sizes the world model's graphs (the contracts of package
// expert/htp/prefill).
type WorldDims struct {
	ImageHeight, ImageWidth                   int // image [1, 3, H, W]
	LatentChannels, LatentHeight, LatentWidth int // latent [1, C, h, w]
	ContextRows, TextDim                      int // context [1, L, T]
	VideoTokens, Width                        int // Sv, A: keys [n, 1, Sv, A]
	Layers                                    []int
}

// WorldModelGraphs returns the world model's graphs for w, every tensor
// of data type dt: vae_encoder (image -> latent) and one prefill_i per
// entry of w.Layers, prefill_0 taking context and latent and giving ctx_v,
// the others taking ctx_v and hidden; every range gives video_keys and
// video_values of its layers, and hidden_out except the last. Graph i
// reports a spill-fill size of i+1 MiB, so the last range starts the
// group.
func WorldModelGraphs(dt uint32, w WorldDims) []Graph {
	id := uint32(400)
	u := func(v int) uint32 { return uint32(v) }
	f := func(name string, dims ...uint32) Tensor {
		id++
		return Tensor{ID: id, Name: name, DataType: dt, Dims: dims}
	}
	latent := []uint32{1, u(w.LatentChannels), u(w.LatentHeight), u(w.LatentWidth)}
	hid := []uint32{1, u(w.VideoTokens), u(w.Width)}
	ctxV := []uint32{1, u(w.ContextRows), u(w.Width)}
	gs := []Graph{{Name: "vae_encoder", SpillFill: 1 << 20,
		Inputs:  []Tensor{f("image", 1, 3, u(w.ImageHeight), u(w.ImageWidth))},
		Outputs: []Tensor{f("latent", latent...)}}}
	for i, n := range w.Layers {
		g := Graph{Name: fmt.Sprintf("prefill_%d", i), SpillFill: uint64(i+2) << 20}
		kv := []uint32{u(n), 1, u(w.VideoTokens), u(w.Width)}
		if i == 0 {
			g.Inputs = []Tensor{f("context", 1, u(w.ContextRows), u(w.TextDim)), f("latent", latent...)}
			g.Outputs = []Tensor{f("video_keys", kv...), f("ctx_v", ctxV...)}
		} else {
			g.Inputs = []Tensor{f("ctx_v", ctxV...), f("hidden", hid...)}
			g.Outputs = []Tensor{f("video_keys", kv...)}
		}
		g.Outputs = append(g.Outputs, f("video_values", kv...))
		if i < len(w.Layers)-1 {
			g.Outputs = append(g.Outputs, f("hidden_out", hid...))
		}
		gs = append(gs, g)
	}
	return gs
}

// WorldModelExpected composes Expected along the chain of gs (as
// WorldModelGraphs makes it): the keys and values every range writes, in
// chain order, for the image and context given.
func WorldModelExpected(gs []Graph, image, context []float32) (keys, values []float32) {
	run := func(g Graph, vals map[string][]float32) map[string][]float32 {
		in := make([][]float32, len(g.Inputs))
		for m, t := range g.Inputs {
			in[m] = vals[t.Name]
		}
		out := Expected(g, in)
		res := map[string][]float32{}
		for j, t := range g.Outputs {
			if out != nil {
				res[t.Name] = out[j]
			}
		}
		return res
	}
	enc := run(gs[0], map[string][]float32{"image": image})
	p0 := run(gs[1], map[string][]float32{"latent": enc["latent"], "context": context})
	keys, values = slices.Clone(p0["video_keys"]), slices.Clone(p0["video_values"])
	hidden := p0["hidden_out"]
	for _, g := range gs[2:] {
		o := run(g, map[string][]float32{"hidden": hidden, "ctx_v": p0["ctx_v"]})
		keys, values = append(keys, o["video_keys"]...), append(values, o["video_values"]...)
		hidden = o["hidden_out"]
	}
	return keys, values
}
