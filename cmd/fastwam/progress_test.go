package main

import (
	"path/filepath"
	"regexp"
	"testing"
)

// TestProgressLines: every long command prints progress lines on stderr
// with -progress on (and none with off), in one format:
// "<job>: <done>/<total> <unit> (<pct>%), <elapsed> s elapsed, ETA <eta>".
func TestProgressLines(t *testing.T) {
	dir := t.TempDir()
	line := func(job string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(job) + `: \d+/\d+ [a-z ]+ \(\d+%\), [0-9.]+ s elapsed, ETA `)
	}
	for _, tc := range []struct {
		name string
		args []string
		job  string
	}{
		{"bag make", []string{"bag", "make", "-o", filepath.Join(dir, "bag"), "-chunks", "3"}, "bag make"},
		{"weights make", append([]string{"weights", "make", "-o", filepath.Join(dir, "w.safetensors")}, smallWeightsFlags...), "weights make"},
		{"parity", []string{"parity", "-chunks", "2"}, "parity embedded tiny/case_all.npz"},
		{"bench", []string{"bench", "-layers", "1", "-iters", "1", "-no-torch"}, "bench"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, append(tc.args, "-progress", "on")...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, stderr)
			}
			if !line(tc.job).MatchString(stderr) {
				t.Errorf("-progress on: no progress line for %q on stderr:\n%s", tc.job, stderr)
			}
		})
	}
	code, _, stderr := runCmd(t, "bag", "make", "-o", filepath.Join(dir, "quiet"), "-chunks", "3", "-progress", "off")
	if code != 0 || line("bag make").MatchString(stderr) {
		t.Errorf("-progress off: exit %d, stderr %q, want no progress line", code, stderr)
	}
	if code, _, stderr := runCmd(t, "bag", "make", "-o", filepath.Join(dir, "x"), "-progress", "sometimes"); code != 2 {
		t.Errorf("-progress sometimes: exit %d (%s), want 2", code, stderr)
	}
}
