package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/htp"
	"github.com/fastwam/actionexpert/node/backends"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/qnnrt"
)

// htpFlags are the HTP backend's options, as flags.
type htpFlags struct {
	context    string
	paths      string // comma-separated further binaries (htp.context_paths)
	worldModel string // htp.world_model
	graph      string
	backendLib string
	systemLib  string
	rpcmemLib  string
	adspPath   string
	perf       string
	profile    bool
	shared     bool
	logLevel   int
	rpcVote    bool
	headDim    int
	stderr     io.Writer
}

func (f *htpFlags) register(fs *flag.FlagSet) {
	f.stderr = fs.Output()
	fs.StringVar(&f.context, "context", "", "HTP backend: the action_step context binary (ctx/action_step.bin of the bundle)")
	fs.StringVar(&f.paths, "context-paths", "", "HTP backend: comma-separated further context binaries loaded in the same session (one spill-fill group): the split bundle's action_context and action_step_ctx, and with -world-model same_process the world model's vae_encoder and prefill_i (htp.context_paths)")
	fs.StringVar(&f.worldModel, "world-model", params.WorldModelOtherProcess, "HTP backend: where the world model's graphs run, other_process or same_process (their contexts then resident in this process's session, within its ~6.5 GB; replay with -world-backend htp runs them there, writing the K/V into the expert's inputs; otherwise the K/V come from the command's input) (htp.world_model)")
	fs.StringVar(&f.graph, "graph", htp.DefaultGraphName, "HTP backend: graph name inside the context binary")
	fs.StringVar(&f.backendLib, "backend-lib", qnnrt.DefaultBackendLib, "HTP backend: QNN backend library (path or soname)")
	fs.StringVar(&f.systemLib, "system-lib", qnnrt.DefaultSystemLib, "QNN system library (path or soname)")
	fs.StringVar(&f.rpcmemLib, "rpcmem-lib", qnnrt.DefaultRPCMemLib, "HTP backend: library with rpcmem_alloc (shared buffers)")
	fs.StringVar(&f.adspPath, "adsp-path", "", "HTP backend: ADSP_LIBRARY_PATH for the DSP skel libraries (default: keep the environment's, else the backend library's directory)")
	fs.StringVar(&f.perf, "perf", "burst", "HTP backend: performance vote: burst, high_performance, balanced, power_saver or default")
	fs.BoolVar(&f.profile, "profile", true, "HTP backend: profile every execute (basic level) and print device execute times")
	fs.BoolVar(&f.shared, "shared-buffers", true, "HTP backend: keep the per-chunk inputs in registered rpcmem buffers (falls back to RAW buffers when unavailable)")
	fs.IntVar(&f.headDim, "head-dim", htp.DefaultHeadDim, "HTP backend: attention head width used to read the key width as heads x head dim")
	fs.IntVar(&f.logLevel, "qnn-log-level", 0, "HTP backend: QNN log level, 1 (error), 2 (warn), 3 (info), 4 (verbose) to 5 (debug); the library's lines up to it are printed to stderr; 0 means 2")
	fs.BoolVar(&f.rpcVote, "qnn-rpc-vote", false, "HTP backend: also send the RPC control-latency and polling-time options of the performance vote (their own setPowerConfig call); off until verified on the device: Qualcomm's x86 HTP emulator crashes on them")
}

// qnnLogWriter prints QNN log lines to w as "qnn <LEVEL>: <text>", one
// write per line; the lines may come from several threads at once.
func qnnLogWriter(w io.Writer) func(qnnrt.LogLine) {
	var mu sync.Mutex
	return func(l qnnrt.LogLine) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "qnn %s: %s\n", l.Level, l.Text)
	}
}

func (f *htpFlags) open(ctx context.Context) (expert.Backend, string, error) {
	paths, err := params.ParsePaths(f.paths)
	if err != nil {
		return nil, "", usageError("-context-paths: %v", err)
	}
	if f.context == "" && len(paths) == 0 {
		return nil, "", usageError("-backend htp needs -context <action_step context binary> (or -context-paths with the split bundle's binaries)")
	}
	if f.worldModel != params.WorldModelOtherProcess && f.worldModel != params.WorldModelSameProcess {
		return nil, "", usageError("-world-model %q: want %s or %s", f.worldModel, params.WorldModelOtherProcess, params.WorldModelSameProcess)
	}
	layout, err := backends.PlanHTP(params.HTPParams{ContextBinary: f.context, ContextPaths: paths, WorldModel: f.worldModel,
		GraphName: f.graph, SystemLibrary: f.systemLib})
	if err != nil {
		return nil, "", withLoadHint(err)
	}
	b, desc, err := f.openLayout(ctx, layout)
	if err != nil {
		return nil, "", err
	}
	return htpTimed{b}, desc, nil
}

// openLayout opens the HTP backend on the binaries of a checked layout
// (backends.PlanHTP) with the command's options, and describes it for the
// backend line.
func (f *htpFlags) openLayout(ctx context.Context, layout backends.HTPLayout) (*htp.Backend, string, error) {
	mode, err := qnnrt.ParsePerfMode(f.perf)
	if err != nil {
		return nil, "", usageError("-perf: %v", err)
	}
	if f.logLevel < 0 || f.logLevel > int(qnnrt.LogDebug) {
		return nil, "", usageError("-qnn-log-level %d: want 1 (error) to 5 (debug), or 0 for the default", f.logLevel)
	}
	logf := func(format string, args ...any) { fmt.Fprintf(f.stderr, "htp: "+format+"\n", args...) }
	b, err := htp.New(ctx, htp.Options{
		ContextPaths: layout.Paths, CoGraphs: layout.WorldModel, GraphName: f.graph,
		BackendLib: f.backendLib, SystemLib: f.systemLib, RPCMemLib: f.rpcmemLib,
		ADSPLibraryPath: f.adspPath, PerfMode: mode, Profiling: f.profile,
		SharedBuffers: f.shared, LogLevel: f.logLevel, Logf: logf, HeadDim: f.headDim,
		LogSink: qnnLogWriter(f.stderr), RPCVote: f.rpcVote,
	})
	if err != nil {
		return nil, "", withLoadHint(err)
	}
	return b, describeLayout(b, layout, b.PerfStatus().String()), nil
}

// htpTimed exposes the HTP backend's profiled execute times to parity.
type htpTimed struct{ *htp.Backend }

// ExecuteTimes returns the device execute time of the last chunk's steps,
// -1 for a step whose profile could not be read.
func (h htpTimed) ExecuteTimes() []time.Duration {
	if _, ok := h.Profile(); !ok {
		return nil
	}
	st := h.StepTimes()
	ts := make([]time.Duration, len(st))
	for i, t := range st {
		ts[i] = t.Device
		if !t.Profiled {
			ts[i] = -1
		}
	}
	return ts
}

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("inspect", stdout, stderr, "[flags] <context.bin>\n\nLists the graphs of a QNN context binary with their input and output tensors\n(name, type, shape, quantisation) and the SoC, architecture and build ids.")
	systemLib := fs.String("system-lib", qnnrt.DefaultSystemLib, "QNN system library (path or soname)")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return usageError("want exactly one context binary, got %d arguments", fs.NArg())
	}
	if _, err := os.Stat(fs.Arg(0)); err != nil {
		return err
	}
	return withLoadHint(qnnrt.Inspect(stdout, fs.Arg(0), qnnrt.Options{SystemPath: *systemLib}))
}

// withLoadHint adds to an error from loading a QNN library
// (*qnnrt.LoadError) what to do about it: where the library was looked
// for, where it comes from, and the flag or environment variable that
// points at it. Other errors, and nil, are returned as they are.
func withLoadHint(err error) error {
	var le *qnnrt.LoadError
	if !errors.As(err, &le) {
		return err
	}
	name := filepath.Base(le.Path)
	flagName := "-" + le.Library + "-lib" // -backend-lib, -system-lib, -rpcmem-lib
	where := "at that path only"
	fix := fmt.Sprintf("point %s at the file (%s <dir>/%s)", flagName, flagName, name)
	if !strings.Contains(le.Path, "/") {
		ldPath := os.Getenv("LD_LIBRARY_PATH")
		if ldPath == "" {
			ldPath = "unset"
		}
		where = fmt.Sprintf("by the dynamic loader in LD_LIBRARY_PATH (%s), the ld.so cache and /lib, /usr/lib", ldPath)
		fix += " or add its folder to LD_LIBRARY_PATH"
	}
	return fmt.Errorf("%w\n  %s (QNN's %s library) was looked for %s. It comes with Qualcomm's QNN SDK (QAIRT), "+
		"in lib/<target>/ (aarch64-oe-linux-gcc11.2 on the IQ-9075, x86_64-linux-clang on a PC), and is not installed with fastwam: "+
		"%s (docs/deploy-iq9075.md)", err, name, le.Library, where, fix)
}

// closeBackend closes b and returns what closing reported: the HTP
// backend's down-vote, power-config and free calls fail there, and a
// command must say so rather than exit 0 with the DSP still voted up.
func closeBackend(b expert.Backend) error {
	if err := b.Close(); err != nil {
		return fmt.Errorf("closing the backend: %w", err)
	}
	return nil
}
