package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/expert/htp/prefill"
	"github.com/fastwam/actionexpert/golden/tiny"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/qnnrt"
	"github.com/fastwam/actionexpert/replay"
	"github.com/fastwam/actionexpert/worldmodel"
)

// The files of a world-model folder (-world DIR), as golden/tiny/world
// lays them out.
const (
	worldDiTFile   = "dit.safetensors"
	worldVAEFile   = "vae.safetensors"
	worldStatsFile = "dataset_stats.json"
	worldTextDir   = "text"
)

// embeddedWorld names the embedded tiny world model in descriptions.
const embeddedWorld = "embedded golden/tiny/world"

// worldFlags choose the world model's files.
type worldFlags struct {
	dir, dit, vae, stats, statsKey, text string
	blas                                 string
	backend                              string // -world-backend: cpu or htp
	contextPaths                         string // -world-context-paths
	// attached, when set, is the world model's chain in the action
	// expert's session (-world-model same_process): open uses it rather
	// than opening a chain of its own, and does not close it.
	attached worldmodel.KVStage
	// fs is the command's flag set: -world-backend htp reads the QNN
	// library flags of the command (-backend-lib, -system-lib, ...) from
	// it when the command has them, rather than defining its own.
	fs *flag.FlagSet
}

// The world model's backends (-world-backend).
const (
	worldBackendCPU = "cpu"
	worldBackendHTP = "htp"
)

func (f *worldFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.dir, "world", "", "world model `DIR` holding "+worldDiTFile+" (video DiT + proprio encoder), "+worldVAEFile+", "+worldStatsFile+" and the text cache "+worldTextDir+"/ (default: the embedded tiny world model, golden/tiny/world)")
	fs.StringVar(&f.dit, "dit", "", "world model: the video DiT weights (overrides -world's)")
	fs.StringVar(&f.vae, "vae", "", "world model: the VAE encoder weights (overrides -world's)")
	fs.StringVar(&f.stats, "stats", "", "world model: the checkpoint's dataset_stats.json (overrides -world's; also the actions.* statistics unless -p actions.stats_file names another)")
	fs.StringVar(&f.statsKey, "stats-key", "default", "world model: the state key of the statistics")
	fs.StringVar(&f.text, "text-cache", "", "world model: the text cache folder (overrides -world's)")
	fs.StringVar(&f.blas, "world-blas", "auto", "world model: sgemm, auto, openblas or gonum")
	fs.StringVar(&f.backend, "world-backend", worldBackendCPU, "world model: where the VAE encoder and the DiT prefill run, cpu or htp (the graphs of -world-context-paths on the NPU, in a session of their own, or in the expert's with replay's -backend htp -world-model same_process; the preprocessing, text cache and proprio token stay on the CPU; the QNN libraries are those of -backend-lib, -system-lib, -rpcmem-lib, -adsp-path, -perf and -shared-buffers where the command has them, else qnnrt's defaults)")
	fs.StringVar(&f.contextPaths, "world-context-paths", "", "world model, -world-backend htp: comma-separated context binaries holding vae_encoder and prefill_0 .. prefill_{k-1} (any order and grouping)")
	f.fs = fs
}

// flagValue is the value of the command's flag name, def when the command
// has no such flag.
func (f *worldFlags) flagValue(name, def string) string {
	if f.fs == nil {
		return def
	}
	if fl := f.fs.Lookup(name); fl != nil {
		return fl.Value.String()
	}
	return def
}

// stderr is where the chain's log and close errors go: the command's
// output.
func (f *worldFlags) stderr() io.Writer {
	if f.fs == nil {
		return os.Stderr
	}
	return f.fs.Output()
}

// openChain opens the world model's HTP graph chain (-world-backend htp)
// in a session of its own.
func (f *worldFlags) openChain(ctx context.Context) (*prefill.Chain, error) {
	paths, err := params.ParsePaths(f.contextPaths)
	if err != nil {
		return nil, usageError("-world-context-paths: %v", err)
	}
	if len(paths) == 0 {
		return nil, usageError("-world-backend htp needs -world-context-paths with the binaries of vae_encoder and prefill_0 .. prefill_{k-1}")
	}
	if f.flagValue("backend", "") == params.BackendHTP && f.flagValue("world-model", "") == params.WorldModelSameProcess {
		// The command opens the expert first and sets f.attached.
		return nil, errors.New("-world-backend htp with -backend htp -world-model " + params.WorldModelSameProcess + ": the expert's session was not opened before the world model")
	}
	mode, err := qnnrt.ParsePerfMode(f.flagValue("perf", "burst"))
	if err != nil {
		return nil, usageError("-perf: %v", err)
	}
	stderr := f.stderr()
	chain, err := prefill.New(ctx, prefill.Options{
		ContextPaths: paths,
		BackendLib:   f.flagValue("backend-lib", qnnrt.DefaultBackendLib), SystemLib: f.flagValue("system-lib", qnnrt.DefaultSystemLib),
		RPCMemLib: f.flagValue("rpcmem-lib", qnnrt.DefaultRPCMemLib), ADSPLibraryPath: f.flagValue("adsp-path", ""),
		PerfMode: mode, SharedBuffers: f.flagValue("shared-buffers", "true") == "true",
		LogSink: qnnLogWriter(stderr),
		Logf:    func(format string, args ...any) { fmt.Fprintf(stderr, "world htp: "+format+"\n", args...) },
	})
	if err != nil {
		return nil, fmt.Errorf("-world-backend htp: %w", withLoadHint(err))
	}
	return chain, nil
}

// worldFlagsSet names the first world-model flag among set, "" for none.
func worldFlagsSet(set map[string]bool) string {
	for _, n := range []string{"world", "dit", "vae", "stats", "stats-key", "text-cache", "world-blas", "world-backend", "world-context-paths"} {
		if set[n] {
			return n
		}
	}
	return ""
}

// cliWorld is the world model as the replay runs it: worldmodel.Model
// behind replay.WorldModel, writing its K/V straight into the replay's
// float32 buffers.
type cliWorld struct {
	m         *worldmodel.Model
	frame     worldmodel.FrameConfig
	desc      string // where its files come from
	statsPath string
}

// Dims are the model's output sizes.
func (w *cliWorld) Dims() replay.WorldDims {
	d := w.m.Dims()
	return replay.WorldDims{Layers: d.Layers, VideoTokens: d.VideoTokens, AttnWidth: d.Width, ContextTokens: d.ContextRows, TextDim: d.TextDim}
}

// Run runs the world model on obs into out, and reports its stage times.
func (w *cliWorld) Run(ctx context.Context, obs *replay.Observation, out *replay.WorldOutput) error {
	o := worldmodel.Output{
		Keys: expert.TensorView{F32: out.Keys}, Values: expert.TensorView{F32: out.Values},
		Context: out.Context, Mask: out.Mask,
	}
	if err := w.m.Run(ctx, worldmodel.Observation{Images: obs.Images, State: obs.State, Instruction: obs.Instruction}, &o); err != nil {
		return err
	}
	t := o.Times
	out.Stages = append(out.Stages,
		replay.Stage{Name: "preprocess", Duration: t.Preprocess}, replay.Stage{Name: "vae", Duration: t.VAE},
		replay.Stage{Name: "text", Duration: t.Text}, replay.Stage{Name: "proprio", Duration: t.Proprio},
		replay.Stage{Name: "prefill", Duration: t.Prefill})
	return nil
}

// open loads the world model: the files of -world (or the embedded tiny
// model, extracted to a temporary folder that cleanup removes), each
// replaced by its own flag when given.
func (f *worldFlags) open(ctx context.Context) (w *cliWorld, cleanup func(), err error) {
	cleanup = func() {}
	var kv worldmodel.KVStage
	switch f.backend {
	case worldBackendCPU:
		if f.contextPaths != "" {
			return nil, nil, usageError("-world-context-paths applies with -world-backend htp only")
		}
	case worldBackendHTP:
		if f.vae != "" {
			return nil, nil, usageError("-vae: with -world-backend htp the VAE encoder is the vae_encoder graph of -world-context-paths")
		}
		if f.attached != nil {
			kv = f.attached // the expert's backend closes it
			break
		}
		chain, err := f.openChain(ctx)
		if err != nil {
			return nil, nil, err
		}
		kv = chain
		cleanup = func() {
			if err := chain.Close(); err != nil {
				fmt.Fprintf(f.stderr(), "world htp: %v\n", err)
			}
		}
	default:
		return nil, nil, usageError("-world-backend %q: want %s or %s", f.backend, worldBackendCPU, worldBackendHTP)
	}
	dir, desc := f.dir, f.dir
	if dir == "" {
		if f.dit != "" && f.vae != "" && f.stats != "" && f.text != "" {
			desc = "files given"
		} else {
			tmp, err := extractWorld()
			if err != nil {
				cleanup()
				return nil, nil, err
			}
			closeKV := cleanup
			cleanup = func() { os.RemoveAll(tmp); closeKV() }
			dir, desc = tmp, embeddedWorld
		}
	} else if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		cleanup()
		return nil, nil, usageError("-world %s: not a folder (want one holding %s, %s, %s and %s/)", dir, worldDiTFile, worldVAEFile, worldStatsFile, worldTextDir)
	}
	pick := func(flag, name string) string {
		if flag != "" {
			return flag
		}
		return filepath.Join(dir, name)
	}
	release := cleanup // the named result is nil once an error is returned
	defer func() {
		if err != nil {
			release()
		}
	}()
	gemm, gemmName, err := cpu.PickGemm(f.blas, "", 0)
	if err != nil {
		return nil, nil, fmt.Errorf("-world-blas %s: %w", f.blas, err)
	}
	statsPath := pick(f.stats, worldStatsFile)
	frame := worldmodel.LiberoFrame()
	m, err := worldmodel.LoadModel(ctx, worldmodel.ModelOptions{
		DiTWeights: pick(f.dit, worldDiTFile), VAEWeights: pick(f.vae, worldVAEFile),
		StateStats: statsPath, StateKey: f.statsKey,
		TextCache: worldmodel.TextCache{Dir: pick(f.text, worldTextDir)},
		Frame:     frame, Gemm: gemm, KV: kv,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("world model (%s): %w", desc, err)
	}
	d := m.Dims()
	desc = fmt.Sprintf("%s (K/V [%d, 1, %d, %d], context [1, %d, %d], %s)", desc, d.Layers, d.VideoTokens, d.Width, d.ContextRows, d.TextDim, gemmName)
	if c, ok := kv.(fmt.Stringer); ok { // *prefill.Chain or *sameProcessKV
		desc += fmt.Sprintf("; VAE encoder and prefill on the HTP: %s", c)
	}
	closeFiles := cleanup
	cleanup = func() { m.Close(); closeFiles() } // the model's workers first, then the chain and the files
	return &cliWorld{m: m, frame: frame, desc: desc, statsPath: statsPath}, cleanup, nil
}

// extractWorld copies the embedded tiny world model to a new temporary
// folder and returns it.
func extractWorld() (string, error) {
	tmp, err := os.MkdirTemp("", "fastwam-world-*")
	if err != nil {
		return "", fmt.Errorf("%s: %w", embeddedWorld, err)
	}
	src := tiny.WorldFS()
	err = fs.WalkDir(src, "world", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, rerr := filepath.Rel("world", filepath.FromSlash(path))
		if rerr != nil {
			return rerr
		}
		dst := filepath.Join(tmp, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		data, err := fs.ReadFile(src, path)
		if err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("%s: %w", embeddedWorld, err)
	}
	return tmp, nil
}
