package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fastwam/actionexpert/asyncsim"
	"github.com/fastwam/actionexpert/executor"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/replay"
)

type cycleOpts struct {
	bandwidth, fp16TFLOPs, w8TFLOPs, overheadMS float64
	handoffGBs, handoffFixedMS                  float64
	handoffCopies                               int
	contextGB, processGB                        float64
	vae, wm, experts, steps, splits, processes  string
	measured                                    string
	periods, horizon                            int
	sim                                         simFlags
}

// Bounds of cycle's flags: far above any board, low enough that no
// product overflows.
const (
	maxCycleGBs      = 1e4 // GB/s
	maxCycleTFLOPs   = 1e4
	maxCycleMS       = 1e5
	maxCycleLimitGB  = 1e4
	maxCycleSteps    = 100
	maxCycleListSize = 8
)

func runCycle(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	def := params.Default()
	b := asyncsim.DefaultBoard()
	fs := newFlags("cycle", stdout, stderr, "[flags]\n\n"+
		"The device cycle model of the IQ-9075 (docs/cycle.md), fed to the closed-loop simulation of async-sim.\n"+
		"For each deployment (expert precision x steps x action_context split x processes) it estimates every\n"+
		"graph's latency on the NPU, max(bytes / bandwidth, FLOPs / rate) + a per-graph overhead, from the\n"+
		"weight and activation bytes and the FLOPs counted from the released configurations (VAE, video DiT\n"+
		"prefill with the trimmed last layer, action expert), adds the two-process hand-off, and runs the\n"+
		"simulation (node on the CPU backend with the embedded tiny weights and the deployment's steps, chunk\n"+
		"executor, virtual clock) with the cycle as the inference latency. One table: the stages' latencies,\n"+
		"the cycle, the inference delay in control periods, whether the weights fit the per-process limit,\n"+
		"the executor's starvations and the seam jumps (p95) with rtc off, replace and guided. Deterministic.")
	var o cycleOpts
	fs.Float64Var(&o.bandwidth, "bandwidth", b.Bandwidth/1e9, "effective weight-streaming bandwidth of the NPU, GB/s (issue 28: 36-50)")
	fs.Float64Var(&o.fp16TFLOPs, "fp16-tflops", b.FP16Rate/1e12, "fp16 matrix rate, TFLOP/s (issue 28: about 3.3)")
	fs.Float64Var(&o.w8TFLOPs, "w8-tflops", b.W8Rate/1e12, "w8a16 matrix rate, TFLOP/s, also used for w4 (issue 28: about 10)")
	fs.Float64Var(&o.overheadMS, "graph-overhead-ms", b.GraphOverhead.Seconds()*1e3, "overhead per graph execution, ms (an assumption)")
	fs.Float64Var(&o.handoffGBs, "handoff-gbs", b.HandoffBandwidth/1e9, "two processes: host copy rate of the video K/V hand-off, GB/s (an assumption)")
	fs.IntVar(&o.handoffCopies, "handoff-copies", b.HandoffCopies, "two processes: copies of the video K/V per hand-off")
	fs.Float64Var(&o.handoffFixedMS, "handoff-fixed-ms", 0, "two processes: fixed cost per hand-off, ms")
	fs.Float64Var(&o.contextGB, "context-limit-gb", float64(b.ContextLimit)/1e9, "weight bytes per context of the prefill chain, GB")
	fs.Float64Var(&o.processGB, "process-limit-gb", float64(b.ProcessLimit)/1e9, "context bytes one process may map, GB")
	fs.StringVar(&o.measured, "measured", "", "measured latencies per run replacing the model's, stage[:precision]=ms,...: stage vae, prefill, context, step (the whole step) or step-split (the step with the split); e.g. step:fp16=61.5,vae=48")
	fs.StringVar(&o.vae, "vae", "fp16", "the VAE's weights: fp16, w8 or w4")
	fs.StringVar(&o.wm, "wm", "w8", "the video DiT's weights: fp16, w8 or w4")
	fs.StringVar(&o.experts, "expert", "fp16,w8", "the expert's weights, a list of fp16, w8, w4")
	fs.StringVar(&o.steps, "steps", "10,6,4", "denoising steps per chunk, a list")
	fs.StringVar(&o.splits, "split", "off,on", "action_context split, a list of off, on")
	fs.StringVar(&o.processes, "processes", "1,2", "world model and expert in 1 or 2 processes, a list")
	fs.IntVar(&o.periods, "periods", asyncsim.DefaultPeriods, "control periods simulated per deployment")
	fs.IntVar(&o.horizon, "horizon", def.RTC.ExecutionHorizon, "rtc.execution_horizon H (raised to the delay where the delay exceeds it)")
	o.sim.register(fs, def, "print the node's and executor's log lines (by default none: the table counts the starvations)")
	if err := fs.parse(args); err != nil {
		return err
	}
	set := setFlags(fs)
	if fs.NArg() > 0 {
		return usageError("cycle takes no arguments, got %q", fs.Args())
	}
	if err := checkRanges(
		floatRange("bandwidth", o.bandwidth, 1e-3, maxCycleGBs, "GB/s"),
		floatRange("fp16-tflops", o.fp16TFLOPs, 1e-3, maxCycleTFLOPs, "TFLOP/s"),
		floatRange("w8-tflops", o.w8TFLOPs, 1e-3, maxCycleTFLOPs, "TFLOP/s"),
		floatRange("graph-overhead-ms", o.overheadMS, 0, maxCycleMS, "ms"),
		floatRange("handoff-gbs", o.handoffGBs, 1e-3, maxCycleGBs, "GB/s"),
		intRange("handoff-copies", o.handoffCopies, 0, 16, ""),
		floatRange("handoff-fixed-ms", o.handoffFixedMS, 0, maxCycleMS, "ms"),
		floatRange("context-limit-gb", o.contextGB, 1e-3, maxCycleLimitGB, "GB"),
		floatRange("process-limit-gb", o.processGB, 1e-3, maxCycleLimitGB, "GB"),
		intRange("periods", o.periods, 1, asyncsim.MaxPeriods, ""),
		intRange("horizon", o.horizon, 1, math.MaxInt32, "actions"),
		cpuThreadsRange(o.sim.cpu.threads),
	); err != nil {
		return err
	}
	if err := o.sim.check(); err != nil {
		return err
	}
	b.Bandwidth, b.FP16Rate, b.W8Rate = o.bandwidth*1e9, o.fp16TFLOPs*1e12, o.w8TFLOPs*1e12
	b.GraphOverhead = msDuration(o.overheadMS)
	b.HandoffBandwidth, b.HandoffCopies, b.HandoffFixed = o.handoffGBs*1e9, o.handoffCopies, msDuration(o.handoffFixedMS)
	b.ContextLimit, b.ProcessLimit = int64(o.contextGB*1e9), int64(o.processGB*1e9)
	measured, err := asyncsim.ParseMeasured(o.measured)
	if err != nil {
		return usageError("-measured %q: %v", o.measured, strings.TrimPrefix(err.Error(), "asyncsim: "))
	}
	b.Measured = measured
	deps, err := o.deployments()
	if err != nil {
		return err
	}

	su, err := o.sim.open(ctx)
	if err != nil {
		return err
	}
	defer su.backend.Close()
	if rows := su.backend.Dims().ActionTokens; o.horizon > rows {
		return usageError("-horizon %d: want at most %d (action_tokens)", o.horizon, rows)
	}
	co := asyncsim.CycleOptions{Board: b, Model: asyncsim.FullModel(), Deployments: deps,
		Sim: asyncsim.Options{Pairs: su.pairs, Drift: set["drift"], DriftSeed: o.sim.drift, Backend: su.backend, Params: su.params,
			Horizon: o.horizon, Schedule: def.RTC.Schedule, MaxGuidance: def.RTC.MaxGuidance,
			Aggregation: executor.AggregateLatest, Periods: o.periods}}
	if o.sim.verbose { // otherwise nothing: a starving deployment would warn at every period
		co.Sim.Logger = replay.NewLogger(stderr, true)
	}
	rows, err := asyncsim.RunCycles(ctx, co)
	if err != nil {
		return simError(ctx, err)
	}
	if err := writeCycles(stdout, &co, rows, su.desc, su.backend.Dims().ActionTokens); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

// gbs formats a bandwidth in GB/s; +Inf as "never".
func gbs(v float64) string {
	if math.IsInf(v, 1) {
		return "never"
	}
	return fmt.Sprintf("%.1f", v/1e9)
}

func msDuration(ms float64) time.Duration { return time.Duration(math.Round(ms * 1e6)) }

// deployments reads the list flags into the grid of deployments.
func (o *cycleOpts) deployments() ([]asyncsim.Deployment, error) {
	prec := func(flag, s string) (asyncsim.Precision, error) {
		p, err := asyncsim.ParsePrecision(s)
		if err != nil {
			return 0, usageError("-%s %q: want fp16, w8 or w4", flag, s)
		}
		return p, nil
	}
	vae, err := prec("vae", o.vae)
	if err != nil {
		return nil, err
	}
	wm, err := prec("wm", o.wm)
	if err != nil {
		return nil, err
	}
	var experts []asyncsim.Precision
	var steps, procs []int
	var splits []bool
	for _, l := range []struct {
		flag, v string
		add     func(string) error
	}{
		{"expert", o.experts, func(s string) error {
			p, err := prec("expert", s)
			experts = append(experts, p)
			return err
		}},
		{"steps", o.steps, func(s string) error {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > maxCycleSteps {
				return usageError("-steps %q: want integers from 1 to %d", s, maxCycleSteps)
			}
			steps = append(steps, n)
			return nil
		}},
		{"split", o.splits, func(s string) error {
			switch s {
			case "off", "on":
				splits = append(splits, s == "on")
				return nil
			}
			return usageError("-split %q: want off or on", s)
		}},
		{"processes", o.processes, func(s string) error {
			if s != "1" && s != "2" {
				return usageError("-processes %q: want 1 or 2", s)
			}
			procs = append(procs, int(s[0]-'0'))
			return nil
		}},
	} {
		items := strings.Split(l.v, ",")
		if len(items) > maxCycleListSize {
			return nil, usageError("-%s %q: %d items; want at most %d", l.flag, l.v, len(items), maxCycleListSize)
		}
		for _, it := range items {
			if err := l.add(strings.TrimSpace(it)); err != nil {
				return nil, err
			}
		}
	}
	return asyncsim.Grid(vae, wm, experts, steps, splits, procs), nil
}

// writeCycles prints the inputs with their sources, the counts, and the
// table.
func writeCycles(w io.Writer, o *asyncsim.CycleOptions, rows []asyncsim.CycleRow, backend string, tokens int) error {
	b, m := &o.Board, &o.Model
	ep, ef := asyncsim.CountExpertParams(m.Expert), asyncsim.CountExpertFLOPs(m.Expert)
	vp, ap := asyncsim.CountVideoParams(m.Video), asyncsim.VAEParams(m.VAE)
	dt := o.Sim.ControlPeriod
	if dt == 0 {
		dt = params.Default().ControlPeriod
	}
	fmt.Fprintf(w, "board    %.4g GB/s weight streaming, %.4g TFLOP/s fp16, %.4g TFLOP/s w8a16 (and w4), %v per graph; contexts of %.4g GB, %.4g GB per process\n",
		b.Bandwidth/1e9, b.FP16Rate/1e12, b.W8Rate/1e12, b.GraphOverhead, float64(b.ContextLimit)/1e9, float64(b.ProcessLimit)/1e9)
	if len(b.Measured) > 0 {
		ms := make([]string, len(b.Measured))
		for i, m := range b.Measured {
			ms[i] = m.String()
		}
		fmt.Fprintf(w, "measured %s (ms per run, replacing the model's estimate)\n", strings.Join(ms, ", "))
	}
	fmt.Fprintf(w, "handoff  two processes: %d copies of the video K/V at %.4g GB/s + %v\n", b.HandoffCopies, b.HandoffBandwidth/1e9, b.HandoffFixed)
	fmt.Fprintf(w, "vae      %d parameters streamed (the rank-4 graph at T = 1: last temporal taps, constants included), %.1f GFLOP per frame\n", ap, asyncsim.VAEFLOPs(m.VAE)/1e9)
	fmt.Fprintf(w, "prefill  %d parameters streamed (of %d; trimmed last layer, time MLP folded), %.1f GFLOP\n", vp.Prefill, vp.Total, asyncsim.VideoPrefillFLOPs(m.Video)/1e9)
	fmt.Fprintf(w, "expert   %d parameters; action_context takes %d (%.1f %%) and %.2f of %.2f GFLOP (%.1f %%) out of every step\n",
		ep.Total, ep.Context, 100*float64(ep.Context)/float64(ep.Total), ef.Context/1e9, (ef.Step+ef.Context)/1e9, 100*ef.Context/(ef.Step+ef.Context))
	fmt.Fprintf(w, "sim      %s, embedded tiny weights, %d actions a chunk; dt %v, %d periods; rtc horizon %d (or the delay), d = ceil(delay)\n\n",
		backend, tokens, dt, o.Sim.Periods, o.Sim.Horizon)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "expert\tsteps\tsplit\tproc\tfits\tvae ms\tprefill ms\thandoff ms\tcontext ms\tstep ms\tcycle ms\tdelay\td\tslack\tfed from GB/s\tchunks\tstarved\tseam p95 off\treplace\tguided\t")
	for i := range rows {
		r := &rows[i]
		c := &r.Cycle
		d := c.Deployment
		split, fits := "off", "no"
		if d.Split {
			split = "on"
		}
		if c.Fits {
			fits = "yes"
		}
		ms := func(t time.Duration) string { return fmt.Sprintf("%.1f", t.Seconds()*1e3) }
		st := func(s *asyncsim.Stage) string {
			if s == nil {
				return "-"
			}
			if s.Measured {
				return ms(s.Latency) + "*"
			}
			return ms(s.Latency)
		}
		ctxMS := st(c.Stage(asyncsim.StageContext))
		pre := c.Stage(asyncsim.StagePrefill)
		chunks, starved := "-", "all"
		if r.Result != nil {
			chunks, starved = strconv.Itoa(len(r.Result.Modes[0].Chunks)), strconv.Itoa(r.Starvations())
		}
		fmt.Fprintf(tw, "%v\t%d\t%s\t%d\t%s\t%s\t%s (%d)\t%s\t%s\t%s\t%s\t%.2f\t%d\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t\n",
			d.Expert, d.Steps, split, d.Processes, fits, st(c.Stage(asyncsim.StageVAE)), st(pre), pre.Graphs,
			ms(c.Handoff), ctxMS, st(c.Stage(asyncsim.StageStep)), ms(c.Total), r.Periods, int(math.Ceil(r.Periods)), r.Slack, gbs(r.MinBandwidth),
			chunks, starved, num(r.SeamP95(expert.RTCOff)), num(r.SeamP95(expert.RTCReplace)), num(r.SeamP95(expert.RTCGuided)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nnote     delay = cycle / dt (control periods). A chunk covers %d periods from its observation and the next arrives\n"+
		"         ceil(delay) + delay periods after it: slack is what is left of the chunk then; below 0 the executor starves\n"+
		"         (\"all\": the chunk arrives with no row left), and below 1 no row overlaps at the switch, so the executor\n"+
		"         measures no seam (\"-\"). fed from: the lowest bandwidth with slack >= 0 (measured stages held). fits: every\n"+
		"         process's contexts within %.4g GB. prefill (n): a chain of n contexts. *: measured (-measured), not estimated.\n",
		tokens, float64(b.ProcessLimit)/1e9)
	return nil
}
