package executor

import (
	"context"
	"math"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
)

var t0 = time.Unix(1700000000, 0)

const period = 50 * time.Millisecond

// rig is an executor on an in-process bus with a virtual clock, and what
// it published.
type rig struct {
	t     *testing.T
	e     *Executor
	bus   *node.Bus
	clock *VirtualClock
	pub   node.Publisher

	mu      sync.Mutex
	actions []msgs.StampedAction
	diags   []msgs.DiagnosticArray
}

func newRig(t *testing.T, mutate func(*Params)) *rig {
	t.Helper()
	p := DefaultParams()
	if mutate != nil {
		mutate(&p)
	}
	r := &rig{t: t, bus: node.NewBus(), clock: NewVirtualClock(t0)}
	if err := r.bus.Subscribe(node.Topic{Name: p.Topics.Action, Type: msgs.TypeStampedAction}, func(b []byte) {
		var m msgs.StampedAction
		if err := m.UnmarshalCDR(b); err != nil {
			t.Errorf("published action does not decode: %v", err)
		}
		r.mu.Lock()
		r.actions = append(r.actions, m)
		r.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := r.bus.Subscribe(node.Topic{Name: p.Topics.Diagnostics, Type: msgs.TypeDiagnosticArray}, func(b []byte) {
		var m msgs.DiagnosticArray
		if err := m.UnmarshalCDR(b); err != nil {
			t.Errorf("published diagnostics do not decode: %v", err)
		}
		r.mu.Lock()
		r.diags = append(r.diags, m)
		r.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{Params: p, Clock: r.clock}, r.bus)
	if err != nil {
		t.Fatal(err)
	}
	r.e = e
	if r.pub, err = r.bus.Advertise(node.Topic{Name: p.Topics.Chunks, Type: msgs.TypeActionChunk}); err != nil {
		t.Fatal(err)
	}
	return r
}

// at is the k-th control instant after t0.
func at(k int) time.Time { return t0.Add(time.Duration(k) * period) }

func stampOf(t time.Time) msgs.Time {
	return msgs.Time{Sec: int32(t.Unix()), Nanosec: uint32(t.Nanosecond())}
}

// constRows returns n rows of width dim, row i holding base + i in every value.
func constRows(n, dim int, base float32) [][]float32 {
	rows := make([][]float32, n)
	for i := range rows {
		rows[i] = make([]float32, dim)
		for j := range rows[i] {
			rows[i][j] = base + float32(i)
		}
	}
	return rows
}

func chunkMsg(seq uint64, stamp time.Time, rows [][]float32) *msgs.ActionChunk {
	m := &msgs.ActionChunk{Header: msgs.Header{Stamp: stampOf(stamp), FrameID: "base_link"}, Seq: seq, Dt: period.Seconds()}
	for _, r := range rows {
		m.Actions = append(m.Actions, msgs.ActionRow{Values: r})
	}
	return m
}

func (r *rig) send(m *msgs.ActionChunk) {
	r.t.Helper()
	b, err := m.MarshalCDR()
	if err != nil {
		r.t.Fatal(err)
	}
	if err := r.pub.Publish(b); err != nil {
		r.t.Fatal(err)
	}
}

// step moves the clock to instant k (when it is behind), executes the
// instant and returns the action published for it, if any.
func (r *rig) step(k int) (msgs.StampedAction, bool) {
	r.mu.Lock()
	n := len(r.actions)
	r.mu.Unlock()
	if d := at(k).Sub(r.clock.Now()); d > 0 {
		r.clock.Advance(d) // the clock reads the instant executed, as under Run
	}
	r.e.Step(at(k))
	r.mu.Lock()
	defer r.mu.Unlock()
	switch len(r.actions) - n {
	case 0:
		return msgs.StampedAction{}, false
	case 1:
		a := r.actions[n]
		if a.Header.Stamp != stampOf(at(k)) {
			r.t.Errorf("instant %d: action stamped %v, want %v", k, a.Header.Stamp, stampOf(at(k)))
		}
		return a, true
	}
	r.t.Fatalf("instant %d: %d actions published", k, len(r.actions)-n)
	return msgs.StampedAction{}, false
}

// want checks the action of instant k: values, source chunk, row, count
// of aggregated chunks and the held flag.
func (r *rig) want(k int, values []float32, seq uint64, row, aggregated uint32, held bool) {
	r.t.Helper()
	a, ok := r.step(k)
	if !ok {
		r.t.Fatalf("instant %d: nothing published", k)
	}
	if len(a.Values) != len(values) {
		r.t.Fatalf("instant %d: %d values, want %d", k, len(a.Values), len(values))
	}
	for i := range values {
		if math.Abs(float64(a.Values[i]-values[i])) > 1e-6 {
			r.t.Errorf("instant %d: values %v, want %v", k, a.Values, values)
			break
		}
	}
	if a.ChunkSeq != seq || a.Row != row || a.Aggregated != aggregated || a.Held != held {
		r.t.Errorf("instant %d: chunk %d row %d aggregated %d held %v, want chunk %d row %d aggregated %d held %v",
			k, a.ChunkSeq, a.Row, a.Aggregated, a.Held, seq, row, aggregated, held)
	}
}

func fill(dim int, v float32) []float32 {
	out := make([]float32, dim)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestLatestSelection: A covers instants 0-3, B (newer) 2-5; the newest
// covering chunk wins at 2 and 3, A's rows never come back, and after B's
// last row the last action is held.
func TestLatestSelection(t *testing.T) {
	r := newRig(t, nil)
	if _, ok := r.step(0); ok {
		t.Fatal("an action before any chunk")
	}
	r.send(chunkMsg(1, at(0), constRows(4, 7, 10))) // A: 10, 11, 12, 13
	r.want(0, fill(7, 10), 1, 0, 1, false)
	r.want(1, fill(7, 11), 1, 1, 1, false)
	r.send(chunkMsg(2, at(2), constRows(4, 7, 20))) // B: 20, 21, 22, 23 at instants 2-5
	r.want(2, fill(7, 20), 2, 0, 1, false)
	r.want(3, fill(7, 21), 2, 1, 1, false)
	r.want(4, fill(7, 22), 2, 2, 1, false)
	r.want(5, fill(7, 23), 2, 3, 1, false)
	r.want(6, fill(7, 23), 2, 3, 1, true) // starvation: held
	r.want(7, fill(7, 23), 2, 3, 1, true)
	s := r.e.Stats()
	if s.Starvations != 2 || s.Held != 2 || s.Out != 8 || s.Accepted != 2 || s.Seams != 1 || s.ChunksHeld != 0 {
		t.Errorf("stats %+v", s)
	}
}

// TestSelectionOrder: the newest by stamp wins whatever the arrival order,
// and seq breaks a tie of stamps; a chunk stamped between two instants is
// read at the nearest row.
func TestSelectionOrder(t *testing.T) {
	r := newRig(t, nil)
	r.send(chunkMsg(9, at(1), constRows(5, 7, 30)))  // newer stamp, arrives first
	r.send(chunkMsg(10, at(0), constRows(5, 7, 40))) // higher seq, older stamp
	r.want(1, fill(7, 30), 9, 0, 1, false)
	r.send(chunkMsg(4, at(2), constRows(5, 7, 50)))
	r.send(chunkMsg(5, at(2), constRows(5, 7, 60))) // same stamp, higher seq
	r.want(2, fill(7, 60), 5, 0, 1, false)
	// Stamped 20 ms after instant 3: instant 4 is 30 ms later, row round(0.6) = 1.
	r.send(chunkMsg(6, at(3).Add(20*time.Millisecond), constRows(5, 7, 70)))
	r.want(4, fill(7, 71), 6, 1, 1, false)
}

// TestAverage: where A and B overlap the mean of their rows is executed.
func TestAverage(t *testing.T) {
	r := newRig(t, func(p *Params) { p.Aggregation = AggregateAverage; p.ActionDim = 2 })
	r.send(chunkMsg(1, at(0), [][]float32{{1, 2}, {3, 4}, {5, 6}}))
	r.send(chunkMsg(2, at(1), [][]float32{{10, 20}, {30, 40}, {50, 60}}))
	r.send(chunkMsg(3, at(2), [][]float32{{-2, 7}, {0, 0}}))
	r.want(0, []float32{1, 2}, 1, 0, 1, false)
	r.want(1, []float32{(3 + 10) / 2.0, (4 + 20) / 2.0}, 2, 0, 2, false)
	r.want(2, []float32{(5 + 30 - 2) / 3.0, (6 + 40 + 7) / 3.0}, 3, 0, 3, false)
	r.want(3, []float32{(50 + 0) / 2.0, (60 + 0) / 2.0}, 3, 1, 2, false)
}

// TestWeightedAverage: rows fold in stamp order, old*(1-w) + new*w, even
// when the chunks arrive newest first.
func TestWeightedAverage(t *testing.T) {
	for _, c := range []struct {
		w    float64
		want float32
	}{
		{0.7, (1*0.3+2*0.7)*0.3 + 4*0.7}, // 3.31
		{0.5, ((1+2)/2.0 + 4) / 2},       // 2.75
		{1, 4},                           // w = 1 is latest
	} {
		r := newRig(t, func(p *Params) { p.Aggregation = AggregateWeighted; p.AggregationWeight = c.w; p.ActionDim = 1 })
		r.clock.Advance(2 * period)
		r.send(chunkMsg(3, at(2), [][]float32{{4}}))
		r.send(chunkMsg(2, at(1), [][]float32{{9}, {2}}))
		r.send(chunkMsg(1, at(0), [][]float32{{9}, {9}, {1}}))
		r.want(2, []float32{c.want}, 3, 0, 3, false)
	}
}

func TestStarvationStop(t *testing.T) {
	r := newRig(t, func(p *Params) { p.OnStarvation = StarveStop })
	r.send(chunkMsg(1, at(0), constRows(2, 7, 1)))
	r.want(0, fill(7, 1), 1, 0, 1, false)
	r.want(1, fill(7, 2), 1, 1, 1, false)
	for k := 2; k < 5; k++ {
		if a, ok := r.step(k); ok {
			t.Fatalf("instant %d: %+v published on starvation with stop", k, a)
		}
	}
	if s := r.e.Stats(); s.Starvations != 3 || s.Held != 0 || s.Out != 2 {
		t.Errorf("stats %+v", s)
	}
	// A new chunk ends the starvation; the switch is a gap, not a jump.
	r.send(chunkMsg(2, at(5), constRows(2, 7, 8)))
	r.want(5, fill(7, 8), 2, 0, 1, false)
	if s := r.e.Stats(); s.Seams != 1 || s.SeamGaps != 1 || len(r.e.SeamJumps()) != 0 {
		t.Errorf("after the gap: %+v, jumps %v", s, r.e.SeamJumps())
	}
}

// TestSeamJump: the L2 distance between the outgoing and the incoming
// chunk's rows at the instant of each switch.
func TestSeamJump(t *testing.T) {
	r := newRig(t, func(p *Params) { p.ActionDim = 2 })
	r.send(chunkMsg(1, at(0), [][]float32{{0, 0}, {1, 0}, {2, 0}, {3, 0}}))
	r.want(0, []float32{0, 0}, 1, 0, 1, false)
	r.send(chunkMsg(2, at(1), [][]float32{{1, 1}, {2, 1}, {3, 1}, {4, 1}})) // at 1: A (1,0), B (1,1): jump 1
	r.want(1, []float32{1, 1}, 2, 0, 1, false)
	r.want(2, []float32{2, 1}, 2, 1, 1, false)
	r.send(chunkMsg(3, at(3), [][]float32{{7, 5}, {0, 0}})) // at 3: B row 2 (3,1), C (7,5): jump sqrt(16+16)
	r.want(3, []float32{7, 5}, 3, 0, 1, false)
	r.send(chunkMsg(4, at(4), [][]float32{{3, 4}})) // at 4: C (0,0), D (3,4): jump 5
	r.want(4, []float32{3, 4}, 4, 0, 1, false)
	want := []float64{1, math.Sqrt(32), 5}
	got := r.e.SeamJumps()
	if len(got) != len(want) {
		t.Fatalf("jumps %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-9 {
			t.Fatalf("jumps %v, want %v", got, want)
		}
	}
	d := diagValues(t, r.e.Diagnostics(at(5)))
	for k, v := range map[string]string{"seams": "3", "seams.gap": "0", "seam_jump.p50": "5", "seam_jump.p95": "5.65685", "seam_jump.max": "5.65685"} {
		if d[k] != v {
			t.Errorf("diagnostics %s = %q, want %q", k, d[k], v)
		}
	}
}

func diagValues(t *testing.T, a msgs.DiagnosticArray) map[string]string {
	t.Helper()
	if len(a.Status) != 1 || a.Status[0].Name != DiagnosticName || a.Status[0].Values[1].Key != "build" {
		t.Fatalf("diagnostics %+v", a)
	}
	m := map[string]string{"_level": string('0' + a.Status[0].Level), "_message": a.Status[0].Message}
	for _, kv := range a.Status[0].Values {
		if _, dup := m[kv.Key]; dup {
			t.Errorf("key %s twice", kv.Key)
		}
		m[kv.Key] = kv.Value
	}
	return m
}

// TestRefusedChunks: every bad chunk is refused with its reason, counted,
// and never executed.
func TestRefusedChunks(t *testing.T) {
	good := func() *msgs.ActionChunk { return chunkMsg(50, at(10), constRows(3, 7, 5)) }
	cases := []struct {
		name   string
		reason DropReason
		text   string
		mutate func(m *msgs.ActionChunk)
		raw    []byte
	}{
		{"garbage", DropDecode, "msgs: ActionChunk", nil, []byte{0, 1, 0, 0, 1, 2}},
		{"dt 0", DropDtInvalid, "dt 0 is not a positive number of seconds (want control_period 0.05)", func(m *msgs.ActionChunk) { m.Dt = 0 }, nil},
		{"dt negative", DropDtInvalid, "dt -0.05 is not a positive", func(m *msgs.ActionChunk) { m.Dt = -0.05 }, nil},
		{"dt NaN", DropDtInvalid, "dt NaN is not", func(m *msgs.ActionChunk) { m.Dt = math.NaN() }, nil},
		{"dt inf", DropDtInvalid, "dt +Inf is not", func(m *msgs.ActionChunk) { m.Dt = math.Inf(1) }, nil},
		{"dt other", DropDtMismatch, "dt 0.1 s differs from control_period 0.05 s", func(m *msgs.ActionChunk) { m.Dt = 0.1 }, nil},
		{"stamp", DropStamp, "header.stamp nanosec 1000000000 is not below 1e9", func(m *msgs.ActionChunk) { m.Header.Stamp.Nanosec = 1e9 }, nil},
		{"no rows", DropEmpty, "no actions", func(m *msgs.ActionChunk) { m.Actions = nil }, nil},
		{"narrow", DropWidth, "row 0 has 6 values, want 7 (action_dim)", func(m *msgs.ActionChunk) {
			for i := range m.Actions {
				m.Actions[i].Values = m.Actions[i].Values[:6]
			}
		}, nil},
		{"ragged", DropWidth, "row 2 has 8 values, want 7", func(m *msgs.ActionChunk) { m.Actions[2].Values = append(m.Actions[2].Values, 1) }, nil},
		{"NaN", DropNonFinite, "row 1 value 3 is NaN", func(m *msgs.ActionChunk) { m.Actions[1].Values[3] = float32(math.NaN()) }, nil},
		{"Inf", DropNonFinite, "row 0 value 0 is -Inf", func(m *msgs.ActionChunk) { m.Actions[0].Values[0] = float32(math.Inf(-1)) }, nil},
		{"stale", DropStale, "its last action was for", func(m *msgs.ActionChunk) { m.Header.Stamp = stampOf(at(-3)) }, nil},
		// The boundary: the last of the 3 rows is for instant 9, one
		// period before now (row(now) = 3 = len(rows)); a check with > in
		// place of >= would take it (issue 16).
		{"stale at the boundary", DropStale, "its last action was for", func(m *msgs.ActionChunk) { m.Header.Stamp = stampOf(at(7)) }, nil},
		{"future", DropFuture, "after now, more than its 3 rows of 50ms (clocks out of step?)", func(m *msgs.ActionChunk) { m.Header.Stamp = stampOf(at(14)) }, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, nil)
			r.clock.Advance(10 * period) // now = instant 10
			data := c.raw
			if data == nil {
				m := good()
				c.mutate(m)
				var err error
				if data, err = m.MarshalCDR(); err != nil {
					t.Fatal(err)
				}
			}
			if err := r.pub.Publish(data); err != nil {
				t.Fatal(err)
			}
			if a, ok := r.step(10); ok {
				t.Fatalf("a refused chunk was executed: %+v", a)
			}
			s := r.e.Stats()
			if s.Dropped[c.reason] != 1 || s.TotalDropped() != 1 || s.Accepted != 0 || s.In != 1 {
				t.Fatalf("stats %+v, want one %s drop", s, c.reason)
			}
			d := diagValues(t, r.e.Diagnostics(at(10)))
			if d["dropped."+string(c.reason)] != "1" || !strings.Contains(d["last_refused"], c.text) || d["_level"] != "1" {
				t.Errorf("diagnostics %v; want dropped.%s 1 and last_refused containing %q at WARN", d, c.reason, c.text)
			}
			// The next report has nothing new: OK again.
			if d := diagValues(t, r.e.Diagnostics(at(11))); d["_level"] != "0" {
				t.Errorf("second report level %s (%s), want OK", d["_level"], d["_message"])
			}
			// A good chunk still goes through afterwards.
			r.send(good())
			r.want(11, fill(7, 6), 50, 1, 1, false)
		})
	}
}

// TestDuplicateAndDimFromFirstChunk: with action_dim 0 the first accepted
// chunk sets the width; a second copy of a chunk is refused.
func TestDuplicateAndDimFromFirstChunk(t *testing.T) {
	r := newRig(t, func(p *Params) { p.ActionDim = 0 })
	r.send(chunkMsg(1, at(0), [][]float32{{}})) // width 0 never sets the dimension
	r.send(chunkMsg(2, at(0), constRows(3, 3, 1)))
	r.send(chunkMsg(2, at(0), constRows(3, 3, 1)))
	r.send(chunkMsg(3, at(1), constRows(3, 4, 1)))
	s := r.e.Stats()
	if s.Accepted != 1 || s.Dropped[DropDuplicate] != 1 || s.Dropped[DropWidth] != 2 {
		t.Fatalf("stats %+v", s)
	}
	if d := diagValues(t, r.e.Diagnostics(at(0))); d["action_dim"] != "3" || !strings.Contains(d["last_refused"], "row 0 has 4 values, want 3") {
		t.Errorf("diagnostics %v", d)
	}
	r.want(0, fill(3, 1), 2, 0, 1, false)
}

// TestEviction: no more than maxChunks chunks are held; the oldest goes.
func TestEviction(t *testing.T) {
	r := newRig(t, func(p *Params) { p.ActionDim = 1 })
	for i := range maxChunks + 3 {
		r.send(chunkMsg(uint64(i), at(i), constRows(100, 1, float32(i))))
	}
	s := r.e.Stats()
	if s.ChunksHeld != maxChunks || s.Dropped[DropEvicted] != 3 {
		t.Fatalf("stats %+v", s)
	}
}

func TestDiagnosticsContent(t *testing.T) {
	r := newRig(t, func(p *Params) { p.Aggregation = AggregateAverage })
	d := diagValues(t, r.e.Diagnostics(at(0)))
	for k, v := range map[string]string{
		"state": "waiting", "_level": "0", "_message": "waiting for chunks on action_chunk", "aggregation": "average",
		"aggregation_weight": "0.7", "on_starvation": "hold", "control_period_s": "0.05", "action_dim": "7",
		"in.action_chunk": "0", "out": "0", "starvations": "0", "dropped": "0", "seam_jump.p50": "n/a",
		"seam_jump.max": "n/a", "current_chunk": "none", "last_refused": "none",
	} {
		if d[k] != v {
			t.Errorf("%s = %q, want %q", k, d[k], v)
		}
	}
	r.send(chunkMsg(4, at(0), constRows(1, 7, 0)))
	r.step(0)
	r.step(1) // starved, held
	d = diagValues(t, r.e.Diagnostics(at(1)))
	for k, v := range map[string]string{
		"state": "starving", "_level": "1", "_message": "1 starved instants (hold) since the last report",
		"in.action_chunk": "1", "accepted": "1", "out": "2", "out.held": "1", "starvations": "1", "current_chunk": "4",
	} {
		if d[k] != v {
			t.Errorf("%s = %q, want %q", k, d[k], v)
		}
	}
}

// TestRunTicksAndStops drives Run with the virtual clock: one action per
// control period, a report per diagnostics period, a STALE report on
// cancellation, and no goroutine left behind.
func TestRunTicksAndStops(t *testing.T) {
	before := runtime.NumGoroutine()
	r := newRig(t, func(p *Params) { p.DiagnosticsPeriod = 4 * period })
	r.send(chunkMsg(1, at(0), constRows(32, 7, 0)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.e.Run(ctx) }()
	// Wait until Run has made its tickers (it takes the first tick).
	deadline := time.Now().Add(5 * time.Second)
	for {
		r.clock.mu.Lock()
		n := len(r.clock.tickers)
		r.clock.mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run made no tickers")
		}
		runtime.Gosched()
	}
	if err := r.e.Run(ctx); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Errorf("a second Run: %v", err)
	}
	for range 9 {
		r.clock.Advance(period)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.actions) != 9 {
		t.Fatalf("%d actions for 9 control periods", len(r.actions))
	}
	for i, a := range r.actions {
		if a.Header.Stamp != stampOf(at(i+1)) || a.Row != uint32(i+1) || a.Values[0] != float32(i+1) {
			t.Errorf("action %d: stamp %v row %d values %v", i, a.Header.Stamp, a.Row, a.Values)
		}
	}
	if len(r.diags) != 3 { // at 4 and 8 periods, then the last one
		t.Fatalf("%d diagnostics reports, want 3", len(r.diags))
	}
	last := r.diags[len(r.diags)-1].Status[0]
	if last.Level != msgs.LevelStale || last.Message != "stopped" {
		t.Errorf("last report %d %q, want STALE stopped", last.Level, last.Message)
	}
	// The tickers are stopped: advancing further delivers nothing.
	r.clock.Advance(10 * period)
	if len(r.actions) != 9 {
		t.Errorf("actions after Run returned")
	}
	deadline = time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Run, %d before", n, before)
	}
}

// TestRunStopsWithoutTicks: cancellation alone ends Run promptly.
func TestRunStopsWithoutTicks(t *testing.T) {
	r := newRig(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := r.e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Run took %v to notice cancellation", d)
	}
}

func TestNewRefusesBadParams(t *testing.T) {
	p := DefaultParams()
	p.ControlPeriod = 0
	if _, err := New(Config{Params: p}, node.NewBus()); err == nil || !strings.Contains(err.Error(), `"control_period" must be in`) {
		t.Fatalf("New: %v", err)
	}
	if _, err := New(Config{Params: DefaultParams()}, nil); err == nil {
		t.Fatal("New without a transport")
	}
	// A bus topic of another type cannot be subscribed.
	bus := node.NewBus()
	if _, err := bus.Advertise(node.Topic{Name: "action_chunk", Type: msgs.TypeTensor}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Params: DefaultParams()}, bus); err == nil || !strings.Contains(err.Error(), "subscribe action_chunk") {
		t.Fatalf("New on a topic of another type: %v", err)
	}
}

// The executor's status is named from its fully qualified name.
func TestStatusName(t *testing.T) {
	if got := StatusName("/arm_left/fastwam_executor"); got != "/arm_left/fastwam_executor: executor" {
		t.Errorf("StatusName = %q", got)
	}
	if StatusName("") != DiagnosticName {
		t.Errorf("default %q", StatusName(""))
	}
}
