package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/replay"
)

// runBag dispatches the bag subcommands (only "make" for now).
func runBag(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const synopsis = "usage: fastwam bag make -o DIR [flags]\n\n" +
		"  make   write a regression bag from golden inputs, with the CPU reference's chunks as the expected output\n\n" +
		"Run 'fastwam bag make -h' for its flags.\n"
	if len(args) == 0 {
		fmt.Fprint(stderr, synopsis)
		return usageError("bag needs a subcommand")
	}
	switch args[0] {
	case "make":
		return runBagMake(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stderr, synopsis)
		return flag.ErrHelp
	}
	fmt.Fprint(stderr, synopsis)
	return usageError("unknown bag subcommand %q", args[0])
}

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
func (f *nodeFlags) apply(p *node.Params) error {
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
	return nil
}

func runBagMake(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bag make", stderr, "-o DIR [flags]\n\n"+
		"Writes a rosbag2 (MCAP) regression bag: for each chunk a TextContext and a VideoKVCache built\n"+
		"from the golden cases (the embedded tiny goldens, alternating, by default; chunks after the\n"+
		"first pass get a small seeded perturbation of the context), stamped -period apart with seq\n"+
		"0..N-1, run through the node with the CPU reference backend, and the ActionChunks it\n"+
		"published: the expected output that `fastwam replay` compares with.")
	var (
		out     string
		chunks  int
		goldens stringList
		period  time.Duration
		force   bool
		timeout time.Duration
		cpu     cpuFlags
		nf      nodeFlags
	)
	fs.StringVar(&out, "o", "", "bag folder to write (must not exist, unless -force)")
	fs.IntVar(&chunks, "chunks", 8, "number of chunks (observations)")
	fs.Var(&goldens, "golden", "golden case `.npz` to take the inputs from (repeatable; default: the embedded tiny cases)")
	fs.DurationVar(&period, "period", replay.DefaultPeriod, "time between the chunks' stamps")
	fs.BoolVar(&force, "force", false, "replace the bag folder -o if it exists")
	fs.DurationVar(&timeout, "timeout", replay.DefaultChunkTimeout, "longest wait for one chunk")
	cpu.register(fs)
	nf.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("unexpected argument %q", fs.Arg(0))
	}
	if out == "" {
		fs.Usage()
		return usageError("bag make needs -o DIR")
	}
	if chunks < 1 {
		return usageError("-chunks must be at least 1")
	}
	if period <= 0 {
		return usageError("-period must be positive")
	}

	var cases []*golden.Case
	if len(goldens) == 0 {
		for _, name := range golden.TinyCases() {
			c, err := golden.LoadTiny(name)
			if err != nil {
				return err
			}
			cases = append(cases, c)
		}
	} else {
		for _, path := range goldens {
			c, err := golden.Load(path)
			if err != nil {
				return err
			}
			cases = append(cases, c)
		}
	}
	b, desc, err := cpu.open(ctx, cases[0].VideoTokens, cases[0].ContextTokens, len(goldens) == 0)
	if err != nil {
		return err
	}
	defer b.Close()

	p := replay.BaseParams(node.BackendCPU)
	p.CPU.Weights = cpu.weights
	if p.CPU.Weights == "" {
		p.CPU.Weights = "embedded tiny/weights.safetensors"
	}
	if err := nf.apply(&p); err != nil {
		return err
	}
	res, err := replay.MakeBag(ctx, replay.MakeOptions{
		Dir: out, Replace: force, Chunks: chunks, Cases: cases, Backend: b, Params: p,
		Period: period, Timeout: timeout, Logger: replay.NewLogger(stderr, nf.verbose),
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d chunks, %d messages on %s, %s -> %s, in %.2f s\n",
		res.Dir, res.Chunks, res.Messages, p.Topics.Context, p.Topics.KVCache, p.Topics.Actions, res.Elapsed.Seconds())
	fmt.Fprintf(stdout, "expected chunks: the CPU reference's output (%s; %d steps, shift %g, noise seed %d + kv_seq)\n",
		desc, p.Steps, p.Shift, p.NoiseSeed)
	return nil
}
