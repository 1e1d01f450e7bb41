package htp

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/qnnfake"
)

// splitBundle writes the split graphs for d: in two binaries (the step one
// with the larger spill-fill size, so it starts the group), or both in one.
func splitBundle(t testing.TB, dt uint32, d expert.Dims, oneBinary bool) (qnnfake.Graph, qnnfake.Graph, []string) {
	t.Helper()
	cg, sg := qnnfake.ActionContextGraph(dt, d), qnnfake.ActionStepCtxGraph(dt, d)
	cg.SpillFill, sg.SpillFill = 1<<20, 5<<20
	dir := t.TempDir()
	write := func(name string, gs ...qnnfake.Graph) string {
		p := filepath.Join(dir, name)
		b := qnnfake.Binary{SocModel: 69, Arch: 79, BuildID: "fake", Graphs: gs}
		if err := os.WriteFile(p, b.Marshal(), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if oneBinary {
		return cg, sg, []string{write("action.bin", cg, sg)}
	}
	return cg, sg, []string{write("action_context.bin", cg), write("action_step_ctx.bin", sg)}
}

// splitExpected is the double's arithmetic for one split step: the cross
// keys and values from action_context, then action_step_ctx.
func splitExpected(cg, sg qnnfake.Graph, c *expert.Chunk, latents []float32, tau float32) []float32 {
	cross := qnnfake.Expected(cg, [][]float32{c.Context})
	mask := make([]float32, len(c.ContextMask))
	for i, m := range c.ContextMask {
		if m {
			mask[i] = 1
		}
	}
	byName := map[string][]float32{
		NameLatents: latents, NameTimestep: {tau}, NameVideoKeys: c.VideoKeys, NameVideoValues: c.VideoValues,
		NameCrossKeys: cross[0], NameCrossValues: cross[1], NameContextMask: mask,
	}
	in := make([][]float32, len(sg.Inputs))
	for m, t := range sg.Inputs {
		in[m] = byName[t.Name]
	}
	return qnnfake.Expected(sg, in)[0]
}

// TestSplitBackend runs two chunks of denoising on the split bundle and
// checks, in the double's record, one action_context execute per chunk and
// one action_step_ctx execute per step reading action_context's output
// memory, the spill-fill group of the two contexts, and every prediction
// against the double's arithmetic.
func TestSplitBackend(t *testing.T) {
	d := smallDims()
	for _, tc := range []struct {
		name   string
		dt     uint32
		one    bool
		shared bool
	}{
		{"two binaries f32", qnnfake.DataTypeFloat32, false, false},
		{"two binaries f16 shared", qnnfake.DataTypeFloat16, false, true},
		{"one binary f32", qnnfake.DataTypeFloat32, true, false},
		{"one binary f16 shared", qnnfake.DataTypeFloat16, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fk := qnnfake.New(t, qnnfake.Variant{})
			cg, sg, paths := splitBundle(t, tc.dt, d, tc.one)
			o := options(fk, paths[0])
			o.ContextPaths = paths[1:]
			o.Dims = &d
			o.SharedBuffers = tc.shared
			b := newBackend(t, o)
			if !b.Split() || b.Dims() != d {
				t.Fatalf("Split %v, Dims %+v", b.Split(), b.Dims())
			}
			if b.SharedBuffers() != tc.shared {
				t.Errorf("SharedBuffers %v", b.SharedBuffers())
			}
			const steps = 4
			sched, err := expert.NewSchedule(steps, expert.DefaultShift)
			if err != nil {
				t.Fatal(err)
			}
			for chunk := range 2 {
				c := randomChunk(d, uint64(10+chunk))
				x0 := expert.Noise(uint64(3+chunk), d.LatentLen())
				x := slices.Clone(x0)
				_, err = expert.Denoise(t.Context(), b, c, sched, x0, func(si expert.StepInfo) {
					if want := splitExpected(cg, sg, c, x, si.Timestep); !slices.Equal(si.Pred, want) {
						t.Errorf("chunk %d step %d: pred %v, want %v", chunk, si.Index, si.Pred[:3], want[:3])
					}
					copy(x, si.Latents)
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			ex := fk.ExecuteRecords()
			var names []string
			for _, e := range ex {
				names = append(names, e.Graph)
			}
			want := []string{}
			for range 2 {
				want = append(want, qnnfake.ActionContextName)
				for range steps {
					want = append(want, qnnfake.ActionStepCtxName)
				}
			}
			if !slices.Equal(names, want) {
				t.Fatalf("executes %q, want %q", names, want)
			}
			ck, cv := slices.IndexFunc(sg.Inputs, func(x qnnfake.Tensor) bool { return x.Name == NameCrossKeys }),
				slices.IndexFunc(sg.Inputs, func(x qnnfake.Tensor) bool { return x.Name == NameCrossValues })
			for _, e := range ex[1:] {
				if e.Graph == qnnfake.ActionStepCtxName && (e.Inputs[ck] != ex[0].Outputs[0] || e.Inputs[cv] != ex[0].Outputs[1]) {
					t.Errorf("step read cross keys/values at %#x/%#x; action_context wrote %#x/%#x",
						e.Inputs[ck], e.Inputs[cv], ex[0].Outputs[0], ex[0].Outputs[1])
				}
			}
			recs := fk.ContextRecords()
			if tc.one {
				if len(recs) != 1 || recs[0].Group {
					t.Errorf("one binary: context records %+v, want one without a group", recs)
				}
			} else {
				wantRecs := []qnnfake.ContextRecord{
					{Seq: 1, Group: true, FirstSeq: 0, MaxSpillFill: 5 << 20, BinarySpillFill: 5 << 20, GroupSpillFill: 5 << 20},
					{Seq: 2, Group: true, FirstSeq: 1, MaxSpillFill: 5 << 20, BinarySpillFill: 1 << 20, GroupSpillFill: 5 << 20},
				}
				if !slices.Equal(recs, wantRecs) {
					t.Errorf("context records %+v, want %+v", recs, wantRecs)
				}
			}
			if tc.shared && !slices.Contains(b.Stats().Shared, NameCrossKeys) {
				t.Errorf("step graph shares %q, want the cross keys among them", b.Stats().Shared)
			}
			if st := b.ContextStats(); st.Executes != 2 {
				t.Errorf("action_context executes %d, want 2", st.Executes)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			checkClean(t, fk)
		})
	}
}

// TestSplitInputsAndReload covers the zero-copy input path (Inputs and
// BindInputs run action_context once) and Reload (which rebinds the chunk
// and so runs action_context again).
func TestSplitInputsAndReload(t *testing.T) {
	d := smallDims()
	fk := qnnfake.New(t, qnnfake.Variant{})
	cg, sg, paths := splitBundle(t, qnnfake.DataTypeFloat32, d, false)
	o := options(fk, "")
	o.ContextPaths = paths
	b := newBackend(t, o)
	c := randomChunk(d, 7)
	v, err := b.Inputs()
	if err != nil {
		t.Fatal(err)
	}
	copy(v.VideoKeys.F32, c.VideoKeys)
	copy(v.VideoValues.F32, c.VideoValues)
	copy(v.Context.F32, c.Context)
	if err := b.BindInputs(t.Context(), c.ContextMask, 0); err != nil {
		t.Fatal(err)
	}
	lat := expert.Noise(5, d.LatentLen())
	pred := make([]float32, d.LatentLen())
	if err := b.Step(t.Context(), lat, 700, pred); err != nil {
		t.Fatal(err)
	}
	if want := splitExpected(cg, sg, c, lat, 700); !slices.Equal(pred, want) {
		t.Errorf("pred after BindInputs %v, want %v", pred[:3], want[:3])
	}
	if err := b.BindChunk(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Step(t.Context(), lat, 300, pred); err != nil {
		t.Fatal(err)
	}
	if want := splitExpected(cg, sg, c, lat, 300); !slices.Equal(pred, want) {
		t.Errorf("pred after Reload %v, want %v", pred[:3], want[:3])
	}
	n := 0
	for _, e := range fk.ExecuteRecords() {
		if e.Graph == qnnfake.ActionContextName {
			n++
		}
	}
	if n != 3 {
		t.Errorf("%d action_context executes, want 3 (BindInputs, BindChunk, Reload)", n)
	}
}

// TestSplitContractRefusals: cross keys of the wrong length and a step
// graph without the split pair's partner are refused at load.
func TestSplitContractRefusals(t *testing.T) {
	d := smallDims()
	fk := qnnfake.New(t, qnnfake.Variant{})
	cg, sg := qnnfake.ActionContextGraph(qnnfake.DataTypeFloat32, d), qnnfake.ActionStepCtxGraph(qnnfake.DataTypeFloat32, d)
	cg.Outputs[0].Dims = []uint32{uint32(d.Layers), 1, uint32(d.ContextTokens) + 1, uint32(d.AttnWidth())}
	if _, err := New(t.Context(), options(fk, writeBinary(t, cg, sg))); err == nil {
		t.Error("cross keys of the wrong shape accepted")
	}
	if _, err := New(t.Context(), options(fk, writeBinary(t, sg))); err == nil {
		t.Error("action_step_ctx without action_context accepted")
	}
	checkClean(t, fk)
}
