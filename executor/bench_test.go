package executor

import (
	"testing"
	"time"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
)

// BenchmarkStep measures one control instant over three overlapping
// chunks of 32 x 7 (the production shape), publishing on an in-process
// bus without subscribers.
func BenchmarkStep(b *testing.B) {
	for _, agg := range []Aggregation{AggregateLatest, AggregateWeighted} {
		b.Run(string(agg), func(b *testing.B) {
			p := DefaultParams()
			p.Aggregation = agg
			clock := NewVirtualClock(t0)
			bus := node.NewBus()
			e, err := New(Config{Params: p, Clock: clock}, bus)
			if err != nil {
				b.Fatal(err)
			}
			pub, err := bus.Advertise(node.Topic{Name: p.Topics.Chunks, Type: msgs.TypeActionChunk})
			if err != nil {
				b.Fatal(err)
			}
			for k := range 3 {
				data, err := chunkMsg(uint64(k), at(k), constRows(32, 7, float32(k))).MarshalCDR()
				if err != nil {
					b.Fatal(err)
				}
				if err := pub.Publish(data); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				e.Step(at(3).Add(time.Duration(i%16) * time.Nanosecond))
			}
			if s := e.Stats(); s.Out != uint64(b.N) {
				b.Fatalf("%d actions for %d steps", s.Out, b.N)
			}
		})
	}
}
