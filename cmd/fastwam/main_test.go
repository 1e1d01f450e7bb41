package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/internal/npztest"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestParityDefaultPasses(t *testing.T) {
	code, out, stderr := runCmd(t, "parity")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	for _, want := range []string{"embedded tiny/case_all.npz", "embedded tiny/case_first4.npz",
		"single step, timestep 1000", "full loop, 10 steps: final actions", "PASS"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestParityCorruptGolden(t *testing.T) {
	b, err := fs.ReadFile(golden.Tiny(), "tiny/case_all.npz")
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Clone(b)
	bad[len(bad)/2] ^= 0xff // inside an array's data: the zip checksum breaks
	path := filepath.Join(t.TempDir(), "bad.npz")
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd(t, "parity", "-golden", path, "-weights", tinyWeightsFile(t))
	if code == 0 {
		t.Fatal("corrupted golden passed")
	}
	if !strings.Contains(stderr, "bad.npz") {
		t.Errorf("error does not name the file: %s", stderr)
	}
	t.Log(stderr)

	if err := os.WriteFile(path, b[:len(b)/3], 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runCmd(t, "parity", "-golden", path, "-weights", tinyWeightsFile(t)); code == 0 {
		t.Fatal("truncated golden passed")
	} else {
		t.Log(stderr)
	}
}

// writeBundleGolden writes a golden in the device bundle's format (the six
// inputs and pred_noise only); tamper changes one recorded action row.
func writeBundleGolden(t *testing.T, tamper bool) string {
	t.Helper()
	c, err := golden.LoadTiny(t.Context(), "tiny/case_all.npz")
	if err != nil {
		t.Fatal(err)
	}
	pred := slices.Clone(c.Pred)
	if tamper {
		for i := range c.ActionDim {
			pred[i] += 3
		}
	}
	path := filepath.Join(t.TempDir(), "action_step_io.npz")
	if err := npztest.Write(path, npztest.Bundle(c, pred)...); err != nil {
		t.Fatal(err)
	}
	return path
}

func tinyWeightsFile(t *testing.T) string {
	t.Helper()
	b, err := fs.ReadFile(golden.Tiny(), "tiny/weights.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "weights.safetensors")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestParityBundleFormat runs a golden in the device bundle's format (no
// loop data) and checks the gate both ways.
func TestParityBundleFormat(t *testing.T) {
	weights := tinyWeightsFile(t)
	code, out, stderr := runCmd(t, "parity", "-golden", writeBundleGolden(t, false), "-weights", weights, "-chunks", "1")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	if !strings.Contains(out, "no reference in the golden") {
		t.Errorf("bundle-format run does not say the loop has no reference:\n%s", out)
	}
	code, out, stderr = runCmd(t, "parity", "-golden", writeBundleGolden(t, true), "-weights", weights, "-chunks", "1")
	if code != 1 {
		t.Fatalf("tampered prediction: exit %d, want 1\n%s\n%s", code, out, stderr)
	}
	if !strings.Contains(out, "FAIL") || !strings.Contains(stderr, "below the 0.9999 gate") {
		t.Errorf("tampered prediction not reported:\n%s\n%s", out, stderr)
	}
}

func TestParityUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"parity", "-backend", "gpu"},
		{"parity", "-golden", "x.npz"},
		{"parity", "stray"},
		{"nosuchcommand"},
	} {
		code, _, stderr := runCmd(t, args...)
		if code == 0 {
			t.Errorf("%v: exit 0", args)
		}
		if stderr == "" {
			t.Errorf("%v: no message", args)
		}
	}
}

// TestHelp: help goes to stdout with exit 0, for every command and the
// nested bag make, however it is asked for; usage errors go to stderr with
// exit 2.
func TestHelp(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string // in stdout
	}{
		{[]string{"help"}, "usage: fastwam <command>"},
		{[]string{"-h"}, "usage: fastwam <command>"},
		{[]string{"--help"}, "usage: fastwam <command>"},
		{[]string{"help", "parity"}, "usage: fastwam parity"},
		{[]string{"parity", "-h"}, "-min-cos"},
		{[]string{"help", "inspect"}, "usage: fastwam inspect"},
		{[]string{"bench", "-help"}, "-no-torch"},
		{[]string{"help", "replay"}, "-plot"},
		{[]string{"replay", "-h"}, "-progress"},
		{[]string{"help", "bag"}, "make "},
		{[]string{"bag", "-h"}, "make "},
		{[]string{"bag", "help", "make"}, "usage: fastwam bag make -o DIR"},
		{[]string{"help", "bag", "make"}, "usage: fastwam bag make -o DIR"},
		{[]string{"bag", "make", "-h"}, "-force"},
	} {
		code, out, stderr := runCmd(t, tc.args...)
		if code != 0 || !strings.Contains(out, tc.want) || stderr != "" {
			t.Errorf("%q: exit %d, want 0 with %q on stdout and nothing on stderr\nstdout:\n%s\nstderr:\n%s", tc.args, code, tc.want, out, stderr)
		}
	}
	// help bag make is bag make's own usage, not the bag group's.
	_, out, _ := runCmd(t, "help", "bag", "make")
	if strings.Contains(out, "commands:") || !strings.Contains(out, "-chunks") {
		t.Errorf("help bag make printed the group usage, not make's flags:\n%s", out)
	}

	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{nil, "usage: fastwam <command>"},
		{[]string{"help", "frob"}, `fastwam has no command "frob"`},
		{[]string{"help", "bag", "frob"}, `fastwam bag has no command "frob"`},
		{[]string{"help", "parity", "frob"}, `fastwam parity has no subcommand "frob"`},
		{[]string{"bag"}, "fastwam bag: needs a subcommand"},
		{[]string{"bag", "frob"}, `fastwam bag: unknown command "frob"`},
		{[]string{"parity", "-frob"}, "fastwam parity: flag provided but not defined: -frob"},
		{[]string{"parity", "-chunks", "many"}, `invalid value "many" for flag -chunks`},
		{[]string{"frob"}, `fastwam: unknown command "frob"`},
	} {
		code, out, stderr := runCmd(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) || out != "" {
			t.Errorf("%q: exit %d, want 2 with %q on stderr and nothing on stdout\nstdout:\n%s\nstderr:\n%s", tc.args, code, tc.want, out, stderr)
		}
	}
	// A flag error shows the command's flags, then the error as the last line.
	_, _, stderr := runCmd(t, "replay", "-frob")
	if !strings.Contains(stderr, "-plot") || !strings.HasSuffix(stderr, "fastwam replay: flag provided but not defined: -frob\n") {
		t.Errorf("replay -frob: stderr does not end with the error after the usage:\n%s", stderr)
	}
}

func TestVersion(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"version"}, &out, &errOut); code != 0 {
		t.Fatalf("fastwam version: exit %d: %s", code, errOut.String())
	}
	if !strings.HasPrefix(out.String(), "fastwam github.com/fastwam/actionexpert ") || !strings.Contains(out.String(), " revision ") {
		t.Errorf("fastwam version printed %q", out.String())
	}
	out.Reset()
	if code := run(context.Background(), []string{"version", "-json"}, &out, &errOut); code != 0 {
		t.Fatalf("fastwam version -json: exit %d: %s", code, errOut.String())
	}
	var v struct{ Module, Short string }
	if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Module != "github.com/fastwam/actionexpert" || v.Short == "" {
		t.Errorf("fastwam version -json printed %q (%v)", out.String(), err)
	}
	if code := run(context.Background(), []string{"version", "extra"}, &out, &errOut); code != 2 {
		t.Errorf("fastwam version extra: exit %d, want 2", code)
	}
	// The usual spellings of a version flag run the version command.
	for _, args := range [][]string{{"--version"}, {"-version"}, {"--version", "-json"}} {
		_, want, _ := runCmd(t, append([]string{"version"}, args[1:]...)...)
		code, out, stderr := runCmd(t, args...)
		if code != 0 || out != want || stderr != "" {
			t.Errorf("fastwam %q: exit %d, stdout %q, stderr %q; want exit 0 and what the version command prints: %q",
				args, code, out, stderr, want)
		}
	}
}
