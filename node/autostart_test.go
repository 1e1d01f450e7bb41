package node

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/node/params"
)

// TestRunAutostartedFailureExits: with autostart, a configure that fails
// (here a self_test.golden that does not exist) ends RunAutostarted with
// an error naming the file, so fastwam_node exits non-zero and `ros2
// launch` shows it, instead of a node left unconfigured; without
// autostart, or when autostart succeeds, the node runs until cancelled.
func TestRunAutostartedFailureExits(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no_such_golden.npz")
	for _, c := range []struct {
		name      string
		golden    string
		autostart bool
		wantErr   bool
	}{
		{"missing golden, autostart", missing, true, true},
		{"missing golden, no autostart", missing, false, false},
		{"no golden, autostart", "", true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := testParams()
			p.SelfTest.Golden = c.golden
			bus := NewBus()
			open := func(context.Context, params.Params) (expert.Backend, error) { return newTestBackend(tinyDims()), nil }
			m, err := NewManaged(ManagedConfig{Params: p, Open: open, Name: "/fastwam_action_expert", Tick: make(chan time.Time)}, bus)
			if err != nil {
				t.Fatal(err)
			}
			// The deadline only bounds a failing test: a node that keeps
			// running returns nil when it passes.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			mach, err := m.Serve(ctx, bus, "/fastwam_action_expert")
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- m.RunAutostarted(ctx, mach, c.autostart) }()
			if !c.wantErr {
				// Wait until the autostart (if any) is over, then stop the node.
				want := "unconfigured"
				if c.autostart {
					want = "active"
				}
				for getState(t, bus) != want && ctx.Err() == nil {
					time.Sleep(time.Millisecond)
				}
				cancel()
			}
			err = <-done
			switch {
			case c.wantErr && err == nil:
				t.Fatal("RunAutostarted returned nil after the autostart failed; want the configure error")
			case c.wantErr && !strings.Contains(err.Error(), "no_such_golden.npz"):
				t.Fatalf("RunAutostarted: %v; want the error to name the missing self_test.golden", err)
			case !c.wantErr && err != nil:
				t.Fatalf("RunAutostarted: %v, want nil", err)
			case !c.wantErr && errors.Is(ctx.Err(), context.DeadlineExceeded):
				t.Fatalf("the node did not reach its state within 5 s")
			}
		})
	}
}
