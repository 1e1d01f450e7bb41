package prefill

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/x448/float16"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/htp"
	"github.com/fastwam/actionexpert/internal/qnnfake"
)

// The same-process layout on the double: a world model of two ranges of
// two layers, Sv 4, A 16 (one F16 layer is 128 bytes, so every range starts
// on a 64-byte boundary of the expert's video_keys), and the monolithic
// action_step over its four layers.
var (
	zcWorld = qnnfake.WorldDims{ImageHeight: 4, ImageWidth: 6, LatentChannels: 2, LatentHeight: 2, LatentWidth: 3,
		ContextRows: 5, TextDim: 7, VideoTokens: 4, Width: 16, Layers: []int{2, 2}}
	zcDims = expert.Dims{Layers: 4, Heads: 2, HeadDim: 8, VideoTokens: 4, ContextTokens: 5, TextDim: 6, ActionTokens: 3, ActionDim: 2}
)

// zcSet is the expert's backend with the world model's chain attached to
// its session.
type zcSet struct {
	b     *htp.Backend
	c     *Chain
	world []qnnfake.Graph
	step  qnnfake.Graph
	d     expert.Dims
	log   []string
}

// openZC writes the binaries (world graphs of data type worldDT, the
// expert's of expertDT) and opens the set with shared buffers; bind asks
// for the K/V to be written in place (BindKV).
func openZC(t testing.TB, fk *qnnfake.Lib, w qnnfake.WorldDims, d expert.Dims, worldDT, expertDT uint32, bind bool) *zcSet {
	t.Helper()
	z := &zcSet{world: qnnfake.WorldModelGraphs(worldDT, w), step: qnnfake.ActionStepGraph(expertDT, d), d: d}
	dir := t.TempDir()
	var paths, names []string
	for _, g := range append([]qnnfake.Graph{z.step}, z.world...) {
		p := filepath.Join(dir, g.Name+".bin")
		if err := os.WriteFile(p, qnnfake.Binary{SocModel: 77, Arch: 73, Graphs: []qnnfake.Graph{g}}.Marshal(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
		names = append(names, g.Name)
	}
	b, err := htp.New(t.Context(), htp.Options{ContextPaths: paths, CoGraphs: names[1:], HeadDim: d.HeadDim, SharedBuffers: true,
		BackendLib: fk.Path, SystemLib: fk.Path, RPCMemLib: fk.Path})
	if err != nil {
		t.Fatal(err)
	}
	z.b = b
	t.Cleanup(func() { z.close(t) })
	if !b.SharedBuffers() {
		t.Fatal("the expert's inputs are not in shared buffers")
	}
	if z.c, err = Attach(b.Session(), true); err != nil {
		t.Fatal(err)
	}
	if bind {
		logf := func(format string, args ...any) { z.log = append(z.log, fmt.Sprintf(format, args...)) }
		if _, err := z.c.BindKV(b.KVGraph(), htp.NameVideoKeys, htp.NameVideoValues, logf); err != nil {
			t.Fatal(err)
		}
	}
	return z
}

func (z *zcSet) close(t testing.TB) {
	if z.c != nil {
		if err := z.c.Close(); err != nil {
			t.Error(err)
		}
		z.c = nil
	}
	if z.b != nil {
		if err := z.b.Close(); err != nil {
			t.Error(err)
		}
		z.b = nil
	}
}

// zcCycle is what one chunk drew and gave the expert, and what it got.
type zcCycle struct {
	image, text             []float32 // the world model's inputs
	keys, values, cond, lat []float32 // the expert's inputs (as float32)
	mask                    []float32 // the context mask as the graph reads it
	preds                   [][]float32
}

// cycle runs one chunk the way the node does with an InputBinder: the
// expert's input views, the world model's K/V written into them, the
// context, BindInputs, then steps.
func (z *zcSet) cycle(t *testing.T, r *rand.Rand, steps int) zcCycle {
	t.Helper()
	ctx := t.Context()
	v, err := z.b.Inputs()
	if err != nil {
		t.Fatal(err)
	}
	image, text := fill(r, z.c.ImageLen()), fill(r, z.c.ContextLen())
	if err := z.c.RunKV(ctx, image, text, v.VideoKeys, v.VideoValues); err != nil {
		t.Fatal(err)
	}
	cond := fill(r, z.d.ContextLen())
	out := zcCycle{image: image, text: text, cond: cond}
	switch {
	case v.Context.F16 != nil && len(v.Context.F16) == len(cond):
		for i, x := range cond {
			v.Context.F16[i] = float16.Fromfloat32(x).Bits()
			cond[i] = float16.Frombits(v.Context.F16[i]).Float32()
		}
		out.keys, out.values = f16s(v.VideoKeys.F16), f16s(v.VideoValues.F16)
	case v.Context.F32 != nil && len(v.Context.F32) == len(cond):
		copy(v.Context.F32, cond)
		out.keys, out.values = slices.Clone(v.VideoKeys.F32), slices.Clone(v.VideoValues.F32)
	default:
		t.Fatalf("context view of %d F16 or %d F32 values, want %d", len(v.Context.F16), len(v.Context.F32), len(cond))
	}
	mask := make([]bool, z.d.ContextTokens)
	out.mask = make([]float32, len(mask))
	for i := range mask {
		mask[i] = i != 2
		if mask[i] {
			out.mask[i] = 1
		}
	}
	if err := z.b.BindInputs(ctx, mask, 0); err != nil {
		t.Fatal(err)
	}
	out.lat = fill(r, z.d.ActionTokens*z.d.ActionDim)
	for s := range steps {
		pred := make([]float32, len(out.lat))
		if err := z.b.Step(ctx, out.lat, float32(s+1)/float32(steps), pred); err != nil {
			t.Fatal(err)
		}
		out.preds = append(out.preds, pred)
	}
	return out
}

func f16s(x []uint16) []float32 {
	y := make([]float32, len(x))
	for i, h := range x {
		y[i] = float16.Frombits(h).Float32()
	}
	return y
}

// TestKVInPlaceEndToEnd runs the world model and the expert in one
// session on the double, first with today's host copy, then with the K/V
// bound (BindKV): the chain's K/V are the double's arithmetic, the
// expert's predictions are bit for bit the copy path's, and on the bound
// path the record shows each range writing at its layers of the expert's
// video_keys and video_values (CUSTOM registrations at offsets 0 and 256
// of the expert's fds) with nothing read back on the host. With world
// graphs of another data type than the expert's inputs, BindKV falls back
// to the copy and says why.
func TestKVInPlaceEndToEnd(t *testing.T) {
	const chunks, steps = 2, 2
	run := func(t *testing.T, fk *qnnfake.Lib, worldDT uint32, bind bool) (*zcSet, [][]float32) {
		z := openZC(t, fk, zcWorld, zcDims, worldDT, qnnfake.DataTypeFloat16, bind)
		r := rand.New(rand.NewPCG(7, 8))
		var all [][]float32
		for c := range chunks {
			cy := z.cycle(t, r, steps)
			// The expert saw the double's world model, rounded to F16.
			wk, wv := qnnfake.WorldModelExpected(z.world, cy.image, cy.text)
			if !slices.Equal(cy.keys, roundF16(wk)) || !slices.Equal(cy.values, roundF16(wv)) {
				t.Fatalf("chunk %d: the expert's video_keys/values are not the chain's", c)
			}
			for s, p := range cy.preds {
				if want := zcStepExpected(z.step, cy, s, steps); !slices.Equal(p, want) {
					t.Fatalf("chunk %d step %d: prediction %v, want %v", c, s, p, want)
				}
			}
			all = append(all, cy.preds...)
		}
		return z, all
	}

	t.Run("f16 bound", func(t *testing.T) {
		fk := qnnfake.New(t, qnnfake.Variant{})
		// The chain's own links (latent, ctx_v, hidden) are in shared
		// buffers on both paths; only the K/V differ.
		links := fk.MemHandleBytesWritten()
		zc, copied := run(t, fk, qnnfake.DataTypeFloat16, false)
		links = fk.MemHandleBytesWritten() - links
		copyRead := rangeBytesRead(zc)
		zc.close(t)
		if copyRead == 0 {
			t.Fatal("the copy path read nothing back from the ranges")
		}
		ex0, mem0, wr0 := len(fk.ExecuteRecords()), len(fk.MemRecords()), fk.MemHandleBytesWritten()
		zb, bound := run(t, fk, qnnfake.DataTypeFloat16, true)
		if len(zb.log) != 1 || !strings.Contains(zb.log[0], "written in place") {
			t.Errorf("log %q, want one line saying the K/V are written in place", zb.log)
		}
		if len(bound) != len(copied) {
			t.Fatalf("%d predictions bound, %d copied", len(bound), len(copied))
		}
		for i := range bound {
			if !slices.Equal(bound[i], copied[i]) {
				t.Fatalf("prediction %d: bound %v, copied %v", i, bound[i], copied[i])
			}
		}
		if n := rangeBytesRead(zb); n != 0 {
			t.Errorf("the bound path read %d bytes of K/V back on the host, want 0", n)
		}
		kvBytes := uint64(2 * zcDims.KVLen() * 2)
		if n := fk.MemHandleBytesWritten() - wr0 - links; n != chunks*kvBytes {
			t.Errorf("%d bytes more written through registered memory than on the copy path, want %d (the K/V of %d chunks)", n, chunks*kvBytes, chunks)
		}
		// Per chunk: vae_encoder, prefill_0, prefill_1, then the steps.
		ex := fk.ExecuteRecords()[ex0:]
		if len(ex) != chunks*(3+steps) {
			t.Fatalf("%d executes, want %d", len(ex), chunks*(3+steps))
		}
		const layer = 4 * 16 * 2
		for c := range chunks {
			e := ex[c*(3+steps):]
			kAt, vAt := e[3].Inputs[2], e[3].Inputs[3] // action_step's video_keys, video_values
			for i, p := range e[1:3] {
				g := zb.world[1+i]
				ko, vo := outIndex(g, NameVideoKeys), outIndex(g, NameVideoValues)
				off := uintptr(2 * i * layer)
				if p.Graph != g.Name || p.Outputs[ko] != kAt+off || p.Outputs[vo] != vAt+off {
					t.Errorf("chunk %d: %s wrote keys at %#x, values at %#x; want the expert's %#x + %d and %#x + %d",
						c, p.Graph, p.Outputs[ko], p.Outputs[vo], kAt, off, vAt, off)
				}
			}
		}
		var custom []qnnfake.MemRecord
		for _, r := range fk.MemRecords()[mem0:] {
			if r.MemType == 2 {
				custom = append(custom, r)
			}
		}
		if len(custom) != 4 {
			t.Fatalf("%d CUSTOM registrations, want 4 (keys and values of two ranges)", len(custom))
		}
		for i, r := range custom {
			if want := uint64(i/2) * 2 * layer; r.Offset != want || r.Size != 2*layer || !r.Live {
				t.Errorf("CUSTOM registration %d: %+v, want offset %d, size %d", i, r, want, 2*layer)
			}
		}
		// After the expert's Reload (a DSP restart) the chain follows its
		// new session and binds again.
		if err := zb.b.Reload(t.Context()); err != nil {
			t.Fatal(err)
		}
		if err := zb.c.Reattach(zb.b.Session()); err != nil {
			t.Fatal(err)
		}
		cy := zb.cycle(t, rand.New(rand.NewPCG(9, 9)), 1)
		wk, _ := qnnfake.WorldModelExpected(zb.world, cy.image, cy.text)
		if !slices.Equal(cy.keys, roundF16(wk)) || !slices.Equal(cy.preds[0], zcStepExpected(zb.step, cy, 0, 1)) {
			t.Error("after Reload and Reattach: the expert's K/V or prediction differ from the double's arithmetic")
		}
		if n := rangeBytesRead(zb); n != 0 || len(zb.log) != 2 || !strings.Contains(zb.log[1], "written in place") {
			t.Errorf("after Reattach: %d bytes read back, log %q; want 0 and a second in-place line", n, zb.log)
		}
		zb.close(t)
		if n := fk.LiveHandles(); n != 0 || fk.DoubleFrees() != 0 {
			t.Errorf("%d live handles, %d double frees after Close", n, fk.DoubleFrees())
		}
	})

	// F32 layers of 96 bytes: ranges of 2, 3 and 1 layers start at bytes
	// 0, 192 and 480, so the last range is not on a 64-byte boundary and
	// keeps the copy while the others are bound.
	t.Run("f32 partly bound", func(t *testing.T) {
		fk := qnnfake.New(t, qnnfake.Variant{})
		w := zcWorld
		w.VideoTokens, w.Width, w.Layers = 3, 8, []int{2, 3, 1}
		d := expert.Dims{Layers: 6, Heads: 1, HeadDim: 8, VideoTokens: 3, ContextTokens: 5, TextDim: 6, ActionTokens: 3, ActionDim: 2}
		z := openZC(t, fk, w, d, qnnfake.DataTypeFloat32, qnnfake.DataTypeFloat32, true)
		if len(z.log) != 1 || !strings.Contains(z.log[0], "4 of 6 outputs written in place") || !strings.Contains(z.log[0], "64-byte boundary") {
			t.Errorf("log %q, want one line: 4 of 6 bound, the others not on a 64-byte boundary", z.log)
		}
		r := rand.New(rand.NewPCG(5, 6))
		for c := range chunks {
			cy := z.cycle(t, r, steps)
			wk, wv := qnnfake.WorldModelExpected(z.world, cy.image, cy.text)
			if !slices.Equal(cy.keys, wk) || !slices.Equal(cy.values, wv) {
				t.Fatalf("chunk %d: the expert's video_keys/values are not the chain's", c)
			}
			for s, p := range cy.preds {
				if want := zcStepExpected(z.step, cy, s, steps); !slices.Equal(p, want) {
					t.Fatalf("chunk %d step %d: prediction %v, want %v", c, s, p, want)
				}
			}
		}
		// Only the last range's keys and values (one layer each) were
		// read back on the host.
		if n, want := rangeBytesRead(z), uint64(chunks*2*3*8*4); n != want {
			t.Errorf("%d bytes read back on the host, want %d (the unbound range's)", n, want)
		}
	})

	t.Run("f32 world, f16 expert: copy", func(t *testing.T) {
		fk := qnnfake.New(t, qnnfake.Variant{})
		mem0 := len(fk.MemRecords())
		z, _ := run(t, fk, qnnfake.DataTypeFloat32, true)
		if len(z.log) != 1 || !strings.Contains(z.log[0], "copied on the host") || !strings.Contains(z.log[0], "FLOAT_16") {
			t.Errorf("log %q, want one line saying the K/V are copied because of the data type", z.log)
		}
		for _, r := range fk.MemRecords()[mem0:] {
			if r.MemType == 2 {
				t.Errorf("a CUSTOM registration %+v on the copy fallback", r)
			}
		}
	})
}

// zcStepExpected is the double's action_step on what cycle gave the
// expert, for step s.
func zcStepExpected(g qnnfake.Graph, cy zcCycle, s, steps int) []float32 {
	by := map[string][]float32{htp.NameLatents: cy.lat, htp.NameTimestep: {float32(s+1) / float32(steps)},
		htp.NameVideoKeys: cy.keys, htp.NameVideoValues: cy.values, htp.NameContext: cy.cond, htp.NameContextMask: cy.mask}
	in := make([][]float32, len(g.Inputs))
	for m, t := range g.Inputs {
		in[m] = by[t.Name]
	}
	return qnnfake.Expected(g, in)[0]
}

func outIndex(g qnnfake.Graph, name string) int {
	return slices.IndexFunc(g.Outputs, func(t qnnfake.Tensor) bool { return t.Name == name })
}

// rangeBytesRead is what the host read back from the prefill ranges'
// outputs (ReadOutput, ReadOutputBytes).
func rangeBytesRead(z *zcSet) uint64 {
	var n uint64
	for _, g := range z.c.ranges {
		n += g.Stats().BytesRead
	}
	return n
}

// roundF16 rounds every value to float16 and back.
func roundF16(x []float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float16.Fromfloat32(v).Float32()
	}
	return y
}
