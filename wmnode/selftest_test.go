package wmnode

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/internal/testenv"
	"github.com/fastwam/actionexpert/node"
)

const selfTestGolden = "testdata/selftest.npz"

// TestSelfTestGolden: the tiny world model matches the golden written by
// the composed Python references (testdata/make_selftest_golden.py); a
// changed golden value fails, naming the array.
func TestSelfTestGolden(t *testing.T) {
	p := tinyParams()
	m := tinyModel(t, p)
	c, err := LoadSelfTest(t.Context(), selfTestGolden)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Obs.Images) != 2 || c.Obs.Instruction != tinyTask || len(c.Obs.State) != 8 {
		t.Fatalf("golden observation: %d images, instruction %q, state %v", len(c.Obs.Images), c.Obs.Instruction, c.Obs.State)
	}
	r := RunSelfTest(t.Context(), m, c, DefaultSelfTestMinCosine)
	t.Logf("self-test: %v", r)
	if r.Status != "passed" {
		t.Fatalf("self-test: %v", r)
	}
	for _, name := range []string{"keys", "values", "context"} {
		c, err := LoadSelfTest(t.Context(), selfTestGolden)
		if err != nil {
			t.Fatal(err)
		}
		a := map[string][]float32{"keys": c.Keys.Data, "values": c.Values.Data, "context": c.Context.Data}[name]
		for i := range a[:len(a)/2] {
			a[i] = -a[i]
		}
		if r := RunSelfTest(t.Context(), m, c, DefaultSelfTestMinCosine); r.Passed() || !strings.Contains(r.Err.Error(), name) {
			t.Errorf("golden %s half negated: %v, want failed on %s", name, r, name)
		}
	}
}

// TestSelfTestAtConfigure: with self_test.golden, configure runs the
// self-test: it passes with the golden, and fails (the node stays
// unconfigured, the reason given) with a missing, truncated or foreign
// golden; autostart then reports the failure.
func TestSelfTestAtConfigure(t *testing.T) {
	good, err := os.ReadFile(selfTestGolden)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	foreign, err := os.ReadFile("../golden/dit/chain.npz")
	if err != nil {
		t.Fatal(err)
	}
	p0 := tinyParams()
	model := tinyModel(t, p0)
	for _, c := range []struct {
		name, golden, want string
	}{
		{"none", "", ""},
		{"golden", selfTestGolden, ""},
		{"missing", filepath.Join(dir, "no_such.npz"), "no_such.npz"},
		{"truncated", write("truncated.npz", good[:len(good)/2]), "truncated.npz"},
		{"garbage", write("garbage.npz", bytes.Repeat([]byte("PK\x03\x04"), 100)), "garbage.npz"},
		{"foreign", write("foreign.npz", foreign), "foreign.npz"},
		{"strict", selfTestGolden, "below"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := p0
			p.SelfTestGolden = c.golden
			if c.name == "strict" {
				p.SelfTestMinCosine = 1
			}
			r := newRig(t, p, model, false, func(cfg *Config) { cfg.StartInactive = true })
			mach, err := r.wm.ServeLifecycle(t.Context(), r.bus)
			if err != nil {
				t.Fatal(err)
			}
			err = node.Autostart(t.Context(), mach)
			if c.want == "" {
				if err != nil || mach.State().Label != "active" {
					t.Fatalf("autostart: %v (state %s)", err, mach.State().Label)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "self-test") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("autostart: %v; want a configure failure naming the self-test and %q", err, c.want)
			}
			if st := mach.State().Label; st != "unconfigured" {
				t.Errorf("after a failed self-test: %s, want unconfigured", st)
			}
		})
	}
}

// TestRunAutostarted: with autostart, a failed self-test ends the node's
// run with the reason (the process exits); without autostart the node
// waits unconfigured until cancelled; a passing self-test makes it active.
func TestRunAutostarted(t *testing.T) {
	p0 := tinyParams()
	model := tinyModel(t, p0)
	for _, c := range []struct {
		name      string
		golden    string
		autostart bool
		wantErr   bool
		wantState string
	}{
		{"failing self-test, autostart", filepath.Join(t.TempDir(), "no_such.npz"), true, true, "unconfigured"},
		{"failing self-test, no autostart", filepath.Join(t.TempDir(), "no_such.npz"), false, false, "unconfigured"},
		{"self-test, autostart", selfTestGolden, true, false, "active"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := p0
			p.SelfTestGolden = c.golden
			bus := node.NewBus()
			n, err := New(Config{Params: p, Model: model, StartInactive: true, Tick: make(chan time.Time)}, bus)
			if err != nil {
				t.Fatal(err)
			}
			defer n.Close()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			mach, err := n.ServeLifecycle(ctx, bus)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- n.RunAutostarted(ctx, mach, c.autostart) }()
			if c.wantErr {
				err := <-done
				if err == nil || !strings.Contains(err.Error(), "no_such.npz") || !strings.Contains(err.Error(), "the node exits") {
					t.Errorf("RunAutostarted: %v; want the self-test's failure and the exit", err)
				}
				return
			}
			<-n.Started()
			for mach.State().Label != c.wantState {
				select {
				case err := <-done:
					t.Fatalf("RunAutostarted returned %v in state %s", err, mach.State().Label)
				case <-time.After(time.Millisecond):
				}
			}
			cancel()
			if err := <-done; err != nil {
				t.Errorf("RunAutostarted after cancel: %v", err)
			}
		})
	}
}

// TestSelfTestGoldenMatchesItsReference regenerates the self-test golden
// with its generator and requires the same arrays: a reference changed
// without regenerating, or a golden edited by hand, fails here.
func TestSelfTestGoldenMatchesItsReference(t *testing.T) {
	python := ""
	for _, p := range []string{"/usr/bin/python3", "python3"} {
		if exec.Command(p, "-c", "import numpy, PIL, torch").Run() == nil {
			python = p
			break
		}
	}
	if python == "" {
		testenv.Missing(t, "no python3 that imports numpy, PIL and torch; install python3-numpy python3-pil python3-torch to check %s against its generator", selfTestGolden)
		return
	}
	out := filepath.Join(t.TempDir(), "selftest.npz")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Join("testdata", "make_selftest_golden.py"), "--out", out)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make_selftest_golden.py: %v\n%s", err, b)
	}
	keys := []string{"cam0", "cam1", "state", "instruction", "context", "keys", "values"}
	read := func(path string) map[string]golden.Array {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a, err := golden.ParseArrays(t.Context(), path, b, keys...)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	x, y := read(selfTestGolden), read(out)
	for _, k := range keys {
		if !slices.Equal(x[k].Shape, y[k].Shape) || !slices.Equal(x[k].Data, y[k].Data) {
			t.Errorf("%s: array %q differs from what the reference writes now: regenerate with testdata/make_selftest_golden.py", selfTestGolden, k)
		}
	}
}
