package executor

import (
	"context"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/rostime"
)

// TestRunOnSimClock: with use_sim_time the control instants are those of
// /clock: nothing is executed while simulated time stands still, and each
// instant crossed executes the row for it.
func TestRunOnSimClock(t *testing.T) {
	p := DefaultParams()
	p.UseSimTime = true
	if err := p.Validate(); err != nil {
		t.Fatalf("use_sim_time refused: %v", err)
	}
	bus := node.NewBus()
	got := make(chan msgs.StampedAction, 64)
	if err := bus.Subscribe(node.Topic{Name: p.Topics.Action, Type: msgs.TypeStampedAction}, func(b []byte) {
		var m msgs.StampedAction
		if err := m.UnmarshalCDR(b); err != nil {
			t.Error(err)
		}
		got <- m
	}); err != nil {
		t.Fatal(err)
	}
	sim := rostime.NewSim()
	sim.Set(t0)
	e, err := New(Config{Params: p, Clock: SimClock(sim)}, bus)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := bus.Advertise(node.Topic{Name: p.Topics.Chunks, Type: msgs.TypeActionChunk})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	b, err := chunkMsg(1, t0, constRows(32, 7, 10)).MarshalCDR()
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Publish(b); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-got:
		t.Fatalf("an action (%v) while simulated time stood still", a.Header.Stamp)
	case <-time.After(100 * time.Millisecond):
	}
	for k := 1; k <= 3; k++ {
		sim.Set(at(k))
		select {
		case a := <-got:
			if a.Header.Stamp != stampOf(at(k)) || a.Row != uint32(k) || a.Values[0] != float32(10+k) {
				t.Fatalf("instant %d: stamp %v, row %d, value %v", k, a.Header.Stamp, a.Row, a.Values[0])
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no action for simulated instant %d", k)
		}
	}
}
