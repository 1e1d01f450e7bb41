package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/replay"
)

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return fmt.Sprint(*s) }

func (s *stringList) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// nodeFlags configure the node that bag make and replay run.
type nodeFlags struct {
	params    stringList
	namespace string
	verbose   bool
}

func (f *nodeFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.params, "p", "node parameter `name:=value`, as after --ros-args -p (repeatable), e.g. -p steps:=4 -p topics.actions:=/robot/actions")
	fs.StringVar(&f.namespace, "namespace", "/", "namespace the node's relative topic names resolve in")
	fs.BoolVar(&f.verbose, "v", false, "print the node's information lines too (warnings and errors always go to stderr)")
}

// apply sets the -p parameters on p, then resolves its topics.
func (f *nodeFlags) apply(p *params.Params) error {
	for _, rule := range f.params {
		name, value, ok := strings.Cut(rule, ":=")
		if !ok || name == "" {
			return usageError("-p %q: want name:=value", rule)
		}
		if err := p.Set(name, value); err != nil {
			return usageError("-p %s: %v", rule, err)
		}
	}
	if err := replay.ResolveTopics(p, f.namespace); err != nil {
		return usageError("%v", err)
	}
	if err := replay.CheckTransport(*p); err != nil {
		return usageError("%v", err)
	}
	return nil
}

func runBagMake(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := newFlags("bag make", stdout, stderr, "-o DIR [flags]\n\n"+
		"Writes a rosbag2 (MCAP) regression bag: for each chunk a TextContext and a VideoKVCache built\n"+
		"from the golden cases (the embedded tiny goldens, alternating, by default; chunks after the\n"+
		"first pass get a small seeded perturbation of the context), stamped -period apart with seq\n"+
		"0..N-1, run through the node with the CPU reference backend, and the ActionChunks it\n"+
		"published: the expected output that `fastwam replay` compares with. A chunk the actions.*\n"+
		"limits refuse (limits.mode refuse) is listed: its inputs are in the bag, with no chunk.\n"+
		"With -images BAG, writes a regression bag of the whole policy instead: the camera, proprio and\n"+
		"instruction messages of the image bag BAG, and for each of its observations the chunk the node\n"+
		"published when fed the world model's VideoKVCache and TextContext (-world, default the embedded\n"+
		"tiny world model; seq k for observation k); `fastwam replay` of it runs the world model again.")
	var (
		out     string
		chunks  int
		goldens stringList
		period  time.Duration
		force   bool
		timeout time.Duration
		cpu     cpuFlags
		nf      nodeFlags
		images  string
		world   worldFlags
	)
	fs.StringVar(&out, "o", "", "bag folder to write (must not exist, unless -force)")
	fs.IntVar(&chunks, "chunks", 8, "number of chunks (observations)")
	fs.Var(&goldens, "golden", "golden case `.npz` to take the inputs from: video_keys, video_values, context and context_mask (a world model's output; no latents or reference prediction needed); repeatable; default: the embedded tiny cases")
	fs.DurationVar(&period, "period", replay.DefaultPeriod, "time between the chunks' stamps")
	fs.BoolVar(&force, "force", false, "replace the bag folder -o if it exists")
	fs.DurationVar(&timeout, "timeout", replay.DefaultChunkTimeout, "longest wait for one chunk")
	fs.StringVar(&images, "images", "", "image bag `DIR` whose observations are the inputs, run through the world model (instead of -golden; -chunks and -period do not apply)")
	cpu.register(fs.FlagSet)
	world.register(fs.FlagSet)
	nf.register(fs.FlagSet)
	progressMode := progressFlag(fs, "for more than 20 chunks")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("unexpected argument %q", fs.Arg(0))
	}
	if out == "" {
		fs.Usage()
		return usageError("bag make needs -o DIR")
	}
	if err := checkRanges(
		intRange("chunks", chunks, 1, math.MaxInt32, "the free space of -o's filesystem bounds it further"),
		durationRange("period", period, maxChunkTimeout),
		durationRange("timeout", timeout, maxChunkTimeout),
		cpuThreadsRange(cpu.threads),
	); err != nil {
		return err
	}
	if err := checkOutputDir("-o", out, force, " (replace a bag folder with -force)"); err != nil {
		return err
	}
	progressTo, err := progressOut(*progressMode, stderr, chunks > 20)
	if err != nil {
		return err
	}
	// The node's parameters; the CPU reference's (cpu.weights,
	// cpu.threads) set the backend like -weights and -threads.
	p := replay.BaseParams(params.BackendCPU)
	seedParams(&p, &cpu, nil)
	if err := nf.apply(&p); err != nil {
		return err
	}
	if p.Backend != params.BackendCPU {
		return usageError("-p backend:=%s: bag make runs the CPU reference backend (its chunks are the expected output)", p.Backend)
	}
	if err := adoptParams("bag make", &p, nf.names(), setFlags(fs), cpuBindings(&cpu)); err != nil {
		return err
	}
	set := setFlags(fs)
	if images != "" {
		for _, f := range []string{"golden", "chunks", "period"} {
			if set[f] {
				return usageError("-%s does not apply with -images: the image bag's observations are the chunks", f)
			}
		}
		return makeImageBag(ctx, stdout, stderr, imageMake{out: out, source: images, force: force, timeout: timeout,
			cpu: &cpu, world: &world, verbose: nf.verbose, progress: progressTo, params: p})
	}
	if s := worldFlagsSet(set); s != "" {
		return usageError("-%s applies with -images only", s)
	}

	var cases []*golden.Case
	if len(goldens) == 0 {
		for _, name := range golden.TinyCases() {
			c, err := golden.LoadTiny(ctx, name)
			if err != nil {
				return err
			}
			cases = append(cases, c)
		}
	} else {
		for _, path := range goldens {
			c, err := golden.LoadInputs(ctx, path) // a world model's inputs: no reference prediction needed
			if err != nil {
				return err
			}
			cases = append(cases, c)
		}
	}
	if err := checkInputSizes(&p, cases[0].VideoTokens, cases[0].ContextTokens, "the golden cases' inputs"); err != nil {
		return err
	}
	c0 := cases[0]
	perChunk := bagChunkBytes(len(c0.Chunk.VideoKeys), len(c0.Chunk.VideoValues), len(c0.Chunk.Context), len(c0.Chunk.ContextMask), len(c0.Latents))
	if err := checkBagChunks(chunks, perChunk, out); err != nil {
		return err
	}
	b, desc, err := cpu.open(ctx, cases[0].VideoTokens, cases[0].ContextTokens, len(goldens) == 0)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeBackend(b)) }()

	res, err := replay.MakeBag(ctx, replay.MakeOptions{
		Dir: out, Replace: force, Chunks: chunks, Cases: cases, Backend: b, Params: p,
		Period: period, Timeout: timeout, Logger: replay.NewLogger(stderr, nf.verbose), Progress: progressTo,
	})
	if err != nil {
		return err
	}
	for _, r := range res.Refused {
		fmt.Fprintf(stdout, "%s (its inputs are in the bag, with no ActionChunk)\n", r)
	}
	refused := ""
	if n := len(res.Refused); n > 0 {
		refused = fmt.Sprintf(" (%d refused by the action limits, %d recorded)", n, res.Chunks-n)
	}
	fmt.Fprintf(stdout, "wrote %s: %d chunks%s, %d messages on %s, %s -> %s, in %.2f s\n",
		res.Dir, res.Chunks, refused, res.Messages, p.Topics.Context, p.Topics.KVCache, p.Topics.Actions, res.Elapsed.Seconds())
	fmt.Fprintf(stdout, "expected chunks: the CPU reference's output (%s; %d steps, shift %g, noise seed %d + kv_seq)\n",
		desc, p.Steps, p.Shift, p.NoiseSeed)
	return nil
}

// imageMake is what bag make -images needs.
type imageMake struct {
	out, source string
	force       bool
	timeout     time.Duration
	cpu         *cpuFlags
	world       *worldFlags
	verbose     bool
	progress    io.Writer
	params      params.Params
}

// makeImageBag writes a regression bag of the whole policy from an image
// bag (bag make -images).
func makeImageBag(ctx context.Context, stdout, stderr io.Writer, m imageMake) (err error) {
	wm, cleanup, err := m.world.open(ctx)
	if err != nil {
		return err
	}
	defer cleanup()
	r, err := newImageBagReader(wm.frame)
	if err != nil {
		return err
	}
	p := m.params
	d := wm.Dims()
	if err := checkInputSizes(&p, d.VideoTokens, d.ContextTokens, "the world model's output"); err != nil {
		return err
	}
	b, desc, err := m.cpu.open(ctx, d.VideoTokens, d.ContextTokens, true)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeBackend(b)) }()
	res, err := replay.MakeImageBag(ctx, replay.MakeImageOptions{
		Dir: m.out, Replace: m.force, Source: m.source, Reader: r, World: wm, Backend: b, Params: p,
		Timeout: m.timeout, Logger: replay.NewLogger(stderr, m.verbose), Progress: m.progress,
	})
	if err != nil {
		return err
	}
	for _, r := range res.Refused {
		fmt.Fprintf(stdout, "%s (its inputs are in the bag, with no ActionChunk)\n", r)
	}
	fmt.Fprintf(stdout, "wrote %s: %d observations of %s through the world model, %d messages (the image bag's inputs and %d chunks on %s), in %.2f s\n",
		res.Dir, res.Chunks, m.source, res.Messages, res.Chunks-len(res.Refused), p.Topics.Actions, res.Elapsed.Seconds())
	fmt.Fprintf(stdout, "world model: %s\nexpected chunks: the CPU reference's output (%s; %d steps, shift %g, noise seed %d + seq)\n",
		wm.desc, desc, p.Steps, p.Shift, p.NoiseSeed)
	return nil
}
