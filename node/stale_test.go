package node

import (
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
)

// TestDiagnosticsStale: while active, no input pair for
// diagnostics.stale_after makes the status STALE (level 3) with a
// message starting "stale:" that says how long; the next pair makes it OK
// again; 0 never goes stale. Before: level 0 "active, waiting for
// inputs" forever.
func TestDiagnosticsStale(t *testing.T) {
	d := tinyDims()
	clock := newFakeClock()
	p := testParams()
	p.StaleAfter = time.Second
	h := newHarness(t, p, newTestBackend(d), withClock(clock))
	h.waitState(StateActive)

	if st := h.diag(); st.Level != msgs.LevelOK || st.Message != "active, waiting for inputs" {
		t.Fatalf("at activation: level %d %q", st.Level, st.Message)
	}
	clock.Advance(1500 * time.Millisecond)
	st := h.diag()
	if st.Level != msgs.LevelStale || !strings.HasPrefix(st.Message, "stale: no input pair for 1.5s (none since the node became active; diagnostics.stale_after 1s)") {
		t.Fatalf("1.5 s after activation without inputs: level %d %q, want STALE", st.Level, st.Message)
	}
	if diagValue(t, st, "no_input_pair_ms") != "1500.00" || diagValue(t, st, "stale_after") != "1" {
		t.Errorf("no_input_pair_ms %s, stale_after %s", diagValue(t, st, "no_input_pair_ms"), diagValue(t, st, "stale_after"))
	}

	// The next chunk: OK again.
	stamp := clock.Now()
	h.send(makeInputs(d, 1, stamp))
	h.waitChunk()
	if st := h.diag(); st.Level != msgs.LevelOK || st.Message != "active, 1 chunks published" {
		t.Fatalf("after a chunk: level %d %q, want OK", st.Level, st.Message)
	}
	// Exactly stale_after is not yet stale; past it is.
	clock.Advance(time.Second)
	if st := h.diag(); st.Level != msgs.LevelOK {
		t.Fatalf("stale_after after the pair: level %d %q, want OK", st.Level, st.Message)
	}
	clock.Advance(2200 * time.Millisecond)
	if st := h.diag(); st.Level != msgs.LevelStale || !strings.HasPrefix(st.Message, "stale: no input pair for 3.2s (since the last one;") {
		t.Fatalf("3.2 s after the pair: level %d %q, want STALE", st.Level, st.Message)
	}

	// Inputs that arrive but are all rejected do not make a pair: still
	// STALE, and the message says why besides.
	h.send(makeInputs(d, 2, stamp)) // duplicates
	st = h.diag()
	if st.Level != msgs.LevelStale || !strings.HasPrefix(st.Message, "stale:") || !strings.Contains(st.Message, "; 2 inputs rejected since the last report") {
		t.Fatalf("rejected inputs while stale: level %d %q", st.Level, st.Message)
	}

	// Inactive is not stale: a deactivated node is not waiting.
	if err := h.node.Deactivate(); err != nil {
		t.Fatal(err)
	}
	if st := h.diag(); st.Level != msgs.LevelOK || st.Message != "inactive" || diagValue(t, st, "no_input_pair_ms") != "n/a" {
		t.Fatalf("inactive: level %d %q", st.Level, st.Message)
	}
	// Activated again, the count starts over.
	if err := h.node.Activate(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(900 * time.Millisecond)
	if st := h.diag(); st.Level != msgs.LevelOK {
		t.Fatalf("0.9 s after activation: level %d %q, want OK", st.Level, st.Message)
	}
}

// TestDiagnosticsStaleNever: diagnostics.stale_after 0 never reports STALE.
func TestDiagnosticsStaleNever(t *testing.T) {
	clock := newFakeClock()
	p := testParams()
	p.StaleAfter = 0
	h := newHarness(t, p, newTestBackend(tinyDims()), withClock(clock))
	h.waitState(StateActive)
	clock.Advance(time.Hour)
	if st := h.diag(); st.Level != msgs.LevelOK || st.Message != "active, waiting for inputs" {
		t.Fatalf("an hour without inputs, stale_after 0: level %d %q", st.Level, st.Message)
	}
}

// TestDiagnosticsStaleSimTime: under use_sim_time the count is on the
// node's clock (/clock), so a bag played at a lower rate is not stale
// between its inputs; a /clock that stops (the player ended) shows: the
// time the clock has stood still counts too.
func TestDiagnosticsStaleSimTime(t *testing.T) {
	d := tinyDims()
	sim, mono := newFakeClock(), newFakeClock()
	p := testParams()
	p.UseSimTime = true
	p.StaleAfter = 2 * time.Second
	h := newHarness(t, p, newTestBackend(d), withClock(sim), withMono(mono))
	h.waitState(StateActive)
	h.send(makeInputs(d, 1, sim.Now()))
	h.waitChunk()

	// Played at 0.4 x: 1.2 s of the bag's time in 3 s of the wall's.
	for range 3 {
		sim.Advance(400 * time.Millisecond)
		mono.Advance(time.Second)
		if st := h.diag(); st.Level != msgs.LevelOK {
			t.Fatalf("bag played at 0.4 x: level %d %q, want OK", st.Level, st.Message)
		}
	}
	// The player ends: /clock stands still, the wall's time goes on.
	mono.Advance(500 * time.Millisecond)
	if st := h.diag(); st.Level != msgs.LevelOK {
		t.Fatalf("1.2 s + 0.5 s still since the pair: level %d %q, want OK", st.Level, st.Message)
	}
	mono.Advance(time.Second)
	st := h.diag()
	if st.Level != msgs.LevelStale || !strings.HasPrefix(st.Message, "stale: no input pair for 2.7s (since the last one;") ||
		!strings.Contains(st.Message, "the node's clock has not moved for 1.5s") {
		t.Fatalf("clock still for 1.5 s: level %d %q, want STALE saying the clock stands still", st.Level, st.Message)
	}
	// A pair arrives (the clock still stands): OK again.
	h.send(makeInputs(d, 2, sim.Now().Add(time.Millisecond)))
	h.waitChunk()
	if st := h.diag(); st.Level != msgs.LevelOK {
		t.Fatalf("after a pair: level %d %q, want OK", st.Level, st.Message)
	}
}

// TestStaleAfterParameter: the contract of the ROS 2 check, `-p
// diagnostics.stale_after:=1.0`, and the checks of the value.
func TestStaleAfterParameter(t *testing.T) {
	if d := params.Default().StaleAfter; d != 2*time.Second {
		t.Errorf("default %v, want 2s", d)
	}
	p, err := params.Load([]string{"--ros-args", "-p", "backend:=cpu", "-p", "cpu.weights:=w", "-p", "diagnostics.stale_after:=1.0"}, "/fastwam_action_expert")
	if err != nil || p.StaleAfter != time.Second {
		t.Fatalf("stale_after:=1.0: %v, %v", p.StaleAfter, err)
	}
	for _, bad := range []string{"-1.0", "nan", "abc"} {
		_, err := params.Load([]string{"--ros-args", "-p", "diagnostics.stale_after:=" + bad}, "/fastwam_action_expert")
		if err == nil || !strings.Contains(err.Error(), "diagnostics.stale_after") {
			t.Errorf("stale_after:=%s: %v, want an error naming the parameter", bad, err)
		}
	}
}
