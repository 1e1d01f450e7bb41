package prefill

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/qnnfake"
)

// Small sizes, every one distinct: image [1,3,4,6], latent [1,2,2,3],
// context [1,5,7], ctx_v [1,5,8], Sv 3, A 8, ranges of 2, 3 and 1 layers.
const (
	tSv, tA, tL, tT = 3, 8, 5, 7
)

var tLayers = []uint32{2, 3, 1}

func worldGraphs(dt uint32) []qnnfake.Graph {
	id := uint32(100)
	f := func(name string, dims ...uint32) qnnfake.Tensor {
		id++
		return qnnfake.Tensor{ID: id, Name: name, DataType: dt, Dims: dims}
	}
	gs := []qnnfake.Graph{{Name: EncoderGraph, SpillFill: 1 << 20,
		Inputs: []qnnfake.Tensor{f(NameImage, 1, 3, 4, 6)}, Outputs: []qnnfake.Tensor{f(NameLatent, 1, 2, 2, 3)}}}
	for i, n := range tLayers {
		g := qnnfake.Graph{Name: PrefillPrefix + string(rune('0'+i)), SpillFill: uint64(i+2) << 20}
		if i == 0 {
			g.Inputs = []qnnfake.Tensor{f(NameContext, 1, tL, tT), f(NameLatent, 1, 2, 2, 3)}
			g.Outputs = []qnnfake.Tensor{f(NameVideoKeys, n, 1, tSv, tA), f(NameCtxV, 1, tL, tA)}
		} else {
			g.Inputs = []qnnfake.Tensor{f(NameCtxV, 1, tL, tA), f(NameHidden, 1, tSv, tA)}
			g.Outputs = []qnnfake.Tensor{f(NameVideoKeys, n, 1, tSv, tA)}
		}
		g.Outputs = append(g.Outputs, f(NameVideoValues, n, 1, tSv, tA))
		if i < len(tLayers)-1 {
			g.Outputs = append(g.Outputs, f(NameHiddenOut, 1, tSv, tA))
		}
		gs = append(gs, g)
	}
	return gs
}

func writeAll(t *testing.T, gs []qnnfake.Graph) []string {
	t.Helper()
	var paths []string
	dir := t.TempDir()
	for _, g := range gs {
		p := filepath.Join(dir, g.Name+".bin")
		b := qnnfake.Binary{SocModel: 69, Arch: 79, BuildID: "fake", Graphs: []qnnfake.Graph{g}}
		if err := os.WriteFile(p, b.Marshal(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

func fill(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.Float64()*2 - 1)
	}
	return x
}

// expectedKV composes the double's arithmetic along the chain in Go.
func expectedKV(gs []qnnfake.Graph, image, text []float32) (keys, values []float32) {
	by := func(g qnnfake.Graph, vals map[string][]float32) map[string][]float32 {
		in := make([][]float32, len(g.Inputs))
		for m, t := range g.Inputs {
			in[m] = vals[t.Name]
		}
		out := qnnfake.Expected(g, in)
		res := map[string][]float32{}
		for j, t := range g.Outputs {
			res[t.Name] = out[j]
		}
		return res
	}
	enc := by(gs[0], map[string][]float32{NameImage: image})
	p0 := by(gs[1], map[string][]float32{NameLatent: enc[NameLatent], NameContext: text})
	keys, values = slices.Clone(p0[NameVideoKeys]), slices.Clone(p0[NameVideoValues])
	hidden := p0[NameHiddenOut]
	for _, g := range gs[2:] {
		o := by(g, map[string][]float32{NameHidden: hidden, NameCtxV: p0[NameCtxV]})
		keys, values = append(keys, o[NameVideoKeys]...), append(values, o[NameVideoValues]...)
		hidden = o[NameHiddenOut]
	}
	return keys, values
}

func TestPrefillChain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		dt     uint32
		shared bool
	}{{"f32 RAW links", qnnfake.DataTypeFloat32, false}, {"f16 shared links", qnnfake.DataTypeFloat16, true}} {
		t.Run(tc.name, func(t *testing.T) {
			fk := qnnfake.New(t, qnnfake.Variant{})
			gs := worldGraphs(tc.dt)
			paths := writeAll(t, gs)
			slices.Reverse(paths) // order of the paths does not matter
			c, err := New(t.Context(), Options{ContextPaths: paths, BackendLib: fk.Path, SystemLib: fk.Path, RPCMemLib: fk.Path, SharedBuffers: tc.shared})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Layers(), []int{2, 3, 1}) || c.KVLen() != 6*tSv*tA {
				t.Fatalf("layers %v, KVLen %d", c.Layers(), c.KVLen())
			}
			r := rand.New(rand.NewPCG(1, 2))
			image, text := fill(r, 3*4*6), fill(r, tL*tT)
			keys, values := make([]float32, c.KVLen()), make([]float32, c.KVLen())
			for range 2 { // twice: the chain is resident
				if err := c.Run(t.Context(), image, text, keys, values); err != nil {
					t.Fatal(err)
				}
			}
			wk, wv := expectedKV(gs, image, text)
			if !slices.Equal(keys, wk) || !slices.Equal(values, wv) {
				t.Errorf("keys/values differ from the double's arithmetic composed in Go")
			}
			// Group registration: prefill_2 (4 MiB) starts the group.
			recs := fk.ContextRecords()
			if len(recs) != 4 || recs[0].BinarySpillFill != 4<<20 || recs[0].FirstSeq != 0 {
				t.Fatalf("context records %+v", recs)
			}
			for _, rc := range recs {
				if !rc.Group || rc.MaxSpillFill != 4<<20 || (rc.Seq > 1 && rc.FirstSeq != 1) {
					t.Errorf("context record %+v", rc)
				}
			}
			// The record: per run, encoder then the ranges, each reading
			// the previous graph's output memory.
			ex := fk.ExecuteRecords()
			if len(ex) != 8 {
				t.Fatalf("%d executes, want 8", len(ex))
			}
			addr := func(e qnnfake.ExecuteRecord, g qnnfake.Graph, name string, out bool) uintptr {
				ts, as := g.Inputs, e.Inputs
				if out {
					ts, as = g.Outputs, e.Outputs
				}
				return as[slices.IndexFunc(ts, func(x qnnfake.Tensor) bool { return x.Name == name })]
			}
			for k, e := range ex[:4] {
				if e.Graph != gs[k].Name {
					t.Fatalf("execute %d is %q, want %q", k, e.Graph, gs[k].Name)
				}
			}
			checks := []struct {
				from, to        int
				outName, inName string
			}{
				{0, 1, NameLatent, NameLatent}, {1, 2, NameHiddenOut, NameHidden}, {2, 3, NameHiddenOut, NameHidden},
				{1, 2, NameCtxV, NameCtxV}, {1, 3, NameCtxV, NameCtxV},
			}
			for _, ck := range checks {
				if a, b := addr(ex[ck.from], gs[ck.from], ck.outName, true), addr(ex[ck.to], gs[ck.to], ck.inName, false); a != b {
					t.Errorf("%s.%s at %#x, %s.%s read at %#x", gs[ck.from].Name, ck.outName, a, gs[ck.to].Name, ck.inName, b)
				}
			}
			if err := c.Run(t.Context(), image[1:], text, keys, values); err == nil || !strings.Contains(err.Error(), "image has") {
				t.Errorf("short image: %v", err)
			}
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
			if n := fk.LiveHandles(); n != 0 {
				t.Errorf("%d live handles after Close", n)
			}
			if n := fk.DoubleFrees(); n != 0 {
				t.Errorf("%d double frees", n)
			}
		})
	}
}

func TestPrefillContractRefusals(t *testing.T) {
	fk := qnnfake.New(t, qnnfake.Variant{})
	o := func(gs []qnnfake.Graph) Options {
		return Options{ContextPaths: writeAll(t, gs), BackendLib: fk.Path, SystemLib: fk.Path, RPCMemLib: fk.Path}
	}
	gs := worldGraphs(qnnfake.DataTypeFloat32)
	bad := slices.Clone(gs)
	bad[2].Outputs = bad[2].Outputs[:2] // prefill_1 without hidden_out
	if _, err := New(t.Context(), o(bad)); err == nil || !strings.Contains(err.Error(), NameHiddenOut) {
		t.Errorf("missing hidden_out: %v", err)
	}
	if _, err := New(t.Context(), o(gs[1:])); err == nil || !strings.Contains(err.Error(), EncoderGraph) {
		t.Errorf("no encoder: %v", err)
	}
	if n := fk.LiveHandles(); n != 0 {
		t.Errorf("%d live handles after refused loads", n)
	}
}

// TestRunKV checks RunKV into F32 and F16 views on F32 and F16 graphs:
// every value is the double's arithmetic (rounded to F16 for an F16
// view; from F16 graphs the bytes are copied as they are), and a view of
// mixed or wrong sizes is refused.
func TestRunKV(t *testing.T) {
	for _, dt := range []uint32{qnnfake.DataTypeFloat32, qnnfake.DataTypeFloat16} {
		fk := qnnfake.New(t, qnnfake.Variant{})
		gs := worldGraphs(dt)
		c, err := New(t.Context(), Options{ContextPaths: writeAll(t, gs), BackendLib: fk.Path, SystemLib: fk.Path, RPCMemLib: fk.Path})
		if err != nil {
			t.Fatal(err)
		}
		if c.f16 != (dt == qnnfake.DataTypeFloat16) {
			t.Errorf("data type %#x: f16 %v", dt, c.f16)
		}
		// qnnrt.Graph.ReadOutputBytes refuses a graph not yet run and a
		// buffer of another size.
		g0 := c.ranges[0]
		size := g0.Outputs()[c.keysIdx[0]].Bytes()
		if _, err := g0.ReadOutputBytes(c.keysIdx[0], make([]byte, size)); err == nil || !strings.Contains(err.Error(), "holds no result") {
			t.Errorf("ReadOutputBytes before a run: %v", err)
		}
		r := rand.New(rand.NewPCG(9, uint64(dt)))
		image, text := fill(r, c.ImageLen()), fill(r, c.ContextLen())
		wk, wv := expectedKV(gs, image, text)
		n := c.KVLen()
		k32, v32 := expert.TensorView{F32: make([]float32, n)}, expert.TensorView{F32: make([]float32, n)}
		if err := c.RunKV(t.Context(), image, text, k32, v32); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(k32.F32, wk) || !slices.Equal(v32.F32, wv) {
			t.Errorf("data type %#x: F32 view differs from the double's arithmetic", dt)
		}
		k16, v16 := expert.TensorView{F16: make([]uint16, n)}, expert.TensorView{F16: make([]uint16, n)}
		if err := c.RunKV(t.Context(), image, text, k16, v16); err != nil {
			t.Fatal(err)
		}
		for i := range wk {
			if k16.F16[i] != float16.Fromfloat32(wk[i]).Bits() || v16.F16[i] != float16.Fromfloat32(wv[i]).Bits() {
				t.Fatalf("data type %#x: F16 view value %d differs from the double's arithmetic", dt, i)
			}
		}
		if _, err := g0.ReadOutputBytes(c.keysIdx[0], make([]byte, size-1)); err == nil || !strings.Contains(err.Error(), "bytes, want") {
			t.Errorf("ReadOutputBytes into a short buffer: %v", err)
		}
		if err := c.RunKV(t.Context(), image, text, k32, v16); err == nil {
			t.Error("mixed F32 and F16 views accepted")
		}
		if err := c.RunKV(t.Context(), image, text, expert.TensorView{F16: make([]uint16, n-1)}, v16); err == nil {
			t.Error("short F16 keys accepted")
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
