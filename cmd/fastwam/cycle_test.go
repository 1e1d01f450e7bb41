package main

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// cycleRowRE matches a row of cycle's table: expert, steps, split, proc,
// fits, vae ms, prefill ms (contexts), handoff ms, context ms, step ms,
// cycle ms, delay, d, slack, fed from GB/s, chunks, starved, seam p95 off, replace,
// guided.
var cycleRowRE = regexp.MustCompile(`(?m)^\s*(fp16|w8|w4)\s+(\d+)\s+(off|on)\s+([12])\s+(yes|no)\s+(\S+)\s+(\S+) \((\d+)\)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)$`)

type cycleRow struct {
	expert, split, fits, starved string
	steps, procs, d              int
	handoff, cycle, delay, slack float64
	fedFrom                      string
	ctxMS                        string
}

func parseCycle(t *testing.T, out string) []cycleRow {
	t.Helper()
	var rows []cycleRow
	for _, m := range cycleRowRE.FindAllStringSubmatch(out, -1) {
		atoi := func(s string) int {
			v, err := strconv.Atoi(s)
			if err != nil {
				t.Fatalf("%q in %q: %v", s, m[0], err)
			}
			return v
		}
		atof := func(s string) float64 {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("%q in %q: %v", s, m[0], err)
			}
			return v
		}
		rows = append(rows, cycleRow{expert: m[1], steps: atoi(m[2]), split: m[3], procs: atoi(m[4]), fits: m[5],
			handoff: atof(m[9]), ctxMS: m[10], cycle: atof(m[12]), delay: atof(m[13]), d: atoi(m[14]), slack: atof(m[15]), fedFrom: m[16], starved: m[18]})
	}
	return rows
}

// TestCycle runs the command on a small grid: one row per deployment, in
// grid order; the choices move the figures the way the model says; the
// same figures twice.
func TestCycle(t *testing.T) {
	args := []string{"cycle", "-periods", "60", "-expert", "fp16,w8", "-steps", "10,4", "-split", "off,on", "-processes", "1,2"}
	code, out, stderr := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	rows := parseCycle(t, out)
	if len(rows) != 16 {
		t.Fatalf("%d rows; want 16:\n%s", len(rows), out)
	}
	at := func(expert string, steps int, split string, procs int) cycleRow {
		for _, r := range rows {
			if r.expert == expert && r.steps == steps && r.split == split && r.procs == procs {
				return r
			}
		}
		t.Fatalf("no row %s %d %s %d", expert, steps, split, procs)
		return cycleRow{}
	}
	for _, r := range rows {
		if (r.procs == 2) != (r.handoff > 0) || (r.split == "on") != (r.ctxMS != "-") {
			t.Errorf("%+v: want a hand-off exactly with two processes, an action_context exactly with the split", r)
		}
		// At the defaults (36 GB/s, w8 world model) every deployment
		// keeps the executor fed; the one-process layout maps 5.9 GB with
		// the w8 expert, within 6 GB, and 6.9 GB with the fp16 one, over.
		if r.starved != "0" || r.slack < 0 || (r.fits == "yes") != (r.procs == 2 || r.expert == "w8") {
			t.Errorf("%+v: want no starvation, slack >= 0, fitting in two processes or with the w8 expert", r)
		}
		if r.d != int(r.delay+0.999999) || r.delay < r.cycle/50-0.01 || r.delay > r.cycle/50+0.01 {
			t.Errorf("%+v: want delay = cycle / 50 ms and d its ceiling", r)
		}
	}
	for _, e := range []string{"fp16", "w8"} {
		for _, s := range []string{"off", "on"} {
			if r10, r4 := at(e, 10, s, 1), at(e, 4, s, 1); !(r10.cycle > r4.cycle) {
				t.Errorf("%s split %s: 10 steps %v ms, 4 steps %v ms; want longer", e, s, r10.cycle, r4.cycle)
			}
		}
		if on, off := at(e, 10, "on", 1), at(e, 10, "off", 1); !(on.cycle < off.cycle) {
			t.Errorf("%s 10 steps: split %v ms, not split %v ms; want shorter", e, on.cycle, off.cycle)
		}
	}
	// The seed bundle's layout (fp16, 10 steps, no split) is fed from
	// about 35 GB/s: within issue 28's 36-50, with half a period to spare.
	if r := at("fp16", 10, "off", 1); r.fedFrom != "34.8" || r.slack != 0.5 {
		t.Errorf("fp16, 10 steps, no split: fed from %s GB/s, slack %v; want 34.8 and 0.5", r.fedFrom, r.slack)
	}
	if w8, fp := at("w8", 10, "off", 1), at("fp16", 10, "off", 1); !(w8.cycle < fp.cycle) {
		t.Errorf("10 steps: w8 %v ms, fp16 %v ms; want w8 shorter", w8.cycle, fp.cycle)
	}
	for _, want := range []string{
		"board    36 GB/s weight streaming, 3.3 TFLOP/s fp16, 10 TFLOP/s w8a16",
		"prefill  4787565568 parameters streamed (of 4999787712", "981.1 GFLOP",
		"expert   1020886023 parameters; action_context takes 194265088 (19.0 %) and 50.05 of 105.46 GFLOP (47.5 %)",
		"vae      54291936 parameters streamed (the rank-4 graph at T = 1", "163.2 GFLOP",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The VAE's count is the one `graphs plan` gives vae_encoder.
	code, plan, stderr := runCmd(t, "graphs", "plan", "-processes", "2", "-weights", "w8")
	if code != 0 {
		t.Fatalf("graphs plan: exit %d\n%s", code, stderr)
	}
	var planVAE string
	for line := range strings.Lines(plan) {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "vae_encoder" {
			planVAE = f[2]
		}
	}
	if planVAE == "" || !strings.Contains(out, "vae      "+planVAE+" parameters streamed") {
		t.Errorf("graphs plan counts vae_encoder at %q parameters; cycle says\n%s", planVAE, out)
	}
	if code, again, _ := runCmd(t, args...); code != 0 || again != out {
		t.Errorf("second run: exit %d, differs:\n%s\n---\n%s", code, out, again)
	}
}

// TestCycleStarves: a slower board starves the executor, a much slower one
// delivers chunks with no row left.
func TestCycleStarves(t *testing.T) {
	code, out, stderr := runCmd(t, "cycle", "-periods", "80", "-expert", "fp16", "-steps", "10", "-split", "off", "-processes", "1", "-bandwidth", "22")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	rows := parseCycle(t, out)
	if len(rows) != 1 || rows[0].slack >= 0 || rows[0].starved == "0" || rows[0].starved == "all" {
		t.Errorf("at 22 GB/s: %+v; want negative slack and starvations\n%s", rows, out)
	}
	if stderr != "" {
		t.Errorf("stderr %q; want nothing without -v", stderr)
	}
	code, out, _ = runCmd(t, "cycle", "-periods", "80", "-expert", "fp16", "-steps", "10", "-split", "off", "-processes", "1", "-bandwidth", "8")
	if rows = parseCycle(t, out); code != 0 || len(rows) != 1 || rows[0].starved != "all" || rows[0].delay <= 31 {
		t.Errorf("at 8 GB/s: exit %d, %+v; want a delay above 31 periods and \"all\"\n%s", code, rows, out)
	}
}

// TestCycleMeasured: a measured step replaces the estimate, marked, and
// moves the cycle: 10 steps of 70 ms starve the executor.
func TestCycleMeasured(t *testing.T) {
	code, out, stderr := runCmd(t, "cycle", "-periods", "80", "-expert", "fp16", "-steps", "10", "-split", "off", "-processes", "1", "-measured", "step:fp16=70,vae=45")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	rows := parseCycle(t, out)
	if len(rows) != 1 || rows[0].cycle != 45+137.0+700 || rows[0].slack >= 0 || rows[0].starved == "0" {
		t.Errorf("%+v; want a cycle of 45 + 137 + 10 x 70 ms that starves\n%s", rows, out)
	}
	for _, want := range []string{"measured step:fp16=70, vae=45", "  45.0*  ", "  70.0*  "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestCycleRefused: bad flags exit 2 naming the flag and what is wanted.
func TestCycleRefused(t *testing.T) {
	checkRefused(t, "cycle", []flagRefusal{
		{[]string{"-bandwidth", "0"}, "-bandwidth 0: want a finite number from 0.001 to 10000 (GB/s)"},
		{[]string{"-bandwidth", "NaN"}, "-bandwidth NaN"},
		{[]string{"-fp16-tflops", "+Inf"}, "-fp16-tflops +Inf"},
		{[]string{"-graph-overhead-ms", "-1"}, "-graph-overhead-ms -1"},
		{[]string{"-handoff-copies", "-3"}, "-handoff-copies -3: want an integer from 0 to 16"},
		{[]string{"-process-limit-gb", "0"}, "-process-limit-gb 0"},
		{[]string{"-measured", "step=0"}, `-measured "step=0": measured "step=0": "0" ms; want a number above 0`},
		{[]string{"-measured", "decoder=3"}, `stage "decoder"; want vae, prefill, context, step or step-split`},
		{[]string{"-expert", "int8"}, `-expert "int8": want fp16, w8 or w4`},
		{[]string{"-wm", "bf16"}, `-wm "bf16": want fp16, w8 or w4`},
		{[]string{"-steps", "10,0"}, `-steps "0": want integers from 1 to 100`},
		{[]string{"-steps", "1,2,3,4,5,6,7,8,9"}, "9 items; want at most 8"},
		{[]string{"-split", "maybe"}, `-split "maybe": want off or on`},
		{[]string{"-processes", "3"}, `-processes "3": want 1 or 2`},
		{[]string{"-periods", "0"}, "-periods 0: want an integer from 1 to 1000000"},
		{[]string{"-horizon", "40"}, "-horizon 40: want at most 32 (action_tokens)"},
		{[]string{"-blas", "mkl"}, `-blas "mkl": want auto, openblas or gonum`},
		{[]string{"extra"}, `cycle takes no arguments, got ["extra"]`},
	})
}
