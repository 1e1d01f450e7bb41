package htp

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/qnnfake"
	"github.com/fastwam/actionexpert/qnnrt"
)

func smallDims() expert.Dims {
	return expert.Dims{Layers: 2, Heads: 2, HeadDim: 4, VideoTokens: 3, ContextTokens: 5, TextDim: 6, ActionTokens: 4, ActionDim: 3}
}

func writeBinary(t testing.TB, graphs ...qnnfake.Graph) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "action_step.bin")
	b := qnnfake.Binary{SocModel: 69, Arch: 79, BuildID: "fake", Graphs: graphs}
	if err := os.WriteFile(p, b.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// options points the backend at the test double, with the head width of
// smallDims.
func options(fk *qnnfake.Lib, path string) Options {
	return Options{ContextPath: path, BackendLib: fk.Path, SystemLib: fk.Path, RPCMemLib: fk.Path, HeadDim: smallDims().HeadDim}
}

func newBackend(t testing.TB, o Options) *Backend {
	t.Helper()
	b, err := New(context.Background(), o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func randomChunk(d expert.Dims, seed uint64) *expert.Chunk {
	r := rand.New(rand.NewPCG(seed, 99))
	fill := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.Float64()*2 - 1)
		}
		return x
	}
	mask := make([]bool, d.ContextTokens)
	for i := range mask {
		mask[i] = i%3 != 1
	}
	return &expert.Chunk{VideoKeys: fill(d.KVLen()), VideoValues: fill(d.KVLen()), Context: fill(d.ContextLen()), ContextMask: mask}
}

// graphInputs lays the step's inputs out in g's input order, as the test
// double sees them (mask as 1/0).
func graphInputs(g qnnfake.Graph, c *expert.Chunk, latents []float32, tau float32) [][]float32 {
	mask := make([]float32, len(c.ContextMask))
	for i, m := range c.ContextMask {
		if m {
			mask[i] = 1
		}
	}
	byName := map[string][]float32{
		NameLatents: latents, NameTimestep: {tau}, NameVideoKeys: c.VideoKeys, NameVideoValues: c.VideoValues,
		NameContext: c.Context, NameContextMask: mask,
	}
	in := make([][]float32, len(g.Inputs))
	for m, t := range g.Inputs {
		in[m] = byName[t.Name]
	}
	return in
}

func checkClean(t testing.TB, fk *qnnfake.Lib) {
	t.Helper()
	if n := fk.LiveHandles(); n != 0 {
		t.Errorf("%d handles live after Close", n)
	}
	if n := fk.DoubleFrees(); n != 0 {
		t.Errorf("%d double frees", n)
	}
}

// TestDenoiseMatchesGraphFunction runs the flow-matching loop on the
// backend and checks every step's prediction against the test double's
// function of all six inputs, in both graph data types and with the inputs
// in an unusual order.
func TestDenoiseMatchesGraphFunction(t *testing.T) {
	d := smallDims()
	for _, tc := range []struct {
		name     string
		dt       uint32
		reversed bool
		shared   bool
	}{
		{"f32", qnnfake.DataTypeFloat32, false, false},
		{"f16 shared", qnnfake.DataTypeFloat16, false, true},
		{"f32 reversed inputs shared", qnnfake.DataTypeFloat32, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fk := qnnfake.New(t, qnnfake.Variant{})
			g := qnnfake.ActionStepGraph(tc.dt, d)
			if tc.reversed {
				slices.Reverse(g.Inputs)
			}
			o := options(fk, writeBinary(t, g))
			o.SharedBuffers = tc.shared
			o.Dims = &d
			b := newBackend(t, o)
			if b.Dims() != d {
				t.Fatalf("Dims %+v", b.Dims())
			}
			if b.SharedBuffers() != tc.shared {
				t.Errorf("SharedBuffers %v", b.SharedBuffers())
			}
			c := randomChunk(d, 1)
			sched, err := expert.NewSchedule(4, expert.DefaultShift)
			if err != nil {
				t.Fatal(err)
			}
			x0 := expert.Noise(3, d.LatentLen())
			x := slices.Clone(x0)
			steps := 0
			_, err = expert.Denoise(t.Context(), b, c, sched, x0, func(si expert.StepInfo) {
				want := qnnfake.Expected(g, graphInputs(g, c, x, si.Timestep))[0]
				if !slices.Equal(si.Pred, want) {
					t.Errorf("step %d: pred %v, want %v", si.Index, si.Pred[:3], want[:3])
				}
				copy(x, si.Latents)
				steps++
			})
			if err != nil {
				t.Fatal(err)
			}
			if steps != 4 || len(b.StepTimes()) != 4 {
				t.Errorf("%d steps, %d timings", steps, len(b.StepTimes()))
			}
			if _, ok := b.Profile(); ok {
				t.Error("Profile reports data with profiling off")
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			checkClean(t, fk)
		})
	}
}

func TestBindChunkAndStepErrors(t *testing.T) {
	d := smallDims()
	fk := qnnfake.New(t, qnnfake.Variant{})
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, d)
	b := newBackend(t, options(fk, writeBinary(t, g)))
	lat := make([]float32, d.LatentLen())
	pred := make([]float32, d.LatentLen())
	if err := b.Step(t.Context(), lat, 500, pred); err == nil || !strings.Contains(err.Error(), "Step before BindChunk") {
		t.Errorf("step before bind: %v", err)
	}
	c := randomChunk(d, 2)
	c.VisibleVideo = 2
	if err := b.BindChunk(t.Context(), c); err == nil || !strings.Contains(err.Error(), "VisibleVideo must be 0 or 3") {
		t.Errorf("VisibleVideo 2: %v", err)
	}
	c.VisibleVideo = d.VideoTokens
	if err := b.BindChunk(t.Context(), c); err != nil {
		t.Fatalf("VisibleVideo = Sv: %v", err)
	}
	bad := *c
	bad.Context = bad.Context[1:]
	if err := b.BindChunk(t.Context(), &bad); err == nil || !strings.Contains(err.Error(), "context has 29 elements, want 30") {
		t.Errorf("short context: %v", err)
	}
	// A chunk that fails validation changes nothing: the previous one stays bound.
	if err := b.Step(t.Context(), lat, 500, pred); err != nil {
		t.Errorf("step after a rejected chunk: %v", err)
	}
	if err := b.Step(t.Context(), lat[1:], 500, pred); err == nil || !strings.Contains(err.Error(), "latents has 11 elements, want 12") {
		t.Errorf("short latents: %v", err)
	}
	if err := b.Step(t.Context(), lat, 500, pred[1:]); err == nil || !strings.Contains(err.Error(), "pred has 11 elements") {
		t.Errorf("short pred: %v", err)
	}
	var inf float32 = 1e38
	if err := b.Step(t.Context(), lat, inf*10, pred); err == nil || !strings.Contains(err.Error(), "timestep +Inf is not finite") {
		t.Errorf("infinite timestep: %v", err)
	}
	// A bind interrupted half way leaves no chunk bound.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.BindChunk(ctx, c); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled bind: %v", err)
	}
	if err := b.Step(t.Context(), lat, 500, pred); err == nil || !strings.Contains(err.Error(), "Step before BindChunk") {
		t.Errorf("step after an interrupted bind: %v", err)
	}
	if err := b.Close(); err != nil || b.Close() != nil {
		t.Errorf("close twice: %v", err)
	}
	if err := b.BindChunk(t.Context(), c); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("bind after close: %v", err)
	}
	if err := b.Step(t.Context(), lat, 500, pred); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("step after close: %v", err)
	}
	if b.Info() != nil {
		t.Error("Info after Close")
	}
	checkClean(t, fk)
}

func TestContractChecksAtLoad(t *testing.T) {
	d := smallDims()
	base := func() qnnfake.Graph { return qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, d) }
	for _, tc := range []struct {
		name string
		mut  func(*qnnfake.Graph)
		opts func(*Options)
		want string
	}{
		{"missing mask", func(g *qnnfake.Graph) { g.Inputs = g.Inputs[:5] }, nil,
			`graph "action_step" has no input "context_mask"`},
		{"extra input", func(g *qnnfake.Graph) {
			g.Inputs = append(g.Inputs, qnnfake.Tensor{ID: 77, Name: "visible", DataType: qnnfake.DataTypeFloat32, Dims: []uint32{1}})
		}, nil, "has 7 inputs and 1 outputs; the step contract has 6 and 1"},
		{"values shape", func(g *qnnfake.Graph) { g.Inputs[3].Dims = []uint32{2, 1, 4, 8} }, nil,
			`"video_keys" has shape [2 1 3 8] but "video_values" has [2 1 4 8]`},
		{"mask length", func(g *qnnfake.Graph) { g.Inputs[5].Dims = []uint32{1, 6} }, nil,
			`"context_mask" has 6 tokens but "context" has 5`},
		{"pred shape", func(g *qnnfake.Graph) { g.Outputs[0].Dims = []uint32{1, 4, 7} }, nil,
			`output "pred_noise" has shape [1 4 7] but input "latents_action" has [1 4 3]`},
		{"latents rank", func(g *qnnfake.Graph) { g.Inputs[0].Dims = []uint32{4, 3} }, nil,
			`input "latents_action" has shape [4,3], want [1,S,a]`},
		{"timestep size", func(g *qnnfake.Graph) { g.Inputs[1].Dims = []uint32{2} }, nil,
			`input "timestep" has 2 elements, want 1`},
		{"renamed output", func(g *qnnfake.Graph) { g.Outputs[0].Name = "velocity" }, nil,
			`has no output "pred_noise" (it has ["velocity"])`},
		{"head split", nil, func(o *Options) { o.HeadDim = 3 }, "key width 8, not a multiple of the head dim 3"},
		{"full contract", nil, func(o *Options) { full := expert.FullDims(); o.Dims = &full },
			"implements S=4 a=3 N=2 Sv=3 width=8 L=5 T=6; the contract is S=32 a=7 N=30 Sv=98 width=3072 (24 heads x 128) L=129 T=4096"},
		{"wrong graph name", nil, func(o *Options) { o.GraphName = "other" }, `has no graph "other"; it has ["action_step"]`},
		{"int graph", func(g *qnnfake.Graph) { g.Inputs[0].DataType = qnnfake.DataTypeInt32 }, nil, `"latents_action" has data type INT_32`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fk := qnnfake.New(t, qnnfake.Variant{})
			g := base()
			if tc.mut != nil {
				tc.mut(&g)
			}
			o := options(fk, writeBinary(t, g))
			if tc.opts != nil {
				tc.opts(&o)
			}
			b, err := New(t.Context(), o)
			if err == nil {
				b.Close()
				t.Fatal("New accepted the graph")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q lacks %q", err, tc.want)
			}
			if fk.Calls("contextCreateFromBinary") != 0 {
				t.Error("the context was loaded before the contract was checked")
			}
			checkClean(t, fk)
		})
	}
	if _, err := New(t.Context(), Options{}); err == nil || !strings.Contains(err.Error(), "ContextPath is empty") {
		t.Errorf("empty options: %v", err)
	}
}

func TestDerivedDims(t *testing.T) {
	fk := qnnfake.New(t, qnnfake.Variant{})
	d := expert.Dims{Layers: 3, Heads: 2, HeadDim: 128, VideoTokens: 5, ContextTokens: 7, TextDim: 9, ActionTokens: 32, ActionDim: 7}
	o := options(fk, writeBinary(t, qnnfake.ActionStepGraph(qnnfake.DataTypeFloat16, d)))
	o.HeadDim = 0 // the default, 128
	b := newBackend(t, o)
	if b.Dims() != d {
		t.Errorf("derived %+v, want %+v", b.Dims(), d)
	}
	if info := b.Info(); info == nil || info.Graphs[0].Inputs[0].DataType != qnnrt.Float16 {
		t.Errorf("Info %+v", info)
	}
}

func TestReloadAfterSubsystemRestart(t *testing.T) {
	d := smallDims()
	fk := qnnfake.New(t, qnnfake.Variant{})
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, d)
	o := options(fk, writeBinary(t, g))
	o.SharedBuffers, o.PerfMode, o.Profiling = true, qnnrt.PerfBurst, true
	b := newBackend(t, o)
	c := randomChunk(d, 4)
	if err := b.BindChunk(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	lat := expert.Noise(5, d.LatentLen())
	pred := make([]float32, len(lat))
	fk.FailCall("graphExecute", 1007, 2)
	if err := b.Step(t.Context(), lat, 1000, pred); err != nil {
		t.Fatal(err)
	}
	err := b.Step(t.Context(), lat, 900, pred)
	if !errors.Is(err, qnnrt.ErrSubsystemRestart) || !strings.Contains(err.Error(), "Reload the backend") {
		t.Fatalf("restart error: %v", err)
	}
	creates := fk.Calls("contextCreateFromBinary")
	if err := b.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if fk.Calls("contextCreateFromBinary") != creates+1 {
		t.Error("Reload did not load the context again")
	}
	// The chunk was rebound: the result depends on every constant input.
	if err := b.Step(t.Context(), lat, 900, pred); err != nil {
		t.Fatal(err)
	}
	if want := qnnfake.Expected(g, graphInputs(g, c, lat, 900))[0]; !slices.Equal(pred, want) {
		t.Error("step after Reload differs from the expected function of the rebound chunk")
	}
	if !b.SharedBuffers() {
		t.Error("shared buffers lost on Reload")
	}
	if p, ok := b.Profile(); !ok || len(p) != 1 || p[0] != 1500*time.Microsecond {
		t.Errorf("profile after Reload: %v %v", p, ok)
	}
	// A failing reload leaves the backend unusable until a reload works.
	fk.FailCall("contextCreateFromBinary", 1009, 1)
	if err := b.Reload(t.Context()); err == nil || !strings.Contains(err.Error(), "QNN_COMMON_ERROR_LOADING_BINARIES (1009)") {
		t.Errorf("failed reload: %v", err)
	}
	if err := b.Step(t.Context(), lat, 900, pred); err == nil || !strings.Contains(err.Error(), "call Reload again") {
		t.Errorf("step without a session: %v", err)
	}
	if err := b.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Step(t.Context(), lat, 900, pred); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	checkClean(t, fk)
	if err := b.Reload(t.Context()); err == nil {
		t.Error("Reload after Close succeeded")
	}
}

func TestSharedFallbackReportedOnce(t *testing.T) {
	d := smallDims()
	fk := qnnfake.New(t, qnnfake.Variant{})
	fk.SetRPCMemAvailable(false)
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, d)
	var mu sync.Mutex
	var logs []string
	o := options(fk, writeBinary(t, g))
	o.SharedBuffers = true
	o.Logf = func(f string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); mu.Unlock() }
	b := newBackend(t, o)
	if b.SharedBuffers() {
		t.Fatal("shared buffers reported without rpcmem")
	}
	c := randomChunk(d, 6)
	if err := b.BindChunk(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	lat := expert.Noise(1, d.LatentLen())
	pred := make([]float32, len(lat))
	if err := b.Step(t.Context(), lat, 250, pred); err != nil {
		t.Fatal(err)
	}
	if want := qnnfake.Expected(g, graphInputs(g, c, lat, 250))[0]; !slices.Equal(pred, want) {
		t.Error("fallback step differs from the expected function")
	}
	if err := b.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(logs) != 1 || len(b.Warnings()) != 1 || !strings.Contains(logs[0], "shared buffers unavailable") {
		t.Errorf("fallback reports %q (warnings %q), want exactly one", logs, b.Warnings())
	}
}

func TestBytesPerStep(t *testing.T) {
	d := smallDims()
	for _, shared := range []bool{true, false} {
		fk := qnnfake.New(t, qnnfake.Variant{})
		g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, d)
		o := options(fk, writeBinary(t, g))
		o.SharedBuffers = shared
		b := newBackend(t, o)
		if err := b.BindChunk(t.Context(), randomChunk(d, 1)); err != nil {
			t.Fatal(err)
		}
		lat := make([]float32, d.LatentLen())
		pred := make([]float32, len(lat))
		raw0, host0 := fk.RawBytesRead(), b.Stats().BytesWritten
		for k := range 5 {
			if err := b.Step(t.Context(), lat, float32(100*k), pred); err != nil {
				t.Fatal(err)
			}
		}
		stepBytes := uint64(4 * (d.LatentLen() + 1))
		wantRaw := stepBytes
		if !shared {
			wantRaw += uint64(4 * (2*d.KVLen() + d.ContextLen() + d.ContextTokens))
		}
		if got := (fk.RawBytesRead() - raw0) / 5; got != wantRaw {
			t.Errorf("shared=%v: RAW bytes per step %d, want %d", shared, got, wantRaw)
		}
		if got := (b.Stats().BytesWritten - host0) / 5; got != stepBytes {
			t.Errorf("shared=%v: host bytes per step %d, want %d", shared, got, stepBytes)
		}
	}
}

func TestSerialisedSteps(t *testing.T) {
	d := smallDims()
	fk := qnnfake.New(t, qnnfake.Variant{})
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, d)
	b := newBackend(t, options(fk, writeBinary(t, g)))
	c := randomChunk(d, 9)
	if err := b.BindChunk(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			lat := expert.Noise(uint64(w), d.LatentLen())
			pred := make([]float32, len(lat))
			want := qnnfake.Expected(g, graphInputs(g, c, lat, float32(w)))[0]
			for range 10 {
				if err := b.Step(t.Context(), lat, float32(w), pred); err != nil {
					t.Error(err)
					return
				}
				if !slices.Equal(pred, want) {
					t.Error("concurrent steps mixed their inputs")
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestProfilingFailureKeepsSteps checks that a profiler that cannot be read
// neither fails a step nor discards its prediction: the step's device time
// is marked missing and the failure is warned about once.
func TestProfilingFailureKeepsSteps(t *testing.T) {
	d := smallDims()
	fk := qnnfake.New(t, qnnfake.Variant{})
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, d)
	o := options(fk, writeBinary(t, g))
	o.Profiling = true
	var mu sync.Mutex
	var logs []string
	o.Logf = func(f string, a ...any) { mu.Lock(); logs = append(logs, fmt.Sprintf(f, a...)); mu.Unlock() }
	b := newBackend(t, o)
	c := randomChunk(d, 2)
	if err := b.BindChunk(t.Context(), c); err != nil {
		t.Fatal(err)
	}
	lat := expert.Noise(3, d.LatentLen())
	fk.FailCall("profileGetEvents", 4950, 2)     // the Saver backend's dummy return value
	fk.FailCall("profileGetEventData", 12000, 2) // the second call: step 3 (step 2 made none)
	for i, tau := range []float32{1000, 800, 600, 400} {
		pred := make([]float32, len(lat))
		if err := b.Step(t.Context(), lat, tau, pred); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if want := qnnfake.Expected(g, graphInputs(g, c, lat, tau))[0]; !slices.Equal(pred, want) {
			t.Errorf("step %d: prediction lost", i)
		}
	}
	p, ok := b.Profile()
	want := []time.Duration{1500 * time.Microsecond, 0, 0, 1500 * time.Microsecond}
	if !ok || !slices.Equal(p, want) {
		t.Errorf("profile %v, want %v", p, want)
	}
	var profiled []bool
	for _, tm := range b.StepTimes() {
		profiled = append(profiled, tm.Profiled)
	}
	if !slices.Equal(profiled, []bool{true, false, false, true}) {
		t.Errorf("Profiled %v, want the two failed steps marked missing", profiled)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logs) != 1 || !strings.Contains(logs[0], "device execute times are missing") || !strings.Contains(logs[0], "QNN_SAVER_ERROR_DUMMY_RETVALUE (4950)") {
		t.Errorf("warnings %q, want one about the profileGetEvents failure", logs)
	}
}

// TestLogsAndVoteOptions checks the QNN log lines reach Options.LogSink at
// the asked level, that the DCVS part goes alone by default (RPCVote false), and that a
// refused part is reported through Logf and PerfStatus.
func TestLogsAndVoteOptions(t *testing.T) {
	d := smallDims()
	fk := qnnfake.New(t, qnnfake.Variant{})
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, d)
	o := options(fk, writeBinary(t, g))
	o.PerfMode, o.LogLevel = qnnrt.PerfBurst, int(qnnrt.LogInfo)
	var mu sync.Mutex
	var lines []qnnrt.LogLine
	o.LogSink = func(l qnnrt.LogLine) { mu.Lock(); lines = append(lines, l); mu.Unlock() }
	b := newBackend(t, o)
	if st := b.PerfStatus(); st.DCVS != qnnrt.VoteApplied || st.RPC != qnnrt.VoteSkipped {
		t.Errorf("status %+v", st)
	}
	for _, v := range fk.PowerVotes() {
		if v.Option != 1 {
			t.Errorf("RPC option %d sent without RPCVote", v.Option)
		}
	}
	mu.Lock()
	var info int
	for _, l := range lines {
		if l.Level > qnnrt.LogInfo {
			t.Errorf("line above INFO: %+v", l)
		}
		if l.Level == qnnrt.LogInfo && strings.Contains(l.Text, "graph(s)") {
			info++
		}
	}
	mu.Unlock()
	if info != 1 {
		t.Errorf("%d context INFO lines in %+v, want 1", info, lines)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	fk2 := qnnfake.New(t, qnnfake.Variant{})
	o = options(fk2, writeBinary(t, g))
	o.PerfMode, o.RPCVote = qnnrt.PerfBurst, true
	var logs []string
	o.Logf = func(f string, a ...any) { logs = append(logs, fmt.Sprintf(f, a...)) }
	fk2.FailCall("setPowerConfig", 13003, 2)
	b2 := newBackend(t, o)
	if st := b2.PerfStatus(); st.DCVS != qnnrt.VoteApplied || st.RPC != qnnrt.VoteFailed || st.String() != "burst (DCVS applied, RPC failed)" {
		t.Errorf("status %+v %q", st, st)
	}
	if len(logs) != 1 || !strings.Contains(logs[0], "the RPC part of the vote") {
		t.Errorf("warnings %q", logs)
	}
}
