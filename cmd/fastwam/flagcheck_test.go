package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestNumericFlagsRefused gives every numeric flag of every command
// (found in its -h text, so a new flag is covered) the values the flag
// package parses but no flag means: NaN and ±Inf for a float, -3 for an
// int, 0s and -1s for a duration. Each must be refused as a usage error
// (exit 2) naming the value, before any work. The context is cancelled,
// so an accepted value fails fast (and not with 2).
func TestNumericFlagsRefused(t *testing.T) {
	dir := t.TempDir()
	required := map[string][]string{
		"bag make":     {"-o", filepath.Join(dir, "bag")},
		"weights make": {"-o", filepath.Join(dir, "w.safetensors")},
	}
	bad := map[string][]string{"float": {"NaN", "+Inf", "-Inf"}, "int": {"-3"}, "duration": {"0s", "-1s"}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	flagLine := regexp.MustCompile(`(?m)^  -(\S+) (float|int|duration)$`)
	tested := 0
	for _, name := range []string{"parity", "bench", "replay", "bag make", "weights make", "async-sim", "cycle"} {
		var help, errb bytes.Buffer
		if code := run(context.Background(), append(strings.Fields(name), "-h"), &help, &errb); code != 0 {
			t.Fatalf("%s -h: exit %d %s", name, code, errb.String())
		}
		for _, m := range flagLine.FindAllStringSubmatch(help.String(), -1) {
			for _, v := range bad[m[2]] {
				args := append(append(strings.Fields(name), required[name]...), "-"+m[1], v)
				if name == "bench" {
					args = append(args, "-no-torch")
				}
				var out, stderr bytes.Buffer
				code := run(ctx, args, &out, &stderr)
				if code != 2 || !strings.Contains(stderr.String(), v) {
					t.Errorf("%s -%s %s: exit %d, stderr %q; want exit 2 naming the value", name, m[1], v, code, stderr.String())
				}
				tested++
			}
		}
	}
	if tested < 40 {
		t.Errorf("only %d flag values tried: did the -h format change?", tested)
	}
}

// TestGates: the named gates of issue 16, with the range in the error.
func TestGates(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"replay", "-max-err", "NaN"}, "-max-err NaN: want a finite number >= 0 (0: not checked)"},
		{[]string{"replay", "-max-err", "-1"}, "-max-err -1: want a finite number >= 0"},
		{[]string{"replay", "-min-cos", "NaN"}, "-min-cos NaN: want a finite number from -1 to 1 (a cosine)"},
		{[]string{"parity", "-min-cos", "-Inf"}, "-min-cos -Inf: want a finite number from -1 to 1 (a cosine)"},
		{[]string{"parity", "-min-cos", "NaN"}, "-min-cos NaN: want a finite number from -1 to 1"},
		{[]string{"parity", "-min-cos", "1.5"}, "-min-cos 1.5: want a finite number from -1 to 1"},
		{[]string{"parity", "-threads", "-3"}, "-threads -3: want an integer from 0 to 1024 (0: one per CPU)"},
		{[]string{"parity", "-head-dim", "-1"}, "-head-dim -1: want an integer from 1 to 65536"},
		{[]string{"replay", "-qnn-log-level", "9"}, "-qnn-log-level 9: want an integer from 0 to 5"},
		{[]string{"bag", "make", "-o", filepath.Join(dir, "b"), "-chunks", "1000000000"}, "-chunks 1000000000: want 1 to "},
		{[]string{"bag", "make", "-o", filepath.Join(dir, "b"), "-timeout", "-1s"}, "-timeout -1s: want a duration above 0"},
	} {
		code, out, stderr := runCmd(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", c.args, code, stderr, c.want)
		}
		if strings.Contains(c.want, "-chunks") && !strings.Contains(stderr, " free in ") {
			t.Errorf("%v: %q does not say the size against the free space", c.args, stderr)
		}
		_ = out
	}
}
