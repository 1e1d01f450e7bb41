package lifecycle_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/lifecycle"
)

// FuzzChangeState: any request bytes give an error (state unchanged) or a
// response that decodes, with the machine in a primary state afterwards.
func FuzzChangeState(f *testing.F) {
	b, err := os.ReadFile(filepath.Join("..", "..", "msgs", "testdata", "lc_change_state_request.cdr"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte{0, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		m := lifecycle.New(lifecycle.Config{})
		resp, err := m.HandleChangeState(context.Background(), data)
		if err != nil {
			if m.State().ID != msgs.PrimaryStateUnconfigured {
				t.Fatalf("a refused request moved the machine to %v", m.State())
			}
			return
		}
		var r msgs.ChangeStateResponse
		if err := r.UnmarshalCDR(resp); err != nil {
			t.Fatal(err)
		}
		if id := m.State().ID; id > msgs.PrimaryStateFinalized {
			t.Fatalf("left in transition state %d", id)
		}
	})
}

// BenchmarkChangeStateRoundTrip: configure then cleanup through the
// service handler (request decode, two transitions each, response encode).
func BenchmarkChangeStateRoundTrip(b *testing.B) {
	m := lifecycle.New(lifecycle.Config{Publish: func(msgs.TransitionEvent) {}})
	configure, _ := (&msgs.ChangeStateRequest{Transition: msgs.Transition{ID: msgs.TransitionConfigure}}).MarshalCDR()
	cleanup, _ := (&msgs.ChangeStateRequest{Transition: msgs.Transition{Label: "cleanup"}}).MarshalCDR()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.HandleChangeState(ctx, configure); err != nil {
			b.Fatal(err)
		}
		if _, err := m.HandleChangeState(ctx, cleanup); err != nil {
			b.Fatal(err)
		}
	}
}
