package executor

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzChunk feeds any bytes to the chunk subscription: each message is
// either accepted or refused with one reason, and whatever is executed has
// action_dim finite values.
func FuzzChunk(f *testing.F) {
	good, err := chunkMsg(1, at(0), constRows(4, 7, 1)).MarshalCDR()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	if b, err := os.ReadFile(filepath.Join("..", "..", "msgs", "testdata", "action_chunk.cdr")); err == nil {
		f.Add(b)
	}
	f.Add([]byte{0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := newRig(t, nil)
		if err := r.pub.Publish(data); err != nil {
			t.Fatal(err)
		}
		s := r.e.Stats()
		if s.In != 1 || s.Accepted+s.TotalDropped() != 1 {
			t.Fatalf("one message: %+v", s)
		}
		a, ok := r.step(0)
		if s.Accepted == 0 && ok {
			t.Fatalf("a refused chunk was executed: %+v", a)
		}
		if !ok {
			return
		}
		if len(a.Values) != 7 {
			t.Fatalf("%d values executed, want 7", len(a.Values))
		}
		for _, v := range a.Values {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("non-finite value executed: %v", a.Values)
			}
		}
	})
}
