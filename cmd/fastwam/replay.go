package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/internal/rosparam"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/replay"
	"github.com/fastwam/actionexpert/worldmodel"
)

// progressAutoMin is the bag size (inputs) from which -progress auto
// prints progress lines.
const progressAutoMin = 20

type replayOpts struct {
	backend  string
	minCos   float64
	maxErr   float64
	caches   bool    // -caches: check a whole-policy recording's caches
	cacheErr float64 // -cache-max-err: their tolerance, 0 bit for bit
	timeout  time.Duration
	out      string
	plot     string
	json     string
	junit    string
	progress string
	cpu      cpuFlags
	htp      htpFlags
	world    worldFlags
	node     nodeFlags
	files    stringList // -params-file, in order
	stderr   io.Writer
	// same is the expert's backend with the world model's chain in its
	// session (-world-model same_process -world-backend htp), opened
	// before the world model; sameDesc describes it.
	same     *sameProcess
	sameDesc string
	set      map[string]bool // flags given on the command line
}

func runReplay(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlags("replay", stdout, stderr, "[flags] [bag]\n\n"+
		"Replays the VideoKVCache and TextContext messages of a rosbag2 bag (a folder, an .mcap file or a\n"+
		".db3 file: MCAP storage or sqlite3, Humble's `ros2 bag record` default)\n"+
		"through the node, as ROS would deliver them, and compares the ActionChunks it publishes with\n"+
		"those recorded on its output topic (matched by stamp): a table per chunk, and exit status 1\n"+
		"naming the chunks below the gate, not produced, or refused by the actions.* limits. A recorded\n"+
		"chunk whose inputs are not in the bag (a recording started after they were published) is NOT\n"+
		"COMPARABLE: reported and counted, it fails nothing; a bag with no comparable chunk fails.\n"+
		"The node takes the bag's VideoKVCache messages: kv_transport shm is refused. Steps, shift\n"+
		"and noise seed are taken from the recorded chunks unless -p sets them; the self-test is\n"+
		"skipped and max_input_age is 0\n"+
		"(the node's clock is the bag's). The backend parameters (-p backend:=, cpu.weights, cpu.threads,\n"+
		"htp.*) choose the backend like the flags of the same meaning; another backend's parameters are\n"+
		"refused. With no bag, replays the embedded regression bag\n"+
		"(golden/regression) with the CPU backend and the embedded tiny weights.\n"+
		"A bag of camera images (the topics "+strings.Join(defaultImageTopics(), ", ")+":\n"+
		"sensor_msgs/Image or CompressedImage, the proprio state, the instruction) instead of the node's\n"+
		"inputs is an image bag: each observation runs through the world model (-world, default the\n"+
		"embedded tiny one) and its VideoKVCache and TextContext are fed to the node as a bag of them\n"+
		"would be, seq k for observation k; the chunks are compared alike (`fastwam bag make -images`\n"+
		"writes such a bag).\n"+
		"A recording of the whole policy holds both: the camera, proprio and instruction topics AND\n"+
		"the world model's VideoKVCache and TextContext. Each recorded cache is first checked against\n"+
		"the world model (-world, as above) run on the recording's observation of the cache's stamp:\n"+
		"K, V, context and mask, max |err| and cosine, bit for bit unless -cache-max-err (the same Go\n"+
		"code on the same machine gives the same bits; another OpenBLAS core type, -world-blas or\n"+
		"-world-backend changes the last ones). A cache with no observation of its stamp (a recording\n"+
		"started mid-stream) is NOT COMPARABLE and fails nothing; a cache that differs fails, naming\n"+
		"the stamp, the tensor and the error. Then the chunks are replayed on the recorded caches.")
	var o replayOpts
	fs.StringVar(&o.backend, "backend", params.BackendCPU, "step backend: cpu or htp")
	fs.Float64Var(&o.minCos, "min-cos", replay.DefaultMinCosine, "gate: lowest cosine of a chunk to its recorded one")
	fs.Float64Var(&o.maxErr, "max-err", 0, "gate: largest max |error| of a chunk (0: not checked)")
	fs.BoolVar(&o.caches, "caches", true, "with a recording of the whole policy (camera topics and the world model's caches), check the recorded caches against the world model before the chunks")
	fs.Float64Var(&o.cacheErr, "cache-max-err", 0, "tolerance of the cache check: largest |error| of a K, V or context value (0: bit for bit)")
	fs.DurationVar(&o.timeout, "timeout", replay.DefaultChunkTimeout, "longest wait for one chunk")
	fs.StringVar(&o.out, "o", "", "write the produced chunks and the diagnostics to this new bag folder")
	fs.StringVar(&o.plot, "plot", "", "write a PNG to this file: per-chunk 1 - cosine and max |error| against the gate, the residual (replayed - recorded) of each action dimension, denoise time")
	fs.StringVar(&o.json, "json", "", "write the result as JSON to this file, for CI: verdict, gate, counts and one entry per chunk")
	fs.StringVar(&o.junit, "junit", "", "write the result as JUnit XML to this file, for CI: a testcase per chunk, failed outside the gate or not produced")
	progressMode := progressFlag(fs, "for bags of more than 20 chunks")
	o.cpu.register(fs.FlagSet)
	o.htp.register(fs.FlagSet)
	o.world.register(fs.FlagSet)
	o.node.register(fs.FlagSet)
	fs.Var(&o.files, "params-file", "ROS 2 params `FILE` (the robot's, as after --ros-args --params-file; repeatable, applied in order, before -p): the sections that select the node /<namespace>/fastwam_action_expert apply; its backend parameters (backend, cpu.*, htp.*), self_test.* and max_input_age do not, the replay's flags choose those")
	o.stderr = stderr
	if err := fs.parse(args); err != nil {
		return err
	}
	o.set = setFlags(fs)
	o.progress = *progressMode
	if fs.NArg() > 1 {
		return usageError("want at most one bag, got %d arguments", fs.NArg())
	}
	if _, err := progressOut(o.progress, stderr, false); err != nil { // checks the value
		return err
	}
	if o.backend != params.BackendCPU && o.backend != params.BackendHTP {
		return usageError("unknown -backend %q (want cpu or htp)", o.backend)
	}
	if err := checkRanges(
		cosineRange(o.minCos),
		floatRange("max-err", o.maxErr, 0, math.MaxFloat64, "0: not checked"),
		floatRange("cache-max-err", o.cacheErr, 0, math.MaxFloat64, "0: bit for bit"),
		durationRange("timeout", o.timeout, maxChunkTimeout),
		cpuThreadsRange(o.cpu.threads),
	); err != nil {
		return err
	}
	if err := checkRanges(o.htp.ranges()...); err != nil {
		return err
	}
	if o.out != "" {
		if err := checkOutputDir("-o", o.out, false, ""); err != nil {
			return err
		}
	}
	for _, f := range []struct{ name, path string }{{"-plot", o.plot}, {"-json", o.json}, {"-junit", o.junit}} {
		if f.path != "" {
			if err := checkOutputFile(f.name, f.path); err != nil {
				return err
			}
		}
	}

	path, label := fs.Arg(0), fs.Arg(0)
	if path == "" {
		dir, err := extractRegressionBag()
		if err != nil {
			return err
		}
		defer os.RemoveAll(filepath.Dir(dir))
		path, label = dir, "embedded golden/regression"
	}

	p, err := o.params(nil)
	if err != nil {
		return err
	}
	if err := o.openSameProcess(ctx); err != nil {
		return err
	}
	if o.same != nil {
		defer func() { err = errors.Join(err, closeBackend(o.same)) }()
	}
	images, err := newImageBagReader(worldmodel.LiberoFrame())
	if err != nil {
		return err
	}
	isImages, err := replay.IsImageBag(ctx, path, p.Topics, images)
	if err != nil {
		return err
	}
	var (
		rec *replay.Recording
		wm  *cliWorld
	)
	if isImages {
		var cleanup func()
		if err := o.checkWorldLayout(); err != nil {
			return err
		}
		if wm, cleanup, err = o.world.open(ctx); err != nil {
			return err
		}
		defer cleanup()
		rec, err = replay.ScanImages(ctx, path, p.Topics, images, wm.Dims())
	} else {
		hasObs, err := replay.HasObservations(ctx, path, images)
		if err != nil {
			return err
		}
		switch set := worldFlagsSet(o.set); {
		case hasObs && o.caches:
			var cleanup func()
			if err := o.checkWorldLayout(); err != nil {
				return err
			}
			if wm, cleanup, err = o.world.open(ctx); err != nil {
				return err
			}
			defer cleanup()
		case set != "" && !hasObs:
			return usageError("-%s: bag %s holds the node's inputs, not camera images: the world model is not run", set, label)
		case set != "":
			return usageError("-%s: -caches=false: the world model is not run", set)
		}
		if o.set["cache-max-err"] && wm == nil {
			return usageError("-cache-max-err: bag %s has no caches to check (it needs the camera topics %s besides the node's inputs, and -caches)", label, strings.Join(images.Inputs(), ", "))
		}
		rec, err = replay.Scan(ctx, path, p.Topics)
		if err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	if p, err = o.params(rec); err != nil {
		return err
	}
	b, desc, err := o.open(ctx, rec)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeBackend(b)) }()

	ro := replay.Options{
		Params: p, Backend: b, BackendInfo: desc,
		MinCosine: o.minCos, MaxAbsErr: o.maxErr, ChunkTimeout: o.timeout,
		Output: o.out, Logger: replay.NewLogger(stderr, o.node.verbose),
	}
	if wm != nil {
		ro.BackendInfo = desc + "; world model " + wm.desc
		if isImages {
			ro.World = wm
		} else {
			ro.Caches = &replay.CacheCheck{Reader: images, World: wm, MaxAbsErr: o.cacheErr}
		}
	}
	ro.Progress, _ = progressOut(o.progress, stderr, rec.KVCount > progressAutoMin)
	rep, runErr := replay.Run(ctx, rec, ro)
	if rep == nil {
		return runErr
	}
	rep.Bag = label
	if rec.ScheduleVaries {
		rep.Notes = append(rep.Notes, "the recorded chunks do not all share steps, shift and noise seed; the first chunk's are used")
	}
	if err := rep.WriteTable(stdout); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	if o.plot != "" {
		if err := replay.WritePlot(rep, o.plot); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "plot     %s\n", o.plot)
	}
	for _, f := range []struct {
		label, path string
		write       func(io.Writer) error
	}{{"json", o.json, rep.WriteJSON}, {"junit", o.junit, rep.WriteJUnit}} {
		if f.path == "" {
			continue
		}
		if err := writeFile(f.path, f.write); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%-8s %s\n", f.label, f.path)
	}
	if runErr != nil {
		if errors.Is(runErr, context.Canceled) {
			return &exitError{code: 130, err: runErr}
		}
		return runErr
	}
	if err := rep.Err(); err != nil {
		return &exitError{code: 1, err: err}
	}
	return nil
}

// applyParamsFiles applies the -params-file files to p in order, as the
// node named fastwam_action_expert in -namespace reads them, then restores
// what the replay itself decides: the backend and its parameters, the
// skipped self-test and max_input_age 0. With report, the parameters the
// node does not declare under a wildcard section are named in an info line.
func (o *replayOpts) applyParamsFiles(p *params.Params, report bool) error {
	if len(o.files) == 0 {
		return nil
	}
	fqn := strings.TrimSuffix(o.node.namespace, "/") + "/fastwam_action_expert"
	var opts []rosparam.Option
	if report {
		opts = append(opts, rosparam.LogIgnored(replay.NewLogger(o.stderr, o.node.verbose).Infof))
	}
	keep := *p
	for _, f := range o.files {
		if err := p.ApplyParamsFile(f, fqn, opts...); err != nil {
			return usageError("-params-file: %v", err)
		}
	}
	p.Backend, p.CPU, p.HTP, p.SelfTest, p.MaxInputAge = keep.Backend, keep.CPU, keep.HTP, keep.SelfTest, keep.MaxInputAge
	return nil
}

// params are the node's parameters for the replay: the replay's base with
// the backend flags, the -params-file files, the schedule of the recorded chunks (when rec is
// known), then -p. The backend parameters of -p (backend, cpu.*, htp.*)
// are carried over to the flags the backend is opened with, and refused
// when they would have no effect or contradict a flag.
func (o *replayOpts) params(rec *replay.Recording) (params.Params, error) {
	p := replay.BaseParams(o.backend)
	seedParams(&p, &o.cpu, &o.htp)
	if err := o.applyParamsFiles(&p, rec != nil); err != nil {
		return params.Params{}, err
	}
	if rec != nil {
		rec.ApplySchedule(&p)
	}
	if err := o.node.apply(&p); err != nil {
		return params.Params{}, err
	}
	names := o.node.names()
	if slices.Contains(names, "backend") {
		if o.set["backend"] && p.Backend != o.backend {
			return params.Params{}, usageError("-p backend:=%s contradicts -backend %s; give one of them", p.Backend, o.backend)
		}
		o.backend = p.Backend
	}
	if err := adoptParams("this replay", &p, names, o.set, append(cpuBindings(&o.cpu), htpBindings(&o.htp)...)); err != nil {
		return params.Params{}, err
	}
	if o.backend == params.BackendHTP && p.HTP.ContextBinary == "" && len(p.HTP.ContextPaths) == 0 {
		return params.Params{}, usageError("-backend htp needs -context <action_step context binary> (or -p htp.context_binary:=..., or -context-paths with the split bundle's binaries)")
	}
	if rec != nil && o.backend == params.BackendCPU {
		if err := checkInputSizes(&p, rec.VideoTokens(), rec.ContextTokens(), "the bag's inputs"); err != nil {
			return params.Params{}, err
		}
	}
	return p, nil
}

// open makes the backend: the CPU one sized for the bag's inputs (with the
// embedded tiny weights unless -weights), or the HTP one.
func (o *replayOpts) open(ctx context.Context, rec *replay.Recording) (expert.Backend, string, error) {
	if o.same != nil {
		return o.same, o.sameDesc, nil
	}
	if o.backend == params.BackendHTP {
		return o.htp.open(ctx)
	}
	if rec.VideoTokens() == 0 || rec.ContextTokens() == 0 {
		return nil, "", fmt.Errorf("bag %s: no decodable VideoKVCache and TextContext to size the CPU backend with", rec.Path)
	}
	return o.cpu.open(ctx, rec.VideoTokens(), rec.ContextTokens(), true)
}

// sameProcess reports whether the world model's graphs share the
// expert's session: -backend htp -world-model same_process.
func (o *replayOpts) sameProcess() bool {
	return o.backend == params.BackendHTP && o.htp.worldModel == params.WorldModelSameProcess
}

// openSameProcess opens, for -backend htp -world-model same_process
// -world-backend htp, the expert's backend with the world model's chain
// attached to its session (o.same), before the world model, which then
// runs on that chain (worldFlags.attached): the K/V go from the prefill
// graphs into the expert's inputs.
func (o *replayOpts) openSameProcess(ctx context.Context) error {
	if o.backend != params.BackendHTP && o.htp.worldModel == params.WorldModelSameProcess {
		return usageError("-world-model %s puts the world model's graphs in the HTP expert's session, and -backend %s has none: give -backend htp",
			params.WorldModelSameProcess, o.backend)
	}
	if !o.sameProcess() || o.world.backend != worldBackendHTP {
		return nil
	}
	s, desc, err := o.htp.openSameProcess(ctx, o.world.contextPaths)
	if err != nil {
		return err
	}
	o.same, o.sameDesc = s, desc
	o.world.attached = s.worldKV()
	return nil
}

// checkWorldLayout refuses, before the world model is opened to run,
// what the process layout cannot do: its graphs in the expert's session
// (-world-model same_process) but the world model run on the CPU.
func (o *replayOpts) checkWorldLayout() error {
	if o.sameProcess() && o.world.backend == worldBackendCPU {
		return usageError("-world-model %s with -world-backend %s: the world model's graphs would be loaded into the expert's session and never run, "+
			"the world model running on the CPU instead; give -world-backend htp (its graphs then run in that session) or -world-model %s",
			params.WorldModelSameProcess, worldBackendCPU, params.WorldModelOtherProcess)
	}
	return nil
}

// extractRegressionBag copies the embedded regression bag to a new
// temporary folder and returns the bag folder inside it.
func extractRegressionBag() (string, error) {
	tmp, err := os.MkdirTemp("", "fastwam-replay-*")
	if err != nil {
		return "", fmt.Errorf("embedded regression bag: %w", err)
	}
	dir, err := golden.ExtractRegressionBag(tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return "", err
	}
	return dir, nil
}
