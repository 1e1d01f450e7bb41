package qnnrt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fastwam/actionexpert/internal/qnnfake"
)

// chainGraphs is a three-graph chain over three binaries, like the
// prefill ranges: stage_0 takes x and emits hidden_out and kv_0; stage_1
// takes hidden and emits hidden_out and kv_1; stage_2 takes hidden and
// emits kv_2. Spill-fill sizes differ so that the group's first context is
// the middle one.
func chainGraphs() []qnnfake.Graph {
	f := func(id uint32, name string, dims ...uint32) qnnfake.Tensor {
		return qnnfake.Tensor{ID: id, Name: name, DataType: qnnfake.DataTypeFloat32, Dims: dims}
	}
	return []qnnfake.Graph{
		{Name: "stage_0", SpillFill: 1 << 20,
			Inputs:  []qnnfake.Tensor{f(3, "x", 1, 5, 3)},
			Outputs: []qnnfake.Tensor{f(40, "kv_0", 2, 4), f(41, "hidden_out", 1, 2, 3)}},
		{Name: "stage_1", SpillFill: 3 << 20,
			Inputs:  []qnnfake.Tensor{f(7, "hidden", 1, 2, 3), f(8, "bias", 4)},
			Outputs: []qnnfake.Tensor{f(50, "hidden_out", 1, 2, 3), f(51, "kv_1", 2, 4)}},
		{Name: "stage_2", SpillFill: 2 << 20,
			Inputs:  []qnnfake.Tensor{f(9, "hidden", 1, 2, 3)},
			Outputs: []qnnfake.Tensor{f(60, "kv_2", 3, 2)}},
	}
}

func writeBinaries(t *testing.T, gs []qnnfake.Graph) []string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for _, g := range gs {
		p := filepath.Join(dir, g.Name+".bin")
		if err := os.WriteFile(p, actionBinary(g).Marshal(), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

func TestMultiContextGroupAndChain(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l := openFake(t, fk)
	gs := chainGraphs()
	paths := writeBinaries(t, gs)
	s, err := l.NewSession(context.Background(), SessionOptions{ContextPaths: paths})
	if err != nil {
		t.Fatal(err)
	}
	grp := s.SpillFillGroup()
	if !grp.Registered || grp.MaxSpillFill != 3<<20 || !slices.Equal(grp.Order, []string{paths[1], paths[0], paths[2]}) {
		t.Fatalf("group %+v; want registered, max %d, the 3 MiB binary first", grp, 3<<20)
	}
	// The double's record: stage_1's context starts the group (NULL
	// firstGroupHandle), the others name it; all carry the maximum.
	recs := fk.ContextRecords()
	want := []qnnfake.ContextRecord{
		{Seq: 1, Group: true, FirstSeq: 0, MaxSpillFill: 3 << 20, BinarySpillFill: 3 << 20, GroupSpillFill: 3 << 20},
		{Seq: 2, Group: true, FirstSeq: 1, MaxSpillFill: 3 << 20, BinarySpillFill: 1 << 20, GroupSpillFill: 3 << 20},
		{Seq: 3, Group: true, FirstSeq: 1, MaxSpillFill: 3 << 20, BinarySpillFill: 2 << 20, GroupSpillFill: 3 << 20},
	}
	if !slices.Equal(recs, want) {
		t.Fatalf("context records\n got %+v\nwant %+v", recs, want)
	}
	g0, _ := s.Graph("stage_0")
	g1, _ := s.Graph("stage_1")
	g2, _ := s.Graph("stage_2")
	for _, ln := range []struct {
		src *Graph
		out string
		dst *Graph
		in  string
	}{{g0, "hidden_out", g1, "hidden"}, {g1, "hidden_out", g2, "hidden"}} {
		if err := s.Link(ln.src, ln.out, ln.dst, ln.in); err != nil {
			t.Fatal(err)
		}
	}
	// stage_2 before stage_1 ran: its input holds nothing yet.
	if _, err := g2.Run(context.Background(), [][]float32{nil}, [][]float32{nil}); err == nil || !strings.Contains(err.Error(), "has not executed successfully") {
		t.Fatalf("run of a chained graph before its source: %v", err)
	}
	if err := g1.SetInput(g1.InputIndex("hidden"), make([]float32, 6)); err == nil {
		t.Fatal("SetInput on a linked input succeeded")
	}
	x := randomInputs(gs[0], 1)
	bias := randomInputs(gs[1], 2)[1]
	if err := g0.SetInput(0, x[0]); err != nil {
		t.Fatal(err)
	}
	if err := g1.SetInput(g1.InputIndex("bias"), bias); err != nil {
		t.Fatal(err)
	}
	before := len(fk.ExecuteRecords())
	if _, err := s.RunChain(context.Background(), g0, g1, g2); err != nil {
		t.Fatal(err)
	}
	// Results: the double's arithmetic, chained in Go.
	e0 := qnnfake.Expected(gs[0], x)
	e1 := qnnfake.Expected(gs[1], [][]float32{e0[1], bias})
	e2 := qnnfake.Expected(gs[2], [][]float32{e1[0]})
	for _, c := range []struct {
		g    *Graph
		i    int
		want []float32
	}{{g0, 0, e0[0]}, {g1, 1, e1[1]}, {g2, 0, e2[0]}} {
		got := make([]float32, len(c.want))
		if err := c.g.ReadOutput(c.i, got); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s output %d = %v, want %v", c.g.Name(), c.i, got, c.want)
		}
	}
	// The record: each chained graph read its source's output memory.
	ex := fk.ExecuteRecords()[before:]
	if len(ex) != 3 || ex[0].Graph != "stage_0" || ex[1].Graph != "stage_1" || ex[2].Graph != "stage_2" {
		t.Fatalf("execute records %+v", ex)
	}
	if ex[0].Seq != 2 || ex[1].Seq != 1 || ex[2].Seq != 3 {
		t.Errorf("executes ran in contexts %d %d %d, want 2 1 3", ex[0].Seq, ex[1].Seq, ex[2].Seq)
	}
	if ex[1].Inputs[0] != ex[0].Outputs[1] || ex[2].Inputs[0] != ex[1].Outputs[0] {
		t.Errorf("chained inputs at %#x, %#x; source outputs at %#x, %#x", ex[1].Inputs[0], ex[2].Inputs[0], ex[0].Outputs[1], ex[1].Outputs[0])
	}
	if a, _ := g0.OutputAddress(1); a != ex[0].Outputs[1] {
		t.Errorf("OutputAddress %#x, the double saw %#x", a, ex[0].Outputs[1])
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkClean(t, fk)
	// Released in reverse creation order: the group's first context last.
	for _, r := range fk.ContextRecords() {
		if want := 4 - r.Seq; r.Freed != want {
			t.Errorf("context %d freed %d-th, want %d-th", r.Seq, r.Freed, want)
		}
	}
}

// stepCtx is a context whose Err turns to Canceled after n calls.
type stepCtx struct {
	context.Context
	n atomic.Int32
}

func (c *stepCtx) Err() error {
	if c.n.Add(-1) < 0 {
		return context.Canceled
	}
	return nil
}

func TestRunChainStopsBetweenGraphs(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l := openFake(t, fk)
	gs := chainGraphs()
	s := newSession(t, l, SessionOptions{ContextPaths: writeBinaries(t, gs)})
	g0, _ := s.Graph("stage_0")
	g1, _ := s.Graph("stage_1")
	if err := s.Link(g0, "hidden_out", g1, "hidden"); err != nil {
		t.Fatal(err)
	}
	if err := g0.SetInput(0, randomInputs(gs[0], 1)[0]); err != nil {
		t.Fatal(err)
	}
	if err := g1.SetInput(1, make([]float32, 4)); err != nil {
		t.Fatal(err)
	}
	// RunChain checks once and Run once per graph: the third check, before
	// stage_1, fails.
	ctx := &stepCtx{Context: context.Background()}
	ctx.n.Store(2)
	times, err := s.RunChain(ctx, g0, g1)
	if !errors.Is(err, context.Canceled) || len(times) != 1 {
		t.Fatalf("RunChain = %d timings, %v; want 1 and a cancellation", len(times), err)
	}
	if ex := fk.ExecuteRecords(); len(ex) != 1 || ex[0].Graph != "stage_0" {
		t.Fatalf("executes %+v, want only stage_0", ex)
	}
}

func TestMultiContextFailurePartWayFreesAll(t *testing.T) {
	// The third create fails (two contexts to free), or the third
	// retrieve, in the third context (three to free).
	for fn, made := range map[string]int{"contextCreateFromBinary": 2, "graphRetrieve": 3} {
		t.Run(fn, func(t *testing.T) {
			fk := fakeLib(t, qnnfake.Variant{})
			l := openFake(t, fk)
			fk.FailCall(fn, 1003, 3)
			_, err := l.NewSession(context.Background(), SessionOptions{ContextPaths: writeBinaries(t, chainGraphs())})
			if err == nil {
				t.Fatal("NewSession succeeded with an injected failure")
			}
			if n := fk.Calls("contextFree"); n != made {
				t.Errorf("contextFree called %d times, want %d (the contexts made before the failure)", n, made)
			}
			for _, r := range fk.ContextRecords() {
				if want := made + 1 - r.Seq; r.Freed != want {
					t.Errorf("context %d freed %d-th, want %d-th (reverse creation order)", r.Seq, r.Freed, want)
				}
			}
			checkClean(t, fk)
		})
	}
}

func TestMultiContextRefusals(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l := openFake(t, fk)
	gs := chainGraphs()
	paths := writeBinaries(t, gs)
	dup := writeBinaries(t, gs[:1])
	if _, err := l.NewSession(context.Background(), SessionOptions{ContextPaths: append(slices.Clone(paths), dup...)}); err == nil || !strings.Contains(err.Error(), "unique") {
		t.Errorf("duplicate graph name: %v", err)
	}
	s := newSession(t, l, SessionOptions{ContextPaths: paths})
	g0, _ := s.Graph("stage_0")
	g1, _ := s.Graph("stage_1")
	if err := s.Link(g0, "kv_0", g1, "hidden"); err == nil || !strings.Contains(err.Error(), "must match") {
		t.Errorf("link of different shapes: %v", err)
	}
	if err := s.Link(g1, "hidden_out", g1, "hidden"); err == nil {
		t.Error("a graph linked to itself")
	}
	if err := s.Link(g0, "nope", g1, "hidden"); err == nil {
		t.Error("link from a missing output")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkClean(t, fk)
}

func TestSpillFillFromMetadata(t *testing.T) {
	gs := chainGraphs()
	for _, c := range []struct {
		name    string
		version uint32
		v3      bool
		want    uint64
	}{
		{"binary info v3, graph info v3", 3, true, 3 << 20},
		{"binary info v2, graph info v3", 2, true, 3 << 20},
		{"binary info v1, old graph info (hardware-info blob)", 1, false, 3 << 20},
		{"binary info v3, old graph info (none)", 3, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			fk := fakeLib(t, qnnfake.Variant{})
			fk.SetBinaryInfoVersion(c.version)
			fk.SetGraphInfoV3(c.v3)
			l := openFake(t, fk)
			b := qnnfake.Binary{SocModel: 69, Arch: 79, BuildID: "x", Graphs: gs}
			info, err := l.ParseContextInfo(b.Marshal())
			if err != nil {
				t.Fatal(err)
			}
			if info.SpillFillBufferSize != c.want {
				t.Errorf("SpillFillBufferSize %d, want %d", info.SpillFillBufferSize, c.want)
			}
			var listing strings.Builder
			if err := info.WriteListing(&listing); err != nil {
				t.Fatal(err)
			}
			if c.want != 0 && !strings.Contains(listing.String(), fmt.Sprintf("spill-fill      %d bytes", c.want)) {
				t.Errorf("listing lacks the spill-fill size:\n%s", listing.String())
			}
			if c.v3 && info.Graphs[2].SpillFill != 2<<20 {
				t.Errorf("graph stage_2 SpillFill %d, want %d", info.Graphs[2].SpillFill, 2<<20)
			}
		})
	}
}

func TestNoGroupWithoutSpillFill(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l := openFake(t, fk)
	gs := chainGraphs()
	for i := range gs {
		gs[i].SpillFill = 0
	}
	s := newSession(t, l, SessionOptions{ContextPaths: writeBinaries(t, gs)})
	if g := s.SpillFillGroup(); g.Registered || g.Reason == "" {
		t.Errorf("group %+v, want none with a reason", g)
	}
	for _, r := range fk.ContextRecords() {
		if r.Group {
			t.Errorf("context %d registered a group", r.Seq)
		}
	}
	if len(s.Infos()) != 3 {
		t.Errorf("%d infos, want 3", len(s.Infos()))
	}
}

// TestLinkShared chains the three contexts through rpcmem buffers
// registered in both contexts of each link: the double sees MEMHANDLE
// reads at the output's address, the results are the chained arithmetic,
// and teardown deregisters every handle before freeing the memory.
func TestLinkShared(t *testing.T) {
	for _, rpc := range []bool{true, false} {
		t.Run(map[bool]string{true: "rpcmem", false: "no rpcmem (RAW fallback)"}[rpc], func(t *testing.T) {
			fk := fakeLib(t, qnnfake.Variant{})
			fk.SetRPCMemAvailable(rpc)
			l := openFake(t, fk)
			gs := chainGraphs()
			s, err := l.NewSession(context.Background(), SessionOptions{ContextPaths: writeBinaries(t, gs)})
			if err != nil {
				t.Fatal(err)
			}
			g0, _ := s.Graph("stage_0")
			g1, _ := s.Graph("stage_1")
			g2, _ := s.Graph("stage_2")
			// stage_1 -> stage_2 first as a RAW link, then upgraded: the
			// RAW reader must follow the output into the shared buffer.
			if err := s.Link(g1, "hidden_out", g2, "hidden"); err != nil {
				t.Fatal(err)
			}
			for _, ln := range []struct {
				src *Graph
				out string
				dst *Graph
				in  string
			}{{g0, "hidden_out", g1, "hidden"}, {g1, "hidden_out", g2, "hidden"}} {
				ok, err := s.LinkShared(ln.src, ln.out, ln.dst, ln.in)
				if err != nil || ok != rpc {
					t.Fatalf("LinkShared %s -> %s = %v, %v; want %v", ln.src.Name(), ln.dst.Name(), ok, err, rpc)
				}
			}
			if !rpc && len(l.Warnings()) == 0 {
				t.Error("no warning for the RAW fallback")
			}
			x := randomInputs(gs[0], 4)
			bias := randomInputs(gs[1], 5)[1]
			if err := g0.SetInput(0, x[0]); err != nil {
				t.Fatal(err)
			}
			if err := g1.SetInput(1, bias); err != nil {
				t.Fatal(err)
			}
			memBefore := fk.MemHandleBytesRead()
			if _, err := s.RunChain(context.Background(), g0, g1, g2); err != nil {
				t.Fatal(err)
			}
			e0 := qnnfake.Expected(gs[0], x)
			e1 := qnnfake.Expected(gs[1], [][]float32{e0[1], bias})
			e2 := qnnfake.Expected(gs[2], [][]float32{e1[0]})
			got := make([]float32, len(e2[0]))
			if err := g2.ReadOutput(0, got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, e2[0]) {
				t.Errorf("stage_2 = %v, want %v", got, e2[0])
			}
			ex := fk.ExecuteRecords()
			if ex[1].Inputs[0] != ex[0].Outputs[1] || ex[2].Inputs[0] != ex[1].Outputs[0] {
				t.Errorf("chained inputs at %#x, %#x; outputs at %#x, %#x", ex[1].Inputs[0], ex[2].Inputs[0], ex[0].Outputs[1], ex[1].Outputs[0])
			}
			// Two hidden tensors of 6 float32 read from registered memory.
			if n, want := fk.MemHandleBytesRead()-memBefore, map[bool]uint64{true: 48, false: 0}[rpc]; n != want {
				t.Errorf("%d bytes read from registered memory, want %d", n, want)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			checkClean(t, fk)
		})
	}
}

// TestUnneededBinaryNotLoaded: a binary none of whose graphs is asked for
// gets no context.
func TestUnneededBinaryNotLoaded(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l := openFake(t, fk)
	paths := writeBinaries(t, chainGraphs())
	s := newSession(t, l, SessionOptions{ContextPaths: paths, Graphs: []string{"stage_2", "stage_0"}})
	if n := len(fk.ContextRecords()); n != 2 {
		t.Errorf("%d contexts created, want 2", n)
	}
	if infos := s.Infos(); len(infos) != 2 || s.Info().Path != paths[0] {
		t.Errorf("%d infos, first %s", len(infos), s.Info().Path)
	}
	if g := s.SpillFillGroup(); !g.Registered || g.MaxSpillFill != 2<<20 {
		t.Errorf("group %+v, want the 2 MiB maximum of the two loaded binaries", g)
	}
}
