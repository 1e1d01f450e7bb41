package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/internal/progress"
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
	tokens     int       // -action-tokens
	progress   io.Writer // the timing loop's progress lines; nil for none
	cpu        cpuFlags
	htp        htpFlags
	set        map[string]bool // flags given on the command line
}

func runParity(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("parity", stdout, stderr, "[flags]\n\nWith no flags it checks the CPU backend against the embedded tiny golden.\n"+
		"It prints the head split and action tokens it uses and where they come from. A golden's\n"+
		"recorded schedule (loop_sigmas) must be the one of -shift (and of -steps, when given).")
	var o parityOpts
	fs.StringVar(&o.backend, "backend", "cpu", "step backend: cpu or htp")
	fs.StringVar(&o.goldenPath, "golden", "", "golden .npz, e.g. golden/action_step_io.npz of the device bundle (default: the embedded tiny goldens)")
	fs.Float64Var(&o.minCos, "min-cos", parityGate, "cosine below which the check fails (exit 1)")
	fs.IntVar(&o.chunks, "chunks", 5, "chunks timed for the latency table")
	fs.IntVar(&o.steps, "steps", expert.DefaultSteps, "denoise steps of the timed loop (and of the full-loop check when the golden has none)")
	fs.Float64Var(&o.shift, "shift", expert.DefaultShift, "schedule shift")
	fs.Uint64Var(&o.seed, "seed", 42, "noise seed of the timed loop when the golden has no initial noise")
	fs.IntVar(&o.tokens, "action-tokens", 0, "action tokens S of the model, for weights whose configuration does not record action_tokens (0: the weights', else 32)")
	o.cpu.register(fs.FlagSet)
	o.htp.register(fs.FlagSet)
	progressMode := progressFlag(fs, "for a golden of a file, -golden, or the htp backend")
	if err := fs.parse(args); err != nil {
		return err
	}
	o.set = setFlags(fs)
	var err error
	if o.progress, err = progressOut(*progressMode, stderr, o.goldenPath != "" || o.backend == "htp"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("unexpected argument %q (the golden file goes after -golden)", fs.Arg(0))
	}
	if err := checkRanges(
		cosineRange(o.minCos),
		intRange("chunks", o.chunks, 1, maxChunks, ""),
		intRange("steps", o.steps, 1, maxSteps, ""),
		floatRange("shift", o.shift, math.SmallestNonzeroFloat32, math.MaxFloat32, "a float32 above 0"),
		intRange("action-tokens", o.tokens, 0, maxActionTokens, "0: the weights', else 32"),
		cpuThreadsRange(o.cpu.threads),
	); err != nil {
		return err
	}
	if err := checkRanges(o.htp.ranges()...); err != nil {
		return err
	}
	o.cpu.actionTokens = o.tokens
	cases, err := loadCases(ctx, o.goldenPath)
	if err != nil {
		return err
	}
	worst, hint := 1.0, ""
	for _, c := range cases {
		b, desc, m, err := o.open(ctx, c)
		if err != nil {
			return err
		}
		cos, err := parityCase(ctx, stdout, b, desc, m, c, o)
		if err := errors.Join(err, closeBackend(b)); err != nil {
			return err
		}
		if !(cos >= o.minCos) && m.splitAssumed && hint == "" {
			hint = fmt.Sprintf("\n  the head split is not the checkpoint's own record: %s;\n  a wrong split lowers every cosine (a 24x128 model read as 1x3072 gives about 0.97): re-export with the model's --num-heads", m.split)
		}
		worst = min(worst, cos)
	}
	if !(worst >= o.minCos) { // a NaN cosine fails too (min propagates NaN)
		return &exitError{code: 1, err: fmt.Errorf("FAIL: lowest cosine %.9f is below the %.4f gate%s", worst, o.minCos, hint)}
	}
	fmt.Fprintf(stdout, "PASS: lowest cosine %.12f >= %.4f\n", worst, o.minCos)
	return nil
}

func loadCases(ctx context.Context, path string) ([]*golden.Case, error) {
	if path != "" {
		c, err := golden.Load(ctx, path)
		if err != nil {
			return nil, err
		}
		return []*golden.Case{c}, nil
	}
	var cases []*golden.Case
	for _, n := range golden.TinyCases() {
		c, err := golden.LoadTiny(ctx, n)
		if err != nil {
			return nil, err
		}
		c.Name = "embedded " + c.Name
		cases = append(cases, c)
	}
	return cases, nil
}

// open makes the chosen backend for a golden case, and says where its head
// split and action tokens come from.
func (o *parityOpts) open(ctx context.Context, c *golden.Case) (expert.Backend, string, modelInfo, error) {
	switch o.backend {
	case "cpu":
		b, desc, err := o.cpu.open(ctx, c.VideoTokens, c.ContextTokens, o.goldenPath == "")
		return b, desc, o.cpu.model, err
	case "htp":
		b, desc, err := o.htp.open(ctx)
		if err != nil {
			return nil, "", modelInfo{}, err
		}
		d := b.Dims()
		if o.tokens > 0 && o.tokens != d.ActionTokens {
			b.Close()
			return nil, "", modelInfo{}, usageError("-action-tokens %d contradicts the context binary's graph, which takes %d action tokens", o.tokens, d.ActionTokens)
		}
		m := modelInfo{
			split:  fmt.Sprintf("%dx%d (attention width %d): the graph fixes the width only; split with -head-dim %d", d.Heads, d.HeadDim, d.AttnWidth(), o.htp.headDim),
			tokens: fmt.Sprintf("%d from the context binary's graph", d.ActionTokens),
		}
		return b, desc, m, nil
	}
	return nil, "", modelInfo{}, usageError("unknown -backend %q (want cpu or htp)", o.backend)
}

// cpuFlags are the CPU backend's options.
type cpuFlags struct {
	weights      string
	blas         string
	threads      int
	actionTokens int       // parity's -action-tokens (0: from the weights, else 32)
	model        modelInfo // set by open
}

func (f *cpuFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.weights, "weights", "", "CPU backend: action-expert weights (.safetensors; default with the embedded golden: its tiny weights)")
	fs.StringVar(&f.blas, "blas", "auto", "CPU backend: auto, openblas or gonum")
	fs.IntVar(&f.threads, "threads", 0, "CPU backend: worker goroutines of the step over a single-threaded OpenBLAS (0: one per CPU)")
}

// parityCase runs the checks of one golden case and prints them; it returns
// the lowest cosine.
func parityCase(ctx context.Context, w io.Writer, b expert.Backend, desc string, m modelInfo, c *golden.Case, o parityOpts) (float64, error) {
	d := b.Dims()
	if err := c.Fits(d); err != nil {
		if m.tokensDefault && c.ActionTokens != d.ActionTokens {
			return 0, fmt.Errorf("%w\n  the golden has %d action tokens and the backend %s: give -action-tokens %d", err, c.ActionTokens, m.tokens, c.ActionTokens)
		}
		return 0, err
	}
	sched, schedNote, err := o.schedule(c)
	if err != nil {
		return 0, err
	}
	visible := fmt.Sprint(c.Chunk.VisibleVideo)
	if c.Chunk.VisibleVideo == 0 {
		visible = "all"
	}
	fmt.Fprintf(w, "golden  %s\nbackend %s\nshapes  %s, visible video tokens %s\nheads   %s\nactions %s\nschedule %d steps, shift %g: %s\n\n",
		c.Name, desc, d, visible, m.split, m.tokens, sched.Steps(), sched.Shift, schedNote)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "check\tcosine\t1-cos\tmax|err|\tresult\t")
	worst := 1.0
	row := func(name string, got, want []float32) {
		cos, e := expert.Cosine(got, want), expert.MaxAbsDiff(got, want)
		verdict := "ok"
		if !(cos >= o.minCos) {
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

	steps, x0 := sched.Steps(), expert.Noise(o.seed, d.LatentLen())
	if c.LoopInit != nil {
		x0 = c.LoopInit
	}
	var chunkTimes []time.Duration
	var bindTotal time.Duration
	stepTotals := make([]time.Duration, steps)
	prog := progress.New(o.progress, "parity "+c.Name, "timed chunks", o.chunks, progress.DefaultInterval)
	for k := 0; k < o.chunks; k++ {
		prog.Update(k)
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
	prog.Done(o.chunks)
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
