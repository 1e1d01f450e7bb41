package executor_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/actions"
	"github.com/fastwam/actionexpert/executor"
	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
)

// TestNothingUnsafeReachesTheExecutor runs the node (CPU reference
// backend, tiny weights) and the executor on one bus, the executor on the
// node's executable-actions topic: with limits in refuse mode a chunk over
// them never reaches the executor's output; in clamp mode every action
// the executor publishes is within the bounds.
func TestNothingUnsafeReachesTheExecutor(t *testing.T) {
	c, err := golden.LoadTiny(t.Context(), golden.TinyCases()[0])
	if err != nil {
		t.Fatal(err)
	}
	w, err := cpu.TinyWeights()
	if err != nil {
		t.Fatal(err)
	}
	if w, err = w.ForInputs(c.VideoTokens, c.ContextTokens); err != nil {
		t.Fatal(err)
	}
	const bound = 0.02 // below the tiny model's largest |action|: the raw chunk exceeds it
	for _, mode := range []actions.LimitMode{actions.LimitRefuse, actions.LimitClamp} {
		t.Run(mode.String(), func(t *testing.T) {
			be, err := cpu.New(w, cpu.Options{BLAS: "gonum"})
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			bus := node.NewBus()
			p := params.Default()
			p.Backend, p.CPU.Weights, p.SelfTest.Skip, p.Steps = params.BackendCPU, "tiny", true, 2
			p.MaxInputAge = 0
			p.Actions.Post.Limits = actions.Limits{Min: []float64{-bound}, Max: []float64{bound}, Mode: mode}
			stamp := time.Unix(1_700_000_000, 0)

			ep := executor.DefaultParams()
			ep.Topics.Chunks = p.Actions.Topic
			ep.ActionDim = c.ActionDim
			clock := executor.NewVirtualClock(stamp)
			var mu sync.Mutex
			var out []msgs.StampedAction
			var raw int
			if err := bus.Subscribe(node.Topic{Name: ep.Topics.Action, Type: msgs.TypeStampedAction}, func(b []byte) {
				var a msgs.StampedAction
				if err := a.UnmarshalCDR(b); err != nil {
					t.Error(err)
				}
				mu.Lock()
				out = append(out, a)
				mu.Unlock()
			}); err != nil {
				t.Fatal(err)
			}
			if err := bus.Subscribe(node.Topic{Name: p.Topics.Actions, Type: msgs.TypeActionChunk}, func([]byte) {
				mu.Lock()
				raw++
				mu.Unlock()
			}); err != nil {
				t.Fatal(err)
			}
			ex, err := executor.New(executor.Config{Params: ep, Clock: clock}, bus)
			if err != nil {
				t.Fatal(err)
			}
			n, err := node.New(node.Config{Params: p}, be, bus)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- n.Run(ctx) }()
			defer func() { cancel(); <-done }()
			<-n.Started()

			h := msgs.Header{Stamp: msgs.Time{Sec: int32(stamp.Unix())}, FrameID: "cameras"}
			kvShape := []uint32{uint32(c.Layers), 1, uint32(c.VideoTokens), uint32(c.AttnWidth)}
			kv := msgs.VideoKVCache{Header: h, Seq: 1, VisibleVideoTokens: uint32(c.Chunk.VisibleVideo),
				Keys: msgs.NewTensorF32(kvShape, c.Chunk.VideoKeys), Values: msgs.NewTensorF32(kvShape, c.Chunk.VideoValues)}
			tc := msgs.TextContext{Header: h, Seq: 1,
				Context:       msgs.NewTensorF32([]uint32{1, uint32(c.ContextTokens), uint32(c.TextDim)}, c.Chunk.Context),
				AttentionMask: c.Chunk.ContextMask}
			for _, m := range []struct {
				topic, typ string
				msg        interface{ MarshalCDR() ([]byte, error) }
			}{{p.Topics.Context, msgs.TypeTextContext, &tc}, {p.Topics.KVCache, msgs.TypeVideoKVCache, &kv}} {
				pub, err := bus.Advertise(node.Topic{Name: m.topic, Type: m.typ})
				if err != nil {
					t.Fatal(err)
				}
				b, err := m.msg.MarshalCDR()
				if err != nil {
					t.Fatal(err)
				}
				if err := pub.Publish(b); err != nil {
					t.Fatal(err)
				}
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				s := n.Stats()
				if s.Out+s.TotalRefused() > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no chunk published or refused: %+v", s)
				}
				time.Sleep(5 * time.Millisecond)
			}
			for k := range 8 {
				ex.Step(stamp.Add(time.Duration(k) * p.ControlPeriod))
			}
			mu.Lock()
			defer mu.Unlock()
			s := n.Stats()
			switch mode {
			case actions.LimitRefuse:
				if s.Refused[actions.ReasonBounds] != 1 || s.Out != 0 || raw != 0 {
					t.Fatalf("refused %v, out %d, model rows published %d; want 1 refused by bounds, nothing published", s.Refused, s.Out, raw)
				}
				if len(out) != 0 {
					t.Fatalf("the executor published %d actions from a refused chunk", len(out))
				}
			case actions.LimitClamp:
				if s.Out != 1 || s.RobotClamped != 1 || len(out) != 8 {
					t.Fatalf("out %d, clamped %d, executor actions %d; want 1, 1, 8", s.Out, s.RobotClamped, len(out))
				}
				for _, a := range out {
					for j, v := range a.Values {
						if v < -bound || v > bound {
							t.Fatalf("executor action row %d dim %d = %v outside ±%v", a.Row, j, v, bound)
						}
					}
				}
			}
		})
	}
}
