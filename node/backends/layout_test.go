package backends

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/qnnfake"
	"github.com/fastwam/actionexpert/node/params"
)

// layoutDims is the action contract of these tests (the key width 2 × 128,
// as the backend splits it with its default head width) and worldDims the
// world model's graphs that feed it: 2 + 1 layers of 8 video tokens.
var layoutDims = expert.Dims{Layers: 3, Heads: 2, HeadDim: 128, VideoTokens: 8, ContextTokens: 5, TextDim: 32, ActionTokens: 6, ActionDim: 7}

var worldDims = qnnfake.WorldDims{ImageHeight: 4, ImageWidth: 6, LatentChannels: 2, LatentHeight: 2, LatentWidth: 4,
	ContextRows: 5, TextDim: 32, VideoTokens: 8, Width: 256, Layers: []int{2, 1}}

// layoutBundle writes one binary per graph of the split action bundle and
// of the world model, and returns the graphs and the paths by graph name.
func layoutBundle(t *testing.T, dt uint32) (map[string]qnnfake.Graph, map[string]string) {
	t.Helper()
	cg, sg := qnnfake.ActionContextGraph(dt, layoutDims), qnnfake.ActionStepCtxGraph(dt, layoutDims)
	cg.SpillFill, sg.SpillFill = 1<<20, 7<<20 // action_step_ctx starts the group
	gs := append([]qnnfake.Graph{cg, sg}, qnnfake.WorldModelGraphs(dt, worldDims)...)
	dir := t.TempDir()
	graphs, paths := map[string]qnnfake.Graph{}, map[string]string{}
	for _, g := range gs {
		p := filepath.Join(dir, g.Name+".bin")
		writeGraphs(t, p, g)
		graphs[g.Name], paths[g.Name] = g, p
	}
	return graphs, paths
}

func writeGraphs(t *testing.T, path string, gs ...qnnfake.Graph) {
	t.Helper()
	b := qnnfake.Binary{SocModel: 60, Arch: 73, BuildID: "layout-test", Graphs: gs}
	if err := os.WriteFile(path, b.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func layoutParams(fk *qnnfake.Lib, world string, paths map[string]string, names ...string) params.HTPParams {
	h := params.Default().HTP
	h.BackendLibrary, h.SystemLibrary, h.RPCMemLibrary = fk.Path, fk.Path, fk.Path
	h.WorldModel = world
	for _, n := range names {
		h.ContextPaths = append(h.ContextPaths, paths[n])
	}
	return h
}

var allGraphs = []string{"action_context", "action_step_ctx", "vae_encoder", "prefill_0", "prefill_1"}

// TestHTPSetSameProcess opens the split action bundle and the world model
// in one process and runs the whole chunk on the double: the world model's
// chain writes K/V (with shared buffers straight into the expert's inputs),
// the expert binds them, runs action_context once and
// action_step_ctx per step, and every prediction is the double's
// arithmetic on the K/V the chain wrote. The record shows the five
// contexts in one spill-fill group and each prefill graph reading its
// predecessor's output memory.
func TestHTPSetSameProcess(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "RAW links", true: "shared links"}[shared], func(t *testing.T) {
			fk := qnnfake.New(t, qnnfake.Variant{})
			graphs, paths := layoutBundle(t, qnnfake.DataTypeFloat32)
			h := layoutParams(fk, params.WorldModelSameProcess, paths, allGraphs...)
			h.SharedBuffers = shared
			log := &recordLogger{}
			p := params.Default()
			p.HTP = h
			b, err := Open(t.Context(), p, log)
			if err != nil {
				t.Fatal(err)
			}
			set := b.(*HTPSet)
			if !set.Layout.Split || !slices.Equal(set.Layout.WorldModel, []string{"vae_encoder", "prefill_0", "prefill_1"}) || set.WorldModel() == nil {
				t.Fatalf("layout %+v", set.Layout)
			}
			if !slices.ContainsFunc(log.lines, func(l string) bool { return strings.Contains(l, "world model in this process") }) {
				t.Errorf("no layout line in the log: %q", log.lines)
			}
			// With shared buffers the prefill graphs' K/V outputs are
			// registered inside the expert's inputs (CUSTOM regions): no
			// host copy; without, nothing is bound.
			inPlace := slices.ContainsFunc(log.lines, func(l string) bool { return strings.Contains(l, "K/V written in place") })
			custom := 0
			for _, m := range fk.MemRecords() {
				if m.MemType == 2 { // QNN_MEM_TYPE_CUSTOM
					custom++
				}
			}
			if shared && (!inPlace || custom != 4) {
				t.Errorf("shared buffers: %d CUSTOM registrations (want 4: K and V of 2 ranges), in-place line %v; log %q", custom, inPlace, log.lines)
			}
			if !shared && (inPlace || custom != 0) {
				t.Errorf("RAW links: %d CUSTOM registrations, in-place line %v; want none", custom, inPlace)
			}
			recs := fk.ContextRecords()
			if len(recs) != 5 {
				t.Fatalf("%d contexts, want 5", len(recs))
			}
			for _, r := range recs {
				if !r.Group || r.GroupSpillFill != 7<<20 || (r.Seq > 1 && r.FirstSeq != 1) {
					t.Errorf("context %+v: want all five in one group of 7 MiB started by the first", r)
				}
			}

			r := rand.New(rand.NewPCG(3, 4))
			wc := set.WorldModel()
			const chunks, steps = 2, 3
			for c := range chunks {
				image, text := randVec(r, wc.ImageLen()), randVec(r, wc.ContextLen())
				keys, values := make([]float32, wc.KVLen()), make([]float32, wc.KVLen())
				if err := wc.Run(t.Context(), image, text, keys, values); err != nil {
					t.Fatal(err)
				}
				wk, wv := qnnfake.WorldModelExpected(qnnfake.WorldModelGraphs(qnnfake.DataTypeFloat32, worldDims), image, text)
				if !slices.Equal(keys, wk) || !slices.Equal(values, wv) {
					t.Fatalf("chunk %d: the chain's K/V differ from the double's arithmetic", c)
				}
				mask := make([]bool, layoutDims.ContextTokens)
				for i := range mask {
					mask[i] = true
				}
				ch := &expert.Chunk{VideoKeys: keys, VideoValues: values, Context: text, ContextMask: mask}
				if err := set.BindChunk(t.Context(), ch); err != nil {
					t.Fatal(err)
				}
				lat := randVec(r, layoutDims.ActionTokens*layoutDims.ActionDim)
				pred := make([]float32, len(lat))
				for s := range steps {
					tau := float32(s+1) / steps
					if err := set.Step(t.Context(), lat, tau, pred); err != nil {
						t.Fatal(err)
					}
					if want := stepExpected(graphs, ch, lat, tau); !slices.Equal(pred, want) {
						t.Fatalf("chunk %d step %d: prediction differs from the double's arithmetic on the chain's K/V", c, s)
					}
				}
			}
			// The record: per chunk vae_encoder, prefill_0, prefill_1,
			// action_context, then the steps.
			var seq []string
			for _, e := range fk.ExecuteRecords() {
				seq = append(seq, e.Graph)
			}
			one := []string{"vae_encoder", "prefill_0", "prefill_1", "action_context"}
			for range steps {
				one = append(one, "action_step_ctx")
			}
			want := slices.Concat(one, one)
			if !slices.Equal(seq, want) {
				t.Errorf("executes %q, want %q", seq, want)
			}
			ex := fk.ExecuteRecords()
			in := func(e qnnfake.ExecuteRecord, g, name string) uintptr {
				return e.Inputs[slices.IndexFunc(graphs[g].Inputs, func(x qnnfake.Tensor) bool { return x.Name == name })]
			}
			out := func(e qnnfake.ExecuteRecord, g, name string) uintptr {
				return e.Outputs[slices.IndexFunc(graphs[g].Outputs, func(x qnnfake.Tensor) bool { return x.Name == name })]
			}
			if out(ex[0], "vae_encoder", "latent") != in(ex[1], "prefill_0", "latent") ||
				out(ex[1], "prefill_0", "hidden_out") != in(ex[2], "prefill_1", "hidden") ||
				out(ex[1], "prefill_0", "ctx_v") != in(ex[2], "prefill_1", "ctx_v") ||
				out(ex[3], "action_context", "cross_keys") != in(ex[4], "action_step_ctx", "cross_keys") {
				t.Error("a chained graph does not read its predecessor's output memory")
			}
			// After a reload the chain runs on the new session.
			if err := set.Reload(t.Context()); err != nil {
				t.Fatal(err)
			}
			image, text := randVec(r, wc.ImageLen()), randVec(r, wc.ContextLen())
			keys, values := make([]float32, wc.KVLen()), make([]float32, wc.KVLen())
			if err := wc.Run(t.Context(), image, text, keys, values); err != nil {
				t.Fatalf("chain after Reload: %v", err)
			}
			if wk, _ := qnnfake.WorldModelExpected(qnnfake.WorldModelGraphs(qnnfake.DataTypeFloat32, worldDims), image, text); !slices.Equal(keys, wk) {
				t.Error("chain after Reload: K differ from the double's arithmetic")
			}
			if err := set.Close(); err != nil {
				t.Fatal(err)
			}
			if n := fk.LiveHandles(); n != 0 {
				t.Errorf("%d live handles after Close", n)
			}
		})
	}
}

func randVec(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.Float64()*2 - 1)
	}
	return x
}

// stepExpected is the double's arithmetic for one split step on chunk c.
func stepExpected(graphs map[string]qnnfake.Graph, c *expert.Chunk, latents []float32, tau float32) []float32 {
	cross := qnnfake.Expected(graphs["action_context"], [][]float32{c.Context})
	mask := make([]float32, len(c.ContextMask))
	for i, m := range c.ContextMask {
		if m {
			mask[i] = 1
		}
	}
	by := map[string][]float32{"latents_action": latents, "timestep": {tau}, "video_keys": c.VideoKeys, "video_values": c.VideoValues,
		"cross_keys": cross[0], "cross_values": cross[1], "context_mask": mask}
	sg := graphs["action_step_ctx"]
	in := make([][]float32, len(sg.Inputs))
	for m, t := range sg.Inputs {
		in[m] = by[t.Name]
	}
	return qnnfake.Expected(sg, in)[0]
}

// TestPlanHTPRefusals checks that every wrong graph set is refused before
// anything is loaded, with an error naming what was wrong.
func TestPlanHTPRefusals(t *testing.T) {
	fk := qnnfake.New(t, qnnfake.Variant{})
	graphs, paths := layoutBundle(t, qnnfake.DataTypeFloat32)
	dir := t.TempDir()
	odd := filepath.Join(dir, "odd.bin")
	g := graphs["prefill_1"]
	g.Name = "decoder_0"
	writeGraphs(t, odd, g)
	twice := filepath.Join(dir, "twice.bin")
	writeGraphs(t, twice, graphs["prefill_0"])
	link := filepath.Join(dir, "link.bin")
	if err := os.Symlink(paths["prefill_0"], link); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.bin")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, ProcessCeiling); err != nil { // sparse
		t.Fatal(err)
	}
	same, other := params.WorldModelSameProcess, params.WorldModelOtherProcess
	for _, tc := range []struct {
		name  string
		world string
		names []string
		extra []string
		want  string
	}{
		{"world graphs in other_process", other, allGraphs, nil, `"htp.world_model" is "other_process"`},
		{"unknown graph", same, allGraphs, []string{odd}, `graph "decoder_0", which no part of the layout runs`},
		{"missing file", same, allGraphs, []string{filepath.Join(dir, "absent.bin")}, "absent.bin"},
		{"same file twice", same, allGraphs, []string{link}, "are the same file"},
		{"graph in two binaries", same, allGraphs, []string{twice}, `graph "prefill_0" is in both`},
		{"half the split bundle", other, []string{"action_context"}, nil, `no binary of`},
		{"no encoder", same, []string{"action_context", "action_step_ctx", "prefill_0", "prefill_1"}, nil, `"vae_encoder"`},
		{"a prefill gap", same, []string{"action_context", "action_step_ctx", "vae_encoder", "prefill_1"}, nil, "prefill_0"},
		{"over the ceiling", same, allGraphs, []string{big}, "one process can map; set \"htp.world_model\" to \"other_process\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := layoutParams(fk, tc.world, paths, tc.names...)
			h.ContextPaths = append(h.ContextPaths, tc.extra...)
			_, err := PlanHTP(h)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
			if _, err := OpenHTPSet(t.Context(), h, nil); err == nil {
				t.Error("OpenHTPSet accepted the set")
			}
		})
	}
	// other_process with the split bundle alone is a layout.
	l, err := PlanHTP(layoutParams(fk, other, paths, "action_context", "action_step_ctx"))
	if err != nil || !l.Split || l.WorldModel != nil {
		t.Errorf("split bundle alone: %+v, %v", l, err)
	}
	if n := fk.LiveHandles(); n != 0 {
		t.Errorf("%d live handles after refused sets", n)
	}
}
