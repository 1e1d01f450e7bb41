package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/golden"
)

// parityGate is the seed bundle's acceptance threshold.
const parityGate = 0.9999

type parityOpts struct {
	backend    string
	goldenPath string
	minCos     float64
	chunks     int
	steps      int
	shift      float64
	seed       uint64
	cpu        cpuFlags
	htp        htpFlags
}

func runParity(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("parity", stderr, "[flags]\n\nWith no flags it checks the CPU backend against the embedded tiny golden.")
	var o parityOpts
	fs.StringVar(&o.backend, "backend", "cpu", "step backend: cpu or htp")
	fs.StringVar(&o.goldenPath, "golden", "", "golden .npz, e.g. golden/action_step_io.npz of the device bundle (default: the embedded tiny goldens)")
	fs.Float64Var(&o.minCos, "min-cos", parityGate, "cosine below which the check fails (exit 1)")
	fs.IntVar(&o.chunks, "chunks", 5, "chunks timed for the latency table")
	fs.IntVar(&o.steps, "steps", expert.DefaultSteps, "denoise steps of the timed loop (and of the full-loop check when the golden has none)")
	fs.Float64Var(&o.shift, "shift", expert.DefaultShift, "schedule shift")
	fs.Uint64Var(&o.seed, "seed", 42, "noise seed of the timed loop when the golden has no initial noise")
	o.cpu.register(fs)
	o.htp.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("unexpected argument %q (the golden file goes after -golden)", fs.Arg(0))
	}
	if o.chunks < 1 {
		return usageError("-chunks must be at least 1")
	}
	cases, err := loadCases(o.goldenPath)
	if err != nil {
		return err
	}
	worst := 1.0
	for _, c := range cases {
		b, desc, err := o.open(ctx, c)
		if err != nil {
			return err
		}
		cos, err := parityCase(ctx, stdout, b, desc, c, o)
		b.Close()
		if err != nil {
			return err
		}
		worst = min(worst, cos)
	}
	if worst < o.minCos {
		return &exitError{code: 1, err: fmt.Errorf("FAIL: lowest cosine %.9f is below the %.4f gate", worst, o.minCos)}
	}
	fmt.Fprintf(stdout, "PASS: lowest cosine %.12f >= %.4f\n", worst, o.minCos)
	return nil
}

func loadCases(path string) ([]*golden.Case, error) {
	if path != "" {
		c, err := golden.Load(path)
		if err != nil {
			return nil, err
		}
		return []*golden.Case{c}, nil
	}
	var cases []*golden.Case
	for _, n := range golden.TinyCases() {
		c, err := golden.LoadTiny(n)
		if err != nil {
			return nil, err
		}
		c.Name = "embedded " + c.Name
		cases = append(cases, c)
	}
	return cases, nil
}

// open makes the chosen backend for a golden case.
func (o *parityOpts) open(ctx context.Context, c *golden.Case) (expert.Backend, string, error) {
	switch o.backend {
	case "cpu":
		return o.cpu.open(c.VideoTokens, c.ContextTokens, o.goldenPath == "")
	case "htp":
		return o.htp.open(ctx)
	}
	return nil, "", usageError("unknown -backend %q (want cpu or htp)", o.backend)
}

// cpuFlags are the CPU backend's options.
type cpuFlags struct {
	weights string
	blas    string
	threads int
}

func (f *cpuFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.weights, "weights", "", "CPU backend: action-expert weights (.safetensors; default with the embedded golden: its tiny weights)")
	fs.StringVar(&f.blas, "blas", "auto", "CPU backend: auto, openblas or gonum")
	fs.IntVar(&f.threads, "threads", 0, "CPU backend: OpenBLAS threads (0: OpenBLAS's default)")
}

// open loads the CPU backend sized for inputs of videoTokens cached video
// tokens and contextTokens context tokens; embedded selects the embedded
// tiny weights when no weights file is given.
func (f *cpuFlags) open(videoTokens, contextTokens int, embedded bool) (expert.Backend, string, error) {
	var (
		w   *cpu.Weights
		err error
	)
	switch {
	case f.weights != "":
		w, err = cpu.LoadWeights(f.weights, nil)
	case embedded:
		w, err = cpu.TinyWeights()
	default:
		return nil, "", usageError("-backend cpu with -golden needs -weights (the action expert's .safetensors)")
	}
	if err != nil {
		return nil, "", err
	}
	if w, err = w.ForInputs(videoTokens, contextTokens); err != nil {
		return nil, "", err
	}
	b, err := cpu.New(w, cpu.Options{BLAS: f.blas, Threads: f.threads})
	if err != nil {
		return nil, "", err
	}
	return b, "cpu, " + b.BLAS(), nil
}

// parityCase runs the checks of one golden case and prints them; it returns
// the lowest cosine.
func parityCase(ctx context.Context, w io.Writer, b expert.Backend, desc string, c *golden.Case, o parityOpts) (float64, error) {
	d := b.Dims()
	if err := c.Fits(d); err != nil {
		return 0, err
	}
	visible := fmt.Sprint(c.Chunk.VisibleVideo)
	if c.Chunk.VisibleVideo == 0 {
		visible = "all"
	}
	fmt.Fprintf(w, "golden  %s\nbackend %s\nshapes  %s, visible video tokens %s\n\n", c.Name, desc, d, visible)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "check\tcosine\t1-cos\tmax|err|\tresult\t")
	worst := 1.0
	row := func(name string, got, want []float32) {
		cos, e := expert.Cosine(got, want), expert.MaxAbsDiff(got, want)
		verdict := "ok"
		if cos < o.minCos {
			verdict = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%.12f\t%.1e\t%.3g\t%s\t\n", name, cos, 1-cos, e, verdict)
		worst = min(worst, cos)
	}
	if err := b.BindChunk(ctx, &c.Chunk); err != nil {
		return 0, err
	}
	pred := make([]float32, d.LatentLen())
	if err := b.Step(ctx, c.Latents, c.Timestep, pred); err != nil {
		return 0, err
	}
	row(fmt.Sprintf("single step, timestep %g", c.Timestep), pred, c.Pred)
	for i, tau := range c.StepTimesteps {
		if err := b.Step(ctx, c.StepLatents[i], tau, pred); err != nil {
			return 0, err
		}
		row(fmt.Sprintf("single step, timestep %g", tau), pred, c.StepPred[i])
	}

	steps, x0 := o.steps, expert.Noise(o.seed, d.LatentLen())
	if c.LoopInit != nil {
		steps, x0 = len(c.LoopSigmas)-1, c.LoopInit
	}
	sched, err := expert.NewSchedule(steps, float32(o.shift))
	if err != nil {
		return 0, err
	}
	var chunkTimes []time.Duration
	var bindTotal time.Duration
	stepTotals := make([]time.Duration, steps)
	for k := 0; k < o.chunks; k++ {
		var perStep []float64
		t0 := time.Now()
		res, err := expert.Denoise(ctx, b, &c.Chunk, sched, x0, func(s expert.StepInfo) {
			if k == 0 && c.LoopPred != nil {
				perStep = append(perStep, expert.Cosine(s.Pred, c.LoopPred[s.Index]))
			}
		})
		if err != nil {
			return 0, err
		}
		chunkTimes = append(chunkTimes, time.Since(t0))
		bindTotal += res.BindTime
		for i, st := range res.StepTimes {
			stepTotals[i] += st
		}
		if k == 0 && c.LoopActions != nil {
			minStep := 1.0
			for _, v := range perStep {
				minStep = min(minStep, v)
			}
			worst = min(worst, minStep)
			row(fmt.Sprintf("full loop, %d steps: final actions", steps), res.Actions, c.LoopActions)
			fmt.Fprintf(tw, "full loop, %d steps: lowest per-step cosine\t%.12f\t%.1e\t\t\t\n", steps, minStep, 1-minStep)
		}
	}
	if c.LoopActions == nil {
		fmt.Fprintf(tw, "full loop\t(no reference in the golden)\t\t\t\t\n")
	}
	tw.Flush()

	var sum time.Duration
	for _, t := range chunkTimes {
		sum += t
	}
	n := time.Duration(len(chunkTimes))
	fmt.Fprintf(w, "\nlatency, average of %d chunks of %d steps: chunk %s, bind %s, step %s\nper-step ms:",
		len(chunkTimes), steps, ms(sum/n), ms(bindTotal/n), ms(sum/n/time.Duration(steps)))
	for _, t := range stepTotals {
		fmt.Fprintf(w, " %.3f", float64(t/n)/1e6)
	}
	fmt.Fprintln(w)
	if p, ok := b.(interface{ ExecuteTimes() []time.Duration }); ok {
		ts := p.ExecuteTimes()
		if len(ts) > steps {
			ts = ts[len(ts)-steps:]
		}
		if len(ts) > 0 {
			parts := make([]string, len(ts))
			for i, t := range ts {
				parts[i] = fmt.Sprintf("%.3f", float64(t)/1e6)
				if t < 0 {
					parts[i] = "missing"
				}
			}
			fmt.Fprintf(w, "profiled execute ms (last chunk): %s\n", strings.Join(parts, " "))
		}
	}
	fmt.Fprintln(w)
	return worst, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }
