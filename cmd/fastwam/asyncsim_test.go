package main

import (
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// simRowRE matches a mode row of async-sim's table: mode, chunks, tied,
// seams, seam p50, p95, max, starvations, frozen rows, frozen max.
var simRowRE = regexp.MustCompile(`(?m)^(off|replace|guided)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\d+)\s+(\d+)\s+(\S+)$`)

type simRow struct {
	chunks, tied, seams, starvations, frozenRows int
	p50, p95, max, frozen                        float64
}

func parseSim(t *testing.T, out string) map[string]simRow {
	t.Helper()
	rows := map[string]simRow{}
	for _, m := range simRowRE.FindAllStringSubmatch(out, -1) {
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
		rows[m[1]] = simRow{chunks: atoi(m[2]), tied: atoi(m[3]), seams: atoi(m[4]), p50: atof(m[5]), p95: atof(m[6]),
			max: atof(m[7]), starvations: atoi(m[8]), frozenRows: atoi(m[9]), frozen: atof(m[10])}
	}
	if len(rows) != 3 {
		t.Fatalf("%d mode rows, want off, replace and guided:\n%s", len(rows), out)
	}
	return rows
}

// TestAsyncSim runs the command at a small size: three modes, RTC visible
// (replace pins the frozen rows, off does not), no starvation below the
// horizon, seam ratios printed, a plot written, and the same figures twice.
func TestAsyncSim(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "sim.png")
	args := []string{"async-sim", "-periods", "60", "-latency", "4", "-drift", "3", "-plot", plot}
	code, out, stderr := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	rows := parseSim(t, out)
	off, rep, gui := rows["off"], rows["replace"], rows["guided"]
	for name, r := range rows {
		if r.chunks < 10 || r.seams != r.chunks-1 || r.starvations != 0 || r.frozenRows == 0 {
			t.Errorf("%s: %+v; want >= 10 chunks, a seam per chunk after the first, no starvation, frozen rows", name, r)
		}
	}
	if off.tied != 0 || rep.tied != rep.chunks-1 || gui.tied != gui.chunks-1 {
		t.Errorf("tied: off %d, replace %d/%d, guided %d/%d", off.tied, rep.tied, rep.chunks, gui.tied, gui.chunks)
	}
	if !(off.frozen > 1) || rep.frozen != 0 || !(gui.frozen > 0 && gui.frozen < off.frozen/10) {
		t.Errorf("frozen max |A-Y|: off %v, replace %v, guided %v; want > 1, 0, and in (0, off/10)", off.frozen, rep.frozen, gui.frozen)
	}
	if !(rep.p95 < off.p95/10 && gui.p95 < off.p95/10) {
		t.Errorf("seam p95: off %v, replace %v, guided %v; want RTC below 10 %% of off", off.p95, rep.p95, gui.p95)
	}
	for _, want := range []string{
		"a drift of the embedded golden/regression's first pair (seed 3",
		"latency 4 periods (200ms), 60 periods; a chunk every 4 period(s)",
		"d 4 (ceil(-latency)), horizon 24, schedule exp, beta 5", "expect   W[d] 0.882: replace's seam roughly (1 - W[d]) x sigma_9 (0.357) = 0.04",
		"replace/off", "guided/off", "plot     " + plot,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?m)^replace/off\s+\S+\s+\S+\s+\S+\s+yes$`).MatchString(out) {
		t.Errorf("no replace/off ratio row below 10 %%:\n%s", out)
	}
	f, err := os.Open(plot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(f)
	f.Close()
	if err != nil {
		t.Fatalf("plot: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 500 {
		t.Errorf("plot is %v", b)
	}

	// Deterministic: the same command gives the same figures.
	code, again, stderr := runCmd(t, args...)
	if code != 0 {
		t.Fatalf("second run: exit %d\n%s", code, stderr)
	}
	if again != out {
		t.Errorf("two runs differ:\n%s\n---\n%s", out, again)
	}
	// Another noise seed, other figures.
	_, other, _ := runCmd(t, "async-sim", "-periods", "60", "-latency", "4", "-drift", "3", "-seed", "11")
	if parseSim(t, other)["off"] == off {
		t.Errorf("-seed 11 gives the same off row as seed 0:\n%s", other)
	}
}

// TestAsyncSimSettings: the flags reach the simulation.
func TestAsyncSimSettings(t *testing.T) {
	code, out, stderr := runCmd(t, "async-sim", "-periods", "40", "-latency", "2.5", "-delay", "4", "-horizon", "12", "-schedule", "ones", "-aggregation", "average")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	rows := parseSim(t, out)
	// ones with d past the switch row: replace's seam rows are pinned.
	if r := rows["replace"]; r.max != 0 || r.frozen != 0 {
		t.Errorf("replace with -schedule ones -delay 4 at latency 2.5: %+v; want seams and frozen rows 0", r)
	}
	for _, want := range []string{"latency 2.5 periods (125ms)", "a chunk every 3 period(s)", "s = 3", "d 4 (-delay), horizon 12, schedule ones, beta 5", "W[d] 1.000", "aggregation average"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestAsyncSimRefused: bad flags exit 2 with an error naming the flag and
// what is wanted, before any work.
func TestAsyncSimRefused(t *testing.T) {
	checkRefused(t, "async-sim", []flagRefusal{
		{[]string{"-latency", "-1"}, "-latency -1: want a finite number >= 0 (control periods)"},
		{[]string{"-latency", "NaN"}, "-latency NaN: want a finite number >= 0"},
		{[]string{"-latency", "32"}, "-latency 32: want at most 31 (action_tokens - 1)"},
		{[]string{"-delay", "-2"}, "-delay -2: want an integer >= 0"},
		{[]string{"-horizon", "0"}, "-horizon 0: want an integer >= 1 (actions)"},
		{[]string{"-horizon", "40"}, "-horizon 40: want at most 32 (action_tokens)"},
		{[]string{"-latency", "10", "-horizon", "8"}, "-delay 10 (ceil(-latency)) exceeds -horizon 8"},
		{[]string{"-delay", "9", "-horizon", "8"}, "-delay 9 (-delay) exceeds -horizon 8"},
		{[]string{"-schedule", "cosine"}, `-schedule "cosine": want exp, linear, ones or zeros`},
		{[]string{"-beta", "-1"}, "-beta -1: want a finite number >= 0"},
		{[]string{"-beta", "+Inf"}, "-beta +Inf: want a finite number >= 0"},
		{[]string{"-beta", "NaN"}, "-beta NaN: want a finite number >= 0"},
		{[]string{"-threads", "-3"}, "-threads -3: want an integer from 0 to 1024 (0: one per CPU)"},
		{[]string{"-aggregation", "median"}, `-aggregation "median": want latest, average or weighted_average`},
		{[]string{"-periods", "0"}, "-periods 0: want an integer from 1 to 1000000"},
		{[]string{"-stamp-jitter", "1"}, "-stamp-jitter 1: want a finite number from 0 to 0.99 (control periods)"},
		{[]string{"-stamp-jitter", "NaN"}, "-stamp-jitter NaN: want a finite number from 0 to 0.99"},
		{[]string{"-blas", "mkl"}, `-blas "mkl": want auto, openblas or gonum`},
		{[]string{"-plot", "/nonexistent/dir/x.png"}, "-plot /nonexistent/dir/x.png: folder /nonexistent/dir does not exist"},
		{[]string{"extra"}, `async-sim takes no arguments, got ["extra"]`},
		{[]string{"-nosuchflag"}, "flag provided but not defined: -nosuchflag"},
	})
	code, out, _ := runCmd(t, "help", "async-sim")
	if code != 0 || !strings.Contains(out, "-latency") || !strings.Contains(out, "ceil(latency)") {
		t.Errorf("help async-sim: exit %d\n%s", code, out)
	}
}
