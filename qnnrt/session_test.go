package qnnrt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/internal/qnnfake"
)

func runGraph(t *testing.T, gr *Graph, in [][]float32, nOut []int) [][]float32 {
	t.Helper()
	out := make([][]float32, len(nOut))
	for j, n := range nOut {
		out[j] = make([]float32, n)
	}
	if _, err := gr.Run(t.Context(), in, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func outLens(g qnnfake.Graph) []int {
	n := make([]int, len(g.Outputs))
	for j, t := range g.Outputs {
		n[j] = int(t.Elements())
	}
	return n
}

// TestExecuteTypes runs the action_step graph in every data type the
// runtime converts and compares the outputs bit for bit with the test
// double's function of every input.
func TestExecuteTypes(t *testing.T) {
	q8 := &qnnfake.ScaleOffset{Scale: 1.0 / 64, Offset: -128}
	q16 := &qnnfake.ScaleOffset{Scale: 1.0 / 8192, Offset: -32768}
	for _, tc := range []struct {
		name  string
		dt    uint32
		quant *qnnfake.ScaleOffset
	}{
		{"f32", qnnfake.DataTypeFloat32, nil},
		{"f16", qnnfake.DataTypeFloat16, nil},
		{"bf16", qnnfake.DataTypeBF16, nil},
		{"ufixed8", qnnfake.DataTypeUFixed8, q8},
		{"ufixed16", qnnfake.DataTypeUFixed16, q16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fk := fakeLib(t, qnnfake.Variant{})
			l := openFake(t, fk)
			g := qnnfake.ActionStepGraph(tc.dt, smallDims())
			for _, ts := range [][]qnnfake.Tensor{g.Inputs, g.Outputs} {
				for i := range ts {
					ts[i].Quant = tc.quant
				}
			}
			s := newSession(t, l, SessionOptions{ContextPath: writeBinary(t, actionBinary(g))})
			gr, err := s.Graph("action_step")
			if err != nil {
				t.Fatal(err)
			}
			for seed := uint64(1); seed <= 3; seed++ {
				in := randomInputs(g, seed)
				out := runGraph(t, gr, in, outLens(g))
				exp := qnnfake.Expected(g, in)
				if exp == nil {
					t.Fatal("Expected refused the graph")
				}
				if !slices.Equal(out[0], exp[0]) {
					t.Fatalf("seed %d: pred = %v\nwant %v", seed, out[0], exp[0])
				}
			}
			if tc.quant != nil {
				if ti := gr.Inputs()[0]; !ti.Quant.Defined || ti.Quant.Scale != tc.quant.Scale || ti.Quant.Offset != tc.quant.Offset {
					t.Errorf("input quantization %+v", ti.Quant)
				}
			}
		})
	}
}

// TestExecuteWiring checks that every input reaches the graph as the
// tensor it is (ids that are not positions, inputs listed in a different
// order from the usual one) and that constant inputs persist across runs.
func TestExecuteWiring(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l := openFake(t, fk)
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	slices.Reverse(g.Inputs)
	s := newSession(t, l, SessionOptions{ContextPath: writeBinary(t, actionBinary(g))})
	gr, _ := s.Graph("action_step")
	for i, ti := range gr.Inputs() {
		if ti.Name != g.Inputs[i].Name || gr.InputIndex(ti.Name) != i {
			t.Fatalf("input %d is %q, binary order has %q", i, ti.Name, g.Inputs[i].Name)
		}
	}
	in := randomInputs(g, 11)
	want := qnnfake.Expected(g, in)
	got := runGraph(t, gr, in, outLens(g))
	if !slices.Equal(got[0], want[0]) {
		t.Fatal("first run differs from the expected function")
	}
	// Swapping the data of two same-shaped inputs changes the result:
	// the check above can tell a mis-wiring.
	kv, vv := gr.InputIndex("video_keys"), gr.InputIndex("video_values")
	sw := slices.Clone(in)
	sw[kv], sw[vv] = sw[vv], sw[kv]
	if slices.Equal(qnnfake.Expected(g, sw)[0], want[0]) {
		t.Fatal("test inputs do not tell video_keys from video_values")
	}
	// nil inputs keep what the buffers hold; only the first input changes.
	next := make([][]float32, len(in))
	next[0] = randomInputs(g, 12)[0]
	got = runGraph(t, gr, next, outLens(g))
	in[0] = next[0]
	if want := qnnfake.Expected(g, in); !slices.Equal(got[0], want[0]) {
		t.Fatal("constant inputs did not persist between runs")
	}
	// SetInput then a run with no new data.
	in[2] = randomInputs(g, 13)[2]
	if err := gr.SetInput(2, in[2]); err != nil {
		t.Fatal(err)
	}
	got = runGraph(t, gr, make([][]float32, len(in)), outLens(g))
	if want := qnnfake.Expected(g, in); !slices.Equal(got[0], want[0]) {
		t.Fatal("SetInput not seen by the next run")
	}
	st := gr.Stats()
	if st.Executes != 3 {
		t.Errorf("%d executes counted", st.Executes)
	}
}

func TestRunArgumentErrors(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l := openFake(t, fk)
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	s := newSession(t, l, SessionOptions{ContextPath: writeBinary(t, actionBinary(g))})
	gr, _ := s.Graph("action_step")
	in := randomInputs(g, 1)
	out := outputsFor(g)
	partial := make([][]float32, len(in))
	partial[0] = in[0]
	if _, err := gr.Run(t.Context(), partial, out); err == nil || !strings.Contains(err.Error(), `input "timestep" was never written`) {
		t.Errorf("unset input: %v", err)
	}
	short := slices.Clone(in)
	short[2] = short[2][:5]
	if _, err := gr.Run(t.Context(), short, out); err == nil || !strings.Contains(err.Error(), `input "video_keys": got 5 values, want 48 (FLOAT_32 [2,1,3,8])`) {
		t.Errorf("short input: %v", err)
	}
	if _, err := gr.Run(t.Context(), in[:3], out); err == nil || !strings.Contains(err.Error(), "Run got 3 inputs and 1 outputs, want 6 and 1") {
		t.Errorf("input count: %v", err)
	}
	if _, err := gr.Run(t.Context(), in, [][]float32{make([]float32, 2)}); err == nil || !strings.Contains(err.Error(), `output "pred_noise": buffer has 2 values, want 12`) {
		t.Errorf("short output: %v", err)
	}
	if err := gr.SetInput(9, nil); err == nil || !strings.Contains(err.Error(), "has no input 9") {
		t.Errorf("SetInput(9): %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := gr.Run(ctx, in, out); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	if _, err := s.Graph("nope"); err == nil || !strings.Contains(err.Error(), `no graph "nope"; retrieved ["action_step"]`) {
		t.Errorf("unknown graph: %v", err)
	}
	if fk.Calls("graphExecute") != 0 {
		t.Errorf("%d executes reached the library despite bad arguments", fk.Calls("graphExecute"))
	}
	s.Close()
	if _, err := gr.Run(t.Context(), in, out); err == nil || !strings.Contains(err.Error(), "session is closed") {
		t.Errorf("run after close: %v", err)
	}
	if err := gr.SetInput(0, in[0]); err == nil || !strings.Contains(err.Error(), "session is closed") {
		t.Errorf("SetInput after close: %v", err)
	}
}

// TestSessionErrorPaths injects a failure into every QNN call of session
// creation and checks the error names the call, its code and the library's
// message, and that nothing is left allocated or freed twice.
func TestSessionErrorPaths(t *testing.T) {
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	for _, tc := range []struct {
		fn   string
		code uint64
		opts SessionOptions
		want string
	}{
		{"logCreate", 11002, SessionOptions{}, "logCreate: QNN_LOG_ERROR_INITIALIZATION (11002)"},
		{"backendCreate", 4000, SessionOptions{}, "backendCreate: QNN_BACKEND_ERROR_CANNOT_INITIALIZE (4000)"},
		{"deviceCreate", 14002, SessionOptions{}, "deviceCreate: QNN_DEVICE_ERROR_HARDWARE_UNAVAILABLE (14002)"},
		{"profileCreate", 1002, SessionOptions{Profiling: true}, "profileCreate: QNN_COMMON_ERROR_MEM_ALLOC (1002)"},
		{"deviceGetInfrastructure", 1003, SessionOptions{PerfMode: PerfBurst}, "deviceGetInfrastructure: QNN_COMMON_ERROR_SYSTEM (1003)"},
		{"createPowerConfigId", 13003, SessionOptions{PerfMode: PerfBurst}, "createPowerConfigId: QNN_HTP_PERF_INFRASTRUCTURE_ERROR_TRANSPORT (13003)"},
		{"contextCreateFromBinary", 5005, SessionOptions{PerfMode: PerfBurst, Profiling: true}, `contextCreateFromBinary "` + "%s" + `": QNN_CONTEXT_ERROR_CREATE_FROM_BINARY (5005)`},
		{"graphRetrieve", 6002, SessionOptions{}, `graphRetrieve "action_step": QNN_GRAPH_ERROR_GRAPH_DOES_NOT_EXIST (6002)`},
		{"systemContextGetMetaData", 30010, SessionOptions{}, "systemContextGetMetaData: QNN_SYSTEM_CONTEXT_ERROR_MALFORMED_BINARY (30010)"},
	} {
		t.Run(tc.fn, func(t *testing.T) {
			fk := fakeLib(t, qnnfake.Variant{})
			l := openFake(t, fk)
			path := writeBinary(t, actionBinary(g))
			opts := tc.opts
			opts.ContextPath = path
			fk.FailCall(tc.fn, tc.code, 1)
			s, err := l.NewSession(t.Context(), opts)
			if err == nil {
				s.Close()
				t.Fatal("NewSession succeeded")
			}
			want := tc.want
			if strings.Contains(want, "%s") {
				want = fmt.Sprintf(want, path)
			}
			if !strings.Contains(err.Error(), "qnnrt: "+want) {
				t.Errorf("error %q lacks %q", err, want)
			}
			var qe *Error
			if !errors.As(err, &qe) || qe.Code != tc.code {
				t.Errorf("error carries no *Error with code %d: %#v", tc.code, qe)
			} else if qe.Message == "" && !strings.HasPrefix(tc.fn, "system") {
				t.Errorf("no library message for %d", tc.code)
			}
			// The double logs the reason of every failure at ERROR, as a
			// real backend does, once a logger exists (after logCreate and
			// outside the system API, which runs before it).
			wantLog := fmt.Sprintf("%s: injected failure (call 1, code %d) (error %d)", tc.fn, tc.code, tc.code)
			if tc.fn == "logCreate" || strings.HasPrefix(tc.fn, "system") {
				wantLog = ""
			}
			if qe != nil && qe.Log != wantLog {
				t.Errorf("Log %q, want %q", qe.Log, wantLog)
			}
			if wantLog != "" && !strings.Contains(err.Error(), "; QNN log: "+wantLog) {
				t.Errorf("error %q lacks the logged reason %q", err, wantLog)
			}
			checkClean(t, fk)
			// The failure was one-off: the next attempt works.
			s, err = l.NewSession(t.Context(), opts)
			if err != nil {
				t.Fatalf("retry: %v", err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			checkClean(t, fk)
		})
	}
}

func TestSessionOptionErrors(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l := openFake(t, fk)
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	path := writeBinary(t, actionBinary(g))
	for _, tc := range []struct {
		opts SessionOptions
		want string
	}{
		{SessionOptions{}, "ContextPath is empty"},
		{SessionOptions{ContextPath: path, LogLevel: 9}, "log level 9 out of range"},
		{SessionOptions{ContextPath: path, Graphs: []string{"other"}}, `has no graph "other"; it has ["action_step"]`},
		{SessionOptions{ContextPath: path, PerfMode: PerfMode(42)}, "unknown performance mode 42"},
		{SessionOptions{ContextPath: path, Expect: []GraphSpec{{Name: "action_step",
			Inputs: []TensorSpec{{Name: "latents_action", Dims: []uint32{1, 32, 7}}}}}}, `input "latents_action" has shape [1,4,3], want [1,32,7]`},
	} {
		s, err := l.NewSession(t.Context(), tc.opts)
		if err == nil {
			s.Close()
			t.Errorf("%+v accepted", tc.opts)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %q lacks %q", err, tc.want)
		}
	}
	if n := fk.Calls("contextCreateFromBinary"); n != 0 {
		t.Errorf("contract violations reached contextCreateFromBinary %d times; they must fail before loading", n)
	}
	checkClean(t, fk)
	// A graph with a type the runtime cannot convert fails at load.
	gi := qnnfake.ActionStepGraph(qnnfake.DataTypeInt32, smallDims())
	if _, err := l.NewSession(t.Context(), SessionOptions{ContextPath: writeBinary(t, actionBinary(gi))}); err == nil ||
		!strings.Contains(err.Error(), `graph "action_step" input: qnnrt: tensor "latents_action" has data type INT_32`) {
		t.Errorf("INT_32 graph: %v", err)
	}
	checkClean(t, fk)
}

func TestExecuteErrorsAndRestart(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l := openFake(t, fk)
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	path := writeBinary(t, actionBinary(g))
	s := newSession(t, l, SessionOptions{ContextPath: path, PerfMode: PerfBurst, Profiling: true})
	gr, _ := s.Graph("action_step")
	in := randomInputs(g, 5)
	out := outputsFor(g)
	fk.FailCall("graphExecute", 6004, 1)
	_, err := gr.Run(t.Context(), in, out)
	if err == nil || !strings.Contains(err.Error(), `qnnrt: graphExecute "action_step": QNN_GRAPH_ERROR_INVALID_TENSOR (6004): `) ||
		errors.Is(err, ErrSubsystemRestart) {
		t.Errorf("execute failure: %v", err)
	}
	fk.FailCall("graphExecute", 1007, 2)
	if _, err := gr.Run(t.Context(), in, out); err != nil {
		t.Fatal(err)
	}
	_, err = gr.Run(t.Context(), in, out)
	if !errors.Is(err, ErrSubsystemRestart) || errors.Is(err, ErrSubsystemFatal) ||
		!strings.Contains(err.Error(), `graphExecute "action_step": QNN_COMMON_ERROR_SYSTEM_COMMUNICATION (1007): `) {
		t.Fatalf("1007: %v", err)
	}
	// Reload: tear the session down (the fake may refuse frees after a
	// restart; the teardown carries on) and load again.
	_ = s.Close()
	checkClean(t, fk)
	s2 := newSession(t, l, SessionOptions{ContextPath: path, PerfMode: PerfBurst, Profiling: true})
	gr2, _ := s2.Graph("action_step")
	got := runGraph(t, gr2, in, outLens(g))
	if want := qnnfake.Expected(g, in); !slices.Equal(got[0], want[0]) {
		t.Error("reloaded session computes a different result")
	}
	fk.FailCall("graphExecute", 1011, 1)
	if _, err := gr2.Run(t.Context(), in, out); !errors.Is(err, ErrSubsystemFatal) || errors.Is(err, ErrSubsystemRestart) {
		t.Errorf("1011: %v", err)
	}
}

func TestTeardown(t *testing.T) {
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	for _, tc := range []struct {
		name string
		opts SessionOptions
		dev  bool
	}{
		{"plain", SessionOptions{}, true},
		{"everything", SessionOptions{PerfMode: PerfBurst, Profiling: true, PersistentBinary: true}, true},
		{"no device", SessionOptions{PerfMode: PerfPowerSaver}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fk := fakeLib(t, qnnfake.Variant{})
			fk.SetDeviceSupported(tc.dev)
			l := openFake(t, fk)
			opts := tc.opts
			opts.ContextPath = writeBinary(t, actionBinary(g))
			s := newSession(t, l, opts)
			if s.HasDevice() != tc.dev {
				t.Errorf("HasDevice %v, want %v", s.HasDevice(), tc.dev)
			}
			if w := l.Warnings(); tc.dev != (len(w) == 0) || (!tc.dev && !strings.Contains(w[0], "performance mode power_saver not applied")) {
				t.Errorf("warnings %q", w)
			}
			if !tc.dev && len(fk.PowerVotes()) != 0 {
				t.Errorf("votes cast without a device: %+v", fk.PowerVotes())
			}
			gr, _ := s.Graph("action_step")
			if ok, err := gr.ShareInputs("video_keys", "context"); err != nil || !ok {
				t.Fatalf("ShareInputs: %v %v", ok, err)
			}
			runGraph(t, gr, randomInputs(g, 1), outLens(g))
			if fk.LiveHandles() == 0 {
				t.Fatal("no live handles while the session is open")
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			checkClean(t, fk)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			checkClean(t, fk)
			for fn, want := range map[string]int{"contextFree": 1, "backendFree": 1, "logFree": 1, "memDeRegister": 2, "memRegister": 2} {
				if n := fk.Calls(fn); n != want {
					t.Errorf("%s called %d times, want %d", fn, n, want)
				}
			}
			wantDev := 0
			if tc.dev {
				wantDev = 1
			}
			if n := fk.Calls("deviceFree"); n != wantDev {
				t.Errorf("deviceFree called %d times, want %d", n, wantDev)
			}
		})
	}
}

func TestTeardownContinuesPastFailures(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l := openFake(t, fk)
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	s := newSession(t, l, SessionOptions{ContextPath: writeBinary(t, actionBinary(g)), PerfMode: PerfBurst, Profiling: true})
	gr, _ := s.Graph("action_step")
	if ok, _ := gr.ShareInputs("video_values"); !ok {
		t.Fatal("not shared")
	}
	fk.FailCall("contextFree", 5002, 1)
	fk.FailCall("setPowerConfig", 13003, 1)
	err := s.Close()
	if err == nil || !strings.Contains(err.Error(), "contextFree: QNN_CONTEXT_ERROR_INVALID_HANDLE (5002)") ||
		!strings.Contains(err.Error(), "setPowerConfig: QNN_HTP_PERF_INFRASTRUCTURE_ERROR_TRANSPORT (13003)") ||
		!strings.Contains(err.Error(), "down-vote on close") {
		t.Errorf("close error %v", err)
	}
	for _, fn := range []string{"profileFree", "destroyPowerConfigId", "deviceFree", "backendFree", "logFree"} {
		if fk.Calls(fn) != 1 {
			t.Errorf("%s not called after earlier failures", fn)
		}
	}
	if fk.DoubleFrees() != 0 {
		t.Errorf("%d double frees", fk.DoubleFrees())
	}
	if err := s.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
	if fk.Calls("contextFree") != 1 {
		t.Error("second close retried contextFree")
	}
}

func TestPerfModes(t *testing.T) {
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	down := qnnfake.PowerVote{Option: 1, PowerMode: 4, DcvsEnable: 1, SleepLatency: 2000,
		BusMin: 0x40, BusTarget: 0x40, BusMax: 0x40, CoreMin: 0x40, CoreTarget: 0x40, CoreMax: 0x40}
	corners := func(v qnnfake.PowerVote, c uint32) qnnfake.PowerVote {
		v.BusMin, v.BusTarget, v.BusMax, v.CoreMin, v.CoreTarget, v.CoreMax = c, c, c, c, c, c
		return v
	}
	for _, tc := range []struct {
		mode PerfMode
		want []qnnfake.PowerVote
	}{
		{PerfDefault, nil},
		// The DCVS part and the RPC part go in separate setPowerConfig
		// calls (Call 1 and 2); the down-vote is the next call.
		{PerfBurst, []qnnfake.PowerVote{
			corners(qnnfake.PowerVote{Option: 1, PowerMode: 0x10, DcvsEnable: 0, SleepLatency: 40, Call: 1}, 0xA0),
			{Option: 2, RPCValue: 100, Call: 2}, {Option: 3, RPCValue: 9999, Call: 2}}},
		{PerfHighPerformance, []qnnfake.PowerVote{
			corners(qnnfake.PowerVote{Option: 1, PowerMode: 0x10, DcvsEnable: 0, SleepLatency: 100, Call: 1}, 0x80),
			{Option: 2, RPCValue: 100, Call: 2}}},
		{PerfBalanced, []qnnfake.PowerVote{corners(qnnfake.PowerVote{Option: 1, PowerMode: 1, DcvsEnable: 1, SleepLatency: 1000, Call: 1}, 0x70)}},
		{PerfPowerSaver, []qnnfake.PowerVote{corners(qnnfake.PowerVote{Option: 1, PowerMode: 4, DcvsEnable: 1, SleepLatency: 1000, Call: 1}, 0x40)}},
	} {
		t.Run(tc.mode.String(), func(t *testing.T) {
			fk := fakeLib(t, qnnfake.Variant{})
			l := openFake(t, fk)
			s := newSession(t, l, SessionOptions{ContextPath: writeBinary(t, actionBinary(g)), PerfMode: tc.mode, RPCVote: true})
			if s.PerfMode() != tc.mode {
				t.Errorf("PerfMode %v", s.PerfMode())
			}
			if got := fk.PowerVotes(); !slices.Equal(got, tc.want) {
				t.Errorf("votes on open:\n got %+v\nwant %+v", got, tc.want)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			want := tc.want
			if tc.mode != PerfDefault {
				d := down
				d.Call = want[len(want)-1].Call + 1
				want = append(slices.Clone(want), d)
			}
			if got := fk.PowerVotes(); !slices.Equal(got, want) {
				t.Errorf("votes after close:\n got %+v\nwant %+v", got, want)
			}
			wantIDs := 0
			if tc.mode != PerfDefault {
				wantIDs = 1
			}
			if fk.Calls("createPowerConfigId") != wantIDs || fk.Calls("destroyPowerConfigId") != wantIDs {
				t.Errorf("power config ids created %d, destroyed %d, want %d", fk.Calls("createPowerConfigId"), fk.Calls("destroyPowerConfigId"), wantIDs)
			}
			checkClean(t, fk)
		})
	}
}

func TestPerfInfrastructureNotSupported(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l := openFake(t, fk)
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	fk.FailCall("deviceGetInfrastructure", 1000, 0)
	path := writeBinary(t, actionBinary(g))
	for range 2 {
		s := newSession(t, l, SessionOptions{ContextPath: path, PerfMode: PerfBurst})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if w := l.Warnings(); len(w) != 1 || !strings.Contains(w[0], "performance mode burst not applied") ||
		!strings.Contains(w[0], "QNN_COMMON_ERROR_NOT_SUPPORTED (1000)") {
		t.Errorf("warnings %q", w)
	}
	if len(fk.PowerVotes()) != 0 || fk.Calls("createPowerConfigId") != 0 {
		t.Error("votes cast without perf infrastructure")
	}
	checkClean(t, fk)
}

func TestProfiling(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	fk.SetProfileMicros(2345)
	l := openFake(t, fk)
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	path := writeBinary(t, actionBinary(g))
	s := newSession(t, l, SessionOptions{ContextPath: path, Profiling: true})
	gr, _ := s.Graph("action_step")
	in := randomInputs(g, 1)
	for range 2 {
		tm, err := gr.Run(t.Context(), in, outputsFor(g))
		if err != nil {
			t.Fatal(err)
		}
		if !tm.Profiled || tm.Device != 2345*time.Microsecond || tm.Host <= 0 {
			t.Errorf("timing %+v, want device 2.345ms", tm)
		}
	}
	// A profiler that cannot be read costs the step its device time, not
	// its output: the run succeeds with the right prediction, the timing
	// is marked missing, and one warning (for both failures) says why.
	want := qnnfake.Expected(g, in)
	for _, fn := range []string{"profileGetEvents", "profileGetEventData"} {
		fk.FailCall(fn, 12000, 1)
		out := outputsFor(g)
		tm, err := gr.Run(t.Context(), in, out)
		if err != nil {
			t.Fatalf("%s failing failed the run: %v", fn, err)
		}
		if tm.Profiled || tm.Device != 0 || tm.Host <= 0 {
			t.Errorf("%s failing: timing %+v, want Profiled false", fn, tm)
		}
		if !slices.Equal(out[0], want[0]) {
			t.Errorf("%s failing: the output was not kept", fn)
		}
	}
	if w := l.Warnings(); len(w) != 1 || !strings.Contains(w[0], `graph "action_step": device execute times are missing`) ||
		!strings.Contains(w[0], "profileGetEvents: QNN_PROFILE_ERROR_INVALID_HANDLE (12000)") {
		t.Errorf("warnings %q, want one naming the profileGetEvents failure", w)
	}
	if st := gr.Stats(); st.ProfileFailures != 2 || st.Executes != 4 {
		t.Errorf("stats %+v, want 2 profile failures in 4 executes", st)
	}
	if tm, err := gr.Run(t.Context(), in, outputsFor(g)); err != nil || !tm.Profiled || tm.Device != 2345*time.Microsecond {
		t.Errorf("after the failures: timing %+v, %v", tm, err)
	}
	s2 := newSession(t, l, SessionOptions{ContextPath: path})
	gr2, _ := s2.Graph("action_step")
	tm, err := gr2.Run(t.Context(), in, outputsFor(g))
	if err != nil || tm.Profiled || tm.Device != 0 {
		t.Errorf("unprofiled timing %+v, %v", tm, err)
	}
	if fk.Calls("profileCreate") != 1 {
		t.Errorf("profileCreate called %d times", fk.Calls("profileCreate"))
	}
}

func TestSharedBuffers(t *testing.T) {
	d := smallDims()
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat16, d)
	fk := fakeLib(t, qnnfake.Variant{})
	l := openFake(t, fk)
	s := newSession(t, l, SessionOptions{ContextPath: writeBinary(t, actionBinary(g))})
	gr, _ := s.Graph("action_step")
	in := randomInputs(g, 21)
	// Data written before sharing is carried over.
	if err := gr.SetInput(gr.InputIndex("context"), in[4]); err != nil {
		t.Fatal(err)
	}
	constants := []string{"video_keys", "video_values", "context", "context_mask"}
	ok, err := gr.ShareInputs(constants...)
	if err != nil || !ok {
		t.Fatalf("ShareInputs: %v, %v", ok, err)
	}
	if ok, err := gr.ShareInputs("video_keys"); !ok || err != nil {
		t.Errorf("sharing again: %v %v", ok, err)
	}
	if st := gr.Stats(); !slices.Equal(st.Shared, constants) {
		t.Errorf("shared %v", st.Shared)
	}
	for _, name := range []string{"video_keys", "video_values", "context_mask"} {
		i := gr.InputIndex(name)
		if err := gr.SetInput(i, in[i]); err != nil {
			t.Fatal(err)
		}
	}
	step := make([][]float32, len(in))
	raw0, mh0, w0 := fk.RawBytesRead(), fk.MemHandleBytesRead(), gr.Stats().BytesWritten
	const steps = 3
	for k := range steps {
		step[0], step[1] = randomInputs(g, uint64(30+k))[0], []float32{float32(900 - 100*k)}
		in[0], in[1] = step[0], step[1]
		out := runGraph(t, gr, step, outLens(g))
		if want := qnnfake.Expected(g, in); !slices.Equal(out[0], want[0]) {
			t.Fatalf("step %d through shared buffers differs from the expected function", k)
		}
	}
	stepBytes := uint64((d.LatentLen() + 1) * 2) // latents + timestep in FLOAT_16
	constBytes := uint64((2*d.KVLen() + d.ContextLen() + d.ContextTokens) * 2)
	if got := (fk.RawBytesRead() - raw0) / steps; got != stepBytes {
		t.Errorf("RAW bytes per step %d, want latents+timestep = %d", got, stepBytes)
	}
	if got := (fk.MemHandleBytesRead() - mh0) / steps; got != constBytes {
		t.Errorf("shared bytes per step %d, want %d", got, constBytes)
	}
	if got := (gr.Stats().BytesWritten - w0) / steps; got != stepBytes {
		t.Errorf("host bytes written per step %d, want %d", got, stepBytes)
	}
	if _, err := gr.ShareInputs("nope"); err == nil || !strings.Contains(err.Error(), `no input "nope" to share`) {
		t.Errorf("unknown input: %v", err)
	}
	if len(l.Warnings()) != 0 {
		t.Errorf("warnings %q", l.Warnings())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkClean(t, fk)
}

func TestSharedBufferFallback(t *testing.T) {
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	for _, tc := range []struct {
		name    string
		variant qnnfake.Variant
		setup   func(*qnnfake.Lib)
		rounds  int
		want    string
	}{
		{"rpcmem library lacks symbols", qnnfake.Variant{NoRPCMem: true}, nil, 2, "does not export rpcmem_alloc"},
		{"rpcmem_alloc returns NULL", qnnfake.Variant{}, func(fk *qnnfake.Lib) { fk.SetRPCMemAvailable(false) }, 2, "rpcmem_alloc of"},
		{"rpcmem_to_fd fails", qnnfake.Variant{}, func(fk *qnnfake.Lib) { fk.FailCall("rpcmem_to_fd", 1, 0) }, 2, "rpcmem_to_fd for input"},
		{"memRegister fails", qnnfake.Variant{}, func(fk *qnnfake.Lib) { fk.FailCall("memRegister", 8005, 0) }, 2,
			`memRegister "video_keys": QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE (8005)`},
		{"memRegister fails on the third", qnnfake.Variant{}, func(fk *qnnfake.Lib) { fk.FailCall("memRegister", 8005, 3) }, 1,
			`memRegister "context": QNN_MEM_ERROR_UNSUPPORTED_MEMTYPE (8005)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fk := fakeLib(t, tc.variant)
			if tc.setup != nil {
				tc.setup(fk)
			}
			var logged []string
			var mu sync.Mutex
			opts := libOpts(fk)
			opts.Logf = func(format string, args ...any) {
				mu.Lock()
				logged = append(logged, fmt.Sprintf(format, args...))
				mu.Unlock()
			}
			l, err := Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			path := writeBinary(t, actionBinary(g))
			for round := range tc.rounds {
				s := newSession(t, l, SessionOptions{ContextPath: path})
				gr, _ := s.Graph("action_step")
				ok, err := gr.ShareInputs("video_keys", "video_values", "context", "context_mask")
				if err != nil || ok {
					t.Fatalf("round %d: ShareInputs = %v, %v; want a fallback", round, ok, err)
				}
				in := randomInputs(g, 2)
				raw0 := fk.RawBytesRead()
				out := runGraph(t, gr, in, outLens(g))
				if want := qnnfake.Expected(g, in); !slices.Equal(out[0], want[0]) {
					t.Fatal("fallback run differs from the expected function")
				}
				all := uint64(0)
				for _, ti := range g.Inputs {
					all += ti.Elements() * 4
				}
				if got := fk.RawBytesRead() - raw0; got != all {
					t.Errorf("RAW bytes %d, want every input (%d)", got, all)
				}
				if fk.MemHandleBytesRead() != 0 {
					t.Error("shared memory read after a fallback")
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				checkClean(t, fk)
			}
			if len(logged) != 1 || len(l.Warnings()) != 1 {
				t.Fatalf("fallback reported %d times (warnings %d), want once: %q", len(logged), len(l.Warnings()), logged)
			}
			if !strings.Contains(logged[0], "shared buffers unavailable, using RAW client buffers") || !strings.Contains(logged[0], tc.want) {
				t.Errorf("warning %q lacks %q", logged[0], tc.want)
			}
		})
	}
}

func TestConcurrentRuns(t *testing.T) {
	fk := fakeLib(t, qnnfake.Variant{})
	l := openFake(t, fk)
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	s := newSession(t, l, SessionOptions{ContextPath: writeBinary(t, actionBinary(g)), Profiling: true})
	gr, _ := s.Graph("action_step")
	in := randomInputs(g, 8)
	want := qnnfake.Expected(g, in)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for range 20 {
				out := outputsFor(g)
				if _, err := gr.Run(t.Context(), in, out); err != nil {
					errs <- err
					return
				}
				if !slices.Equal(out[0], want[0]) {
					errs <- errors.New("wrong result under concurrency")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if gr.Stats().Executes != 80 {
		t.Errorf("%d executes", gr.Stats().Executes)
	}
}

// TestPerfVoteParts checks the DCVS and RPC parts of the vote are sent in
// separate setPowerConfig calls, that each part's failure is a warning
// naming that part (the session still opens), that the RPC part is sent only
// when RPCVote asks for it (off by default), and that the down-vote follows only an applied DCVS part.
func TestPerfVoteParts(t *testing.T) {
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	for _, tc := range []struct {
		name     string
		fail     int  // setPowerConfig call that fails (0 = none)
		rpc      bool // SessionOptions.RPCVote
		status   PerfStatus
		options  [][]uint32 // options of each setPowerConfig call that was accepted, the down-vote included
		warnings []string
	}{
		{"both applied", 0, true, PerfStatus{Mode: PerfBurst, DCVS: VoteApplied, RPC: VoteApplied},
			[][]uint32{{1}, {2, 3}, {1}}, nil},
		// A transport that refused the DCVS part is not sent the RPC part
		// (the x86 HTP emulator crashes on it after refusing the first).
		{"DCVS refused", 1, true, PerfStatus{Mode: PerfBurst, DCVS: VoteFailed, RPC: VoteNotSent},
			nil, []string{"performance mode burst: the DCVS part of the vote (power mode, voltage corners, sleep latency) was not applied: qnnrt: setPowerConfig: QNN_HTP_PERF_INFRASTRUCTURE_ERROR_TRANSPORT (13003)",
				"; the RPC part is not sent after it"}},
		{"RPC refused", 2, true, PerfStatus{Mode: PerfBurst, DCVS: VoteApplied, RPC: VoteFailed},
			[][]uint32{{1}, {1}}, []string{"performance mode burst: the RPC part of the vote (control latency 100 us, polling time 9999 us) was not applied: qnnrt: setPowerConfig: QNN_HTP_PERF_INFRASTRUCTURE_ERROR_TRANSPORT (13003)"}},
		// The default: the RPC part has its own switch, off until verified
		// on the device, whatever became of the DCVS part.
		{"RPC off", 0, false, PerfStatus{Mode: PerfBurst, DCVS: VoteApplied, RPC: VoteSkipped},
			[][]uint32{{1}, {1}}, nil},
		{"RPC off, DCVS refused", 1, false, PerfStatus{Mode: PerfBurst, DCVS: VoteFailed, RPC: VoteSkipped},
			nil, []string{"the DCVS part of the vote (power mode, voltage corners, sleep latency) was not applied"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fk := fakeLib(t, qnnfake.Variant{})
			l := openFake(t, fk)
			if tc.fail != 0 {
				fk.FailCall("setPowerConfig", 13003, tc.fail)
			}
			s := newSession(t, l, SessionOptions{ContextPath: writeBinary(t, actionBinary(g)), PerfMode: PerfBurst, RPCVote: tc.rpc})
			if got := s.PerfStatus(); got != tc.status {
				t.Errorf("status %+v, want %+v", got, tc.status)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			var calls [][]uint32
			last := 0
			for _, v := range fk.PowerVotes() {
				if v.Call != last {
					calls = append(calls, nil)
					last = v.Call
				}
				calls[len(calls)-1] = append(calls[len(calls)-1], v.Option)
			}
			if fmt.Sprint(calls) != fmt.Sprint(tc.options) {
				t.Errorf("setPowerConfig calls carried options %v, want %v", calls, tc.options)
			}
			w := strings.Join(l.Warnings(), "\n")
			if (len(tc.warnings) == 0) != (w == "") || len(l.Warnings()) > 1 {
				t.Fatalf("warnings %q, want one with %q", w, tc.warnings)
			}
			for _, part := range tc.warnings {
				if !strings.Contains(w, part) {
					t.Errorf("warning %q lacks %q", w, part)
				}
			}
			checkClean(t, fk)
		})
	}
}

// TestPerfNotAppliedReasons checks the warning names the real cause when
// no vote can be cast.
func TestPerfNotAppliedReasons(t *testing.T) {
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, smallDims())
	for _, tc := range []struct {
		name  string
		setup func(*qnnfake.Lib)
		want  string
	}{
		{"no device capability", func(fk *qnnfake.Lib) { fk.SetDeviceSupported(false) },
			"the backend reports no device capability (propertyHasCapability(QNN_PROPERTY_GROUP_DEVICE) answered 1000 QNN_PROPERTY_NOT_SUPPORTED, not 0 QNN_PROPERTY_SUPPORTED), so no device was created"},
		{"no deviceGetInfrastructure", func(fk *qnnfake.Lib) { fk.OmitFunction("deviceGetInfrastructure", true) },
			`deviceCreate succeeded but provider "FAKE_HTP" (backend 6, API 2.32.0, backend API 5.43.0) has no deviceGetInfrastructure (its table entry 39 is NULL)`},
		{"no deviceCreate", func(fk *qnnfake.Lib) { fk.OmitFunction("deviceCreate", true) },
			`provider "FAKE_HTP" (backend 6, API 2.32.0, backend API 5.43.0) has no propertyHasCapability or deviceCreate entry, so no device was created`},
		{"infrastructure not supported", func(fk *qnnfake.Lib) { fk.FailCall("deviceGetInfrastructure", 1000, 0) },
			"deviceCreate succeeded but qnnrt: deviceGetInfrastructure: QNN_COMMON_ERROR_NOT_SUPPORTED (1000)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fk := fakeLib(t, qnnfake.Variant{})
			tc.setup(fk)
			l := openFake(t, fk)
			s := newSession(t, l, SessionOptions{ContextPath: writeBinary(t, actionBinary(g)), PerfMode: PerfBurst})
			w := l.Warnings()
			if len(w) != 1 || !strings.Contains(w[0], "qnnrt: performance mode burst not applied: "+tc.want) {
				t.Errorf("warnings %q, want one containing %q", w, tc.want)
			}
			if st := s.PerfStatus(); st.DCVS != VoteNotSent || st.RPC != VoteNotSent || !strings.Contains(st.Reason, tc.want) {
				t.Errorf("status %+v", st)
			}
			if len(fk.PowerVotes()) != 0 {
				t.Errorf("votes cast: %+v", fk.PowerVotes())
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			checkClean(t, fk)
		})
	}
}
