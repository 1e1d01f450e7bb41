package node

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/internal/npztest"
	"github.com/fastwam/actionexpert/msgs"
)

// fixtureGolden is a golden step of the test fixture backend whose
// reference prediction is off by a perturbation of relative size rel
// (cosine about 1 - rel²/2).
func fixtureGolden(t *testing.T, d expert.Dims, rel float64) *golden.Case {
	t.Helper()
	in := makeInputs(d, 3, time.Unix(1_700_000_000, 0))
	c := &golden.Case{
		Name: "fixture", Chunk: *in.chunk(t, d), Latents: pattern(d.LatentLen(), 9, 0), Timestep: 952.38,
		Layers: d.Layers, VideoTokens: d.VideoTokens, AttnWidth: d.AttnWidth(), ContextTokens: d.ContextTokens,
		TextDim: d.TextDim, ActionTokens: d.ActionTokens, ActionDim: d.ActionDim,
	}
	b := newTestBackend(d)
	if err := b.BindChunk(context.Background(), &c.Chunk); err != nil {
		t.Fatal(err)
	}
	c.Pred = make([]float32, d.LatentLen())
	if err := b.Step(context.Background(), c.Latents, c.Timestep, c.Pred); err != nil {
		t.Fatal(err)
	}
	if rel > 0 {
		var pn, en float64
		e := make([]float64, len(c.Pred))
		for i, v := range c.Pred {
			e[i] = math.Sin(float64(i)*2.3 + 0.7)
			pn += float64(v) * float64(v)
			en += e[i] * e[i]
		}
		scale := rel * math.Sqrt(pn/en)
		for i := range c.Pred {
			c.Pred[i] += float32(scale * e[i])
		}
	}
	return c
}

func TestSelfTestThreshold(t *testing.T) {
	d := tinyDims()
	g := fixtureGolden(t, d, 0.01)
	res := RunSelfTest(context.Background(), newTestBackend(d), g, 0.9999)
	if res.Status != "passed" || !(res.Cosine > 0.9999 && res.Cosine < 0.99999) {
		t.Fatalf("1%% perturbation at 0.9999: %s (cosine %v), want passed with cosine in (0.9999, 0.99999)", res, res.Cosine)
	}
	res = RunSelfTest(context.Background(), newTestBackend(d), g, 0.99999)
	if res.Status != "failed" || !strings.Contains(res.String(), "below 0.9999900") {
		t.Errorf("1%% perturbation at 0.99999: %s, want failed below 0.9999900", res)
	}
	if res := RunSelfTest(context.Background(), newTestBackend(d), fixtureGolden(t, d, 0), 0.9999); res.Status != "passed" || res.Cosine < 1-1e-12 {
		t.Errorf("exact golden: %s", res)
	}
	fail := newTestBackend(d)
	fail.failNext = 1
	if res := RunSelfTest(context.Background(), fail, g, 0.9999); res.Status != "failed" || !strings.Contains(res.String(), "golden step") {
		t.Errorf("failing backend: %s", res)
	}
	other := d
	other.VideoTokens = 16
	if res := RunSelfTest(context.Background(), newTestBackend(other), g, 0.9999); res.Status != "failed" || !strings.Contains(res.String(), "expects") {
		t.Errorf("other contract: %s", res)
	}
}

func TestSelfTestGate(t *testing.T) {
	d := tinyDims()
	now := time.Unix(1_700_000_000, 0)

	t.Run("passed", func(t *testing.T) {
		b := newTestBackend(d)
		h := newHarness(t, testParams(), b, withGolden(fixtureGolden(t, d, 0)))
		h.waitState(StateActive)
		if st := h.diag(); !strings.HasPrefix(diagValue(t, st, "self_test"), "passed (cosine 1.0000000") {
			t.Errorf("self_test %q", diagValue(t, st, "self_test"))
		}
		h.send(makeInputs(d, 1, now))
		h.waitChunk()
	})

	t.Run("failed", func(t *testing.T) {
		p := testParams()
		p.SelfTest.MinCosine = 0.99999
		h := newHarness(t, p, newTestBackend(d), withGolden(fixtureGolden(t, d, 0.01)))
		h.waitState(StateSelfTestFailed)
		h.send(makeInputs(d, 1, now))
		h.noChunk(30 * time.Millisecond)
		if s := h.node.Stats(); s.Dropped[DropInactive] != 2 || s.Paired != 0 {
			t.Errorf("inactive drops %d paired %d, want 2 0", s.Dropped[DropInactive], s.Paired)
		}
		st := h.diag()
		if st.Level != msgs.LevelError || !strings.HasPrefix(st.Message, "self-test failed: cosine 0.9999") {
			t.Errorf("level %d message %q", st.Level, st.Message)
		}
		if diagValue(t, st, "state") != string(StateSelfTestFailed) {
			t.Errorf("state %s", diagValue(t, st, "state"))
		}
		if h.log.count("ERROR", "refusing to go active") != 1 {
			t.Errorf("log:\n%s", h.log)
		}
		if st := h.diag(); st.Level != msgs.LevelError {
			t.Errorf("level %d on the next report, want ERROR still", st.Level)
		}
	})

	t.Run("skipped", func(t *testing.T) {
		p := testParams()
		p.SelfTest.Skip = true
		b := newTestBackend(d)
		h := newHarness(t, p, b, withGolden(fixtureGolden(t, d, 1)))
		h.waitState(StateActive)
		b.mu.Lock()
		binds := b.binds
		b.mu.Unlock()
		if binds != 0 {
			t.Errorf("the golden ran (%d binds) although self_test.skip is set", binds)
		}
		if st := h.diag(); diagValue(t, st, "self_test") != "skipped (self_test.skip)" {
			t.Errorf("self_test %q", diagValue(t, st, "self_test"))
		}
		h.send(makeInputs(d, 1, now))
		h.waitChunk()
	})
}

// writeGoldenNPZ writes c in the device bundle's .npz format, with an npy
// encoder independent of the reader under test.
func writeGoldenNPZ(t *testing.T, c *golden.Case) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "golden.npz")
	if err := npztest.Write(path, npztest.Bundle(c, c.Pred)...); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSelfTestGoldenFile(t *testing.T) {
	d := tinyDims()
	path := writeGoldenNPZ(t, fixtureGolden(t, d, 0))
	p := testParams()
	p.SelfTest.Golden = path
	h := newHarness(t, p, newTestBackend(d))
	h.waitState(StateActive)
	if r := h.node.SelfTest(); r.Status != "passed" {
		t.Errorf("self-test from %s: %s", path, r)
	}

	p.SelfTest.Golden = filepath.Join(t.TempDir(), "missing.npz")
	if _, err := New(Config{Params: p}, newTestBackend(d), NewBus()); err == nil || !strings.Contains(err.Error(), "self_test.golden") {
		t.Errorf("missing golden: %v", err)
	}
	other := d
	other.ContextTokens = 6
	p.SelfTest.Golden = path
	if _, err := New(Config{Params: p}, newTestBackend(other), NewBus()); err == nil || !strings.Contains(err.Error(), "expects") {
		t.Errorf("golden for another contract: %v", err)
	}
	p.SelfTest.Skip = true // a skipped self-test does not read the file
	p.SelfTest.Golden = filepath.Join(t.TempDir(), "missing.npz")
	if _, err := New(Config{Params: p}, newTestBackend(d), NewBus()); err != nil {
		t.Errorf("skipped self-test with a missing golden: %v", err)
	}
}
