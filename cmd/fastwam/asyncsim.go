package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fastwam/actionexpert/asyncsim"
	"github.com/fastwam/actionexpert/executor"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/replay"
)

type asyncSimOpts struct {
	latency     float64
	delay       int
	horizon     int
	schedule    string
	beta        float64
	aggregation string
	periods     int
	plot        string
	jitter      float64
	sim         simFlags
}

func runAsyncSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	def := params.Default()
	fs := newFlags("async-sim", stdout, stderr, "[flags]\n\n"+
		"A closed-loop timing simulation without ROS: observations at the control rate (0.05 s) go to the\n"+
		"action-expert node (CPU backend, embedded tiny weights): the embedded regression bag's input pairs\n"+
		"(the node's j-th observation takes pair j mod 8) or, with -drift, a seeded drift of the first pair\n"+
		"in time. Each chunk is delivered to the chunk executor -latency control periods after its\n"+
		"observation's stamp, on one in-process bus and one virtual clock (the node's compute time does\n"+
		"not matter: a run is deterministic). The node takes the observation of the first control instant\n"+
		"at or after it delivered its previous chunk, so a chunk comes every ceil(latency) periods (every\n"+
		"period at latency 0) and RTC's shift s is ceil(latency). The same run is made with rtc.mode off,\n"+
		"replace and guided (same inputs, same noise); for each: the executor's seam jumps (L2 between the\n"+
		"outgoing and incoming chunk's row at a switch) p50/p95/max, its starvations, and\n"+
		"max |A_new[i] - A_prev[s+i]| over the frozen rows i < d; then the seam ratios replace/off and\n"+
		"guided/off.")
	var o asyncSimOpts
	fs.Float64Var(&o.latency, "latency", asyncsim.DefaultLatency, "inference latency in control periods (may be fractional), 0 to action_tokens-1")
	fs.IntVar(&o.delay, "delay", -1, "rtc.inference_delay d in actions (default ceil(-latency))")
	fs.IntVar(&o.horizon, "horizon", def.RTC.ExecutionHorizon, "rtc.execution_horizon H in actions, 1 to action_tokens")
	fs.StringVar(&o.schedule, "schedule", def.RTC.Schedule.String(), "rtc.schedule: exp, linear, ones or zeros")
	fs.Float64Var(&o.beta, "beta", def.RTC.MaxGuidance, "rtc.max_guidance beta (guided mode), >= 0")
	fs.StringVar(&o.aggregation, "aggregation", string(executor.AggregateLatest), "executor aggregation of overlapping chunks: latest, average or weighted_average")
	fs.IntVar(&o.periods, "periods", asyncsim.DefaultPeriods, "control periods simulated")
	fs.Float64Var(&o.jitter, "stamp-jitter", 0, "stamp observation k up to this many control periods (a seeded fraction of it; 0 to 0.99) before its instant: stamps off the control grid")
	fs.StringVar(&o.plot, "plot", "", "write a PNG of the executed action stream of the three modes, seams marked, to this file")
	o.sim.register(fs, def, "print the node's and executor's information lines too (warnings and errors always go to stderr)")
	if err := fs.parse(args); err != nil {
		return err
	}
	set := setFlags(fs)
	if fs.NArg() > 0 {
		return usageError("async-sim takes no arguments, got %q", fs.Args())
	}
	sched, err := expert.ParseMaskSchedule(o.schedule)
	if err != nil {
		return usageError("-schedule %q: want exp, linear, ones or zeros", o.schedule)
	}
	agg := executor.Aggregation(o.aggregation)
	switch agg {
	case executor.AggregateLatest, executor.AggregateAverage, executor.AggregateWeighted:
	default:
		return usageError("-aggregation %q: want latest, average or weighted_average", o.aggregation)
	}
	checks := []rangeCheck{
		floatRange("latency", o.latency, 0, math.MaxFloat64, "control periods"),
		intRange("horizon", o.horizon, 1, math.MaxInt32, "actions"),
		floatRange("beta", o.beta, 0, math.MaxFloat64, ""),
		intRange("periods", o.periods, 1, asyncsim.MaxPeriods, ""),
		floatRange("stamp-jitter", o.jitter, 0, 0.99, "control periods"),
		cpuThreadsRange(o.sim.cpu.threads),
	}
	if set["delay"] {
		checks = append(checks, intRange("delay", o.delay, 0, math.MaxInt32, "leave it out for ceil(-latency)"))
	}
	if err := checkRanges(checks...); err != nil {
		return err
	}
	if err := o.sim.check(); err != nil {
		return err
	}
	if o.plot != "" {
		if err := checkOutputFile("-plot", o.plot); err != nil {
			return err
		}
	}

	su, err := o.sim.open(ctx)
	if err != nil {
		return err
	}
	defer su.backend.Close()
	rows := su.backend.Dims().ActionTokens
	// The option checks of asyncsim.Run, with the flags' names.
	delay := o.delay
	if !set["delay"] {
		delay = int(math.Ceil(o.latency))
	}
	switch {
	case o.latency > float64(rows-1):
		return usageError("-latency %v: want at most %d (action_tokens - 1): a chunk arriving later has no row left to execute", o.latency, rows-1)
	case o.horizon > rows:
		return usageError("-horizon %d: want at most %d (action_tokens)", o.horizon, rows)
	case delay > o.horizon:
		return usageError("-delay %d (%s) exceeds -horizon %d; raise -horizon or give a smaller -delay", delay, delaySource(set["delay"]), o.horizon)
	}

	so := asyncsim.Options{
		Pairs: su.pairs, Drift: set["drift"], DriftSeed: o.sim.drift,
		Backend: su.backend, Params: su.params,
		Latency: o.latency, Delay: delay, Horizon: o.horizon, Schedule: sched, MaxGuidance: o.beta,
		Aggregation: agg, Periods: o.periods, StampJitter: o.jitter,
		Logger: replay.NewLogger(stderr, o.sim.verbose),
	}
	res, err := asyncsim.Run(ctx, so)
	if err != nil {
		return simError(ctx, err)
	}
	if err := writeAsyncSim(stdout, &so, res, su.desc, len(su.pairs), set["delay"], rows); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	if o.plot != "" {
		if err := asyncsim.WritePlot(res, o.plot); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "plot     %s\n", o.plot)
	}
	return nil
}

func delaySource(given bool) string {
	if given {
		return "-delay"
	}
	return "ceil(-latency)"
}

// writeAsyncSim prints the simulation's header, one row per mode and the
// seam ratios to off.
func writeAsyncSim(w io.Writer, o *asyncsim.Options, r *asyncsim.Result, backend string, pairs int, delayGiven bool, rows int) error {
	dt := r.ControlPeriod
	inputs := fmt.Sprintf("embedded golden/regression: its %d input pairs in turn, one per observation the node takes", pairs)
	if o.Drift {
		inputs = fmt.Sprintf("a drift of the embedded golden/regression's first pair (seed %d, each value on its own sine of %.0f %% of its tensor's RMS)",
			o.DriftSeed, 100*asyncsim.DriftAmplitude)
	}
	every := int(math.Ceil(o.Latency))
	lat := time.Duration(math.Round(o.Latency * float64(dt)))
	fmt.Fprintf(w, "inputs   %s\n", inputs)
	fmt.Fprintf(w, "backend  %s, embedded tiny weights; %d steps, shift %g, noise seed %d + observation seq\n", backend, o.Params.Steps, o.Params.Shift, o.Params.NoiseSeed)
	fmt.Fprintf(w, "timing   dt %v, latency %g periods (%v), %d periods; a chunk every %d period(s) (the node takes the first observation after it delivered), s = %d\n",
		dt, o.Latency, lat, o.Periods, max(every, 1), max(every, 1))
	if o.StampJitter > 0 {
		fmt.Fprintf(w, "stamps   off the control grid: observation k stamped up to %g periods (%v) before its instant; s may differ by 1\n",
			o.StampJitter, time.Duration(o.StampJitter*float64(dt)))
	}
	wd := math.NaN()
	weights := make([]float32, rows)
	if err := expert.PrefixWeights(weights, r.Delay, r.Horizon, rows-max(every, 1), o.Schedule); err == nil && r.Delay < rows {
		wd = float64(weights[r.Delay])
	}
	// replace blends row d toward Y after every step, so of the seam only
	// the last step's own move keeps its (1 - W[d]) share: a rough
	// expectation, (1 - W[d]) * sigma_{N-1} of off's seam.
	last := math.NaN()
	if sch, err := expert.NewSchedule(o.Params.Steps, float32(o.Params.Shift)); err == nil && sch.Steps() > 0 {
		last = float64(sch.Sigmas[sch.Steps()-1])
	}
	fmt.Fprintf(w, "rtc      d %d (%s), horizon %d, schedule %v, beta %g; executor aggregation %s\n",
		r.Delay, delaySource(delayGiven), r.Horizon, o.Schedule, o.MaxGuidance, o.Aggregation)
	fmt.Fprintf(w, "expect   W[d] %.3f: replace's seam roughly (1 - W[d]) x sigma_%d (%.3f) = %s x off's (the blend acts at every step)\n\n",
		wd, o.Params.Steps-1, last, num((1-wd)*last))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\tchunks\ttied\tseams\tseam p50\tseam p95\tseam max\tstarvations\tfrozen rows\tfrozen max|A-Y|")
	for i := range r.Modes {
		m := &r.Modes[i]
		q := m.SeamQuantiles()
		fmt.Fprintf(tw, "%v\t%d\t%d\t%d\t%s\t%s\t%s\t%d\t%d\t%s\n", m.Mode, len(m.Chunks), m.Tied, len(m.Seams),
			num(q.P50), num(q.P95), num(q.Max), m.Stats.Starvations, m.FrozenRows, num(m.FrozenMax))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	off := r.Mode(expert.RTCOff).SeamQuantiles()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "seam ratio\tp50\tp95\tmax\tbelow 10 %")
	for _, m := range []expert.RTCMode{expert.RTCReplace, expert.RTCGuided} {
		q := r.Mode(m).SeamQuantiles()
		rp50, rp95, rmax := q.P50/off.P50, q.P95/off.P95, q.Max/off.Max
		verdict := "yes"
		if !(rp50 < 0.1 && rp95 < 0.1 && rmax < 0.1) {
			verdict = "no"
		}
		fmt.Fprintf(tw, "%v/off\t%s\t%s\t%s\t%s\n", m, num(rp50), num(rp95), num(rmax), verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var notes []string
	for i := range r.Modes {
		m := &r.Modes[i]
		if m.Mode != expert.RTCOff && m.Resets > 0 {
			notes = append(notes, fmt.Sprintf("%v: the node reset RTC %d time(s) (shift s = %d >= horizon %d?)", m.Mode, m.Resets, max(every, 1), r.Horizon))
		}
	}
	if starved := r.Mode(expert.RTCOff).Stats.Starvations; starved > 0 {
		notes = append(notes, fmt.Sprintf("off starved %d time(s): a chunk covers %d instants from its stamp and the next arrives ceil(latency) + latency = %g periods after it;"+
			" one worker cannot hide a latency above about half a chunk", starved, rows, float64(max(every, 1))+o.Latency))
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "\nnote     %s\n", strings.Join(notes, "\n         "))
	}
	return nil
}

// num formats a figure; NaN (no sample) as "-".
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return fmt.Sprintf("%.4g", v)
}
