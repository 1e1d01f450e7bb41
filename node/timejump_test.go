package node

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/actions"
	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
)

// regressionInputs reads the inputs of the committed regression bag
// (golden/regression), in log-time order, as `ros2 bag play` sends them.
func regressionInputs(t *testing.T) []bag.Message {
	t.Helper()
	dir, err := golden.ExtractRegressionBag(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r, err := bag.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var in []bag.Message
	for m, err := range r.Messages(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Type == msgs.TypeVideoKVCache || m.Type == msgs.TypeTextContext {
			in = append(in, m)
		}
	}
	if len(in) != 16 {
		t.Fatalf("the regression bag has %d inputs, want 8 caches and 8 contexts", len(in))
	}
	return in
}

// play feeds the inputs to h in order, waiting for the chunk of each cache
// (as a player at the bag's rate would), and returns the chunks.
func play(t *testing.T, h *harness, in []bag.Message) []msgs.ActionChunk {
	t.Helper()
	var out []msgs.ActionChunk
	for _, m := range in {
		if m.Type == msgs.TypeTextContext {
			h.sendRaw(h.ctxPub, slices.Clone(m.Data))
			continue
		}
		h.sendRaw(h.kvPub, slices.Clone(m.Data))
		out = append(out, h.waitChunk())
	}
	return out
}

// TestRegressionPlayedTwice plays the regression bag's inputs twice to one
// node, as `ros2 bag play golden/regression` run twice does: the second
// play is one time jump backwards, and gives the same 8 chunks again
// (before: 0, every input rejected as out_of_order).
func TestRegressionPlayedTwice(t *testing.T) {
	in := regressionInputs(t)
	c, err := golden.LoadTiny(t.Context(), golden.TinyCases()[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, policy := range []params.SyncPolicy{params.SyncExact, params.SyncLatest} {
		t.Run(string(policy), func(t *testing.T) {
			p := testParams()
			p.Sync.Policy = policy
			h := newHarness(t, p, tinyCPU(t, c))
			h.waitState(StateActive)
			first := play(t, h, in)
			second := play(t, h, in)
			h.noChunk(50 * time.Millisecond)
			for k := range first {
				a, b := first[k], second[k]
				if a.KVSeq != uint64(k) || b.KVSeq != a.KVSeq || b.Header != a.Header || b.Seq != a.Seq+8 {
					t.Errorf("chunk %d: kv_seq %d / %d, seq %d / %d", k, a.KVSeq, b.KVSeq, a.Seq, b.Seq)
				}
				sameFloats(t, "second play's actions", flatten(b), flatten(a))
			}
			s := h.node.Stats()
			if s.TotalRejected() != 0 || s.Out != 16 || h.node.TimeJumps() != 1 {
				t.Errorf("rejected %v, %d chunks, %d time jumps; want none, 16, 1", s.Rejected, s.Out, h.node.TimeJumps())
			}
			if got := diagValue(t, h.diag(), "time_jumps"); got != "1" {
				t.Errorf("diagnostics time_jumps %s, want 1", got)
			}
			if n := h.log.count("WARN", "time jump backwards", "restarts at or below the first accepted 0", "jump 1"); n != 1 {
				t.Errorf("%d jump warnings, want 1:\n%s", n, h.log)
			}
			// A third play is a second jump.
			play(t, h, in)
			if h.node.TimeJumps() != 2 || h.log.count("time jump backwards") != 2 {
				t.Errorf("third play: %d jumps, %d warnings; want 2, 2", h.node.TimeJumps(), h.log.count("time jump backwards"))
			}
		})
	}
}

// TestTimeJumpRule checks the detection rule: what is a jump and what is
// still a reordering.
func TestTimeJumpRule(t *testing.T) {
	d := tinyDims()
	base := time.Unix(1_700_000_000, 0)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	for _, tc := range []struct {
		name        string
		syncTimeout time.Duration
		seq         uint64 // of the last input, after seqs 10, 11, 12 at 0, 100, 200 ms (warm inputs of them)
		stampMs     int
		jump        bool
		reject      Reason
		warm        int // inputs before the last one; 0 means 3
	}{
		{"small reordering", 0, 11, 150, false, RejectOutOfOrder, 0},
		{"seq past the first, 0.9 s back", 0, 13, -700, false, RejectOutOfOrder, 0},
		{"more than 1 s back", 0, 13, -900, true, "", 0},
		{"exactly 1 s back: not more than the threshold", 0, 13, -800, false, RejectOutOfOrder, 0},
		{"exactly a 3 s sync.timeout back", 3 * time.Second, 13, -2800, false, RejectOutOfOrder, 0},
		{"seq restarts at the first", 0, 10, 100, true, "", 0},
		{"seq restarts below the first", 0, 0, 150, true, "", 0},
		{"equal stamp, restarted seq: a duplicate", 0, 10, 200, false, RejectDuplicate, 0},
		{"2 s back within a 3 s sync.timeout", 3 * time.Second, 13, -1800, false, RejectOutOfOrder, 0},
		{"4 s back beyond a 3 s sync.timeout", 3 * time.Second, 13, -3900, true, "", 0},
		// The 1 s floor itself: with sync.timeout below it, 0.9 s back
		// is still a reordering (a floor of 0.5 s would take it for a jump).
		{"0.9 s back within the floor, sync.timeout 0.2 s", 200 * time.Millisecond, 13, -700, false, RejectOutOfOrder, 0},
		{"1.1 s back beyond the floor, sync.timeout 0.2 s", 200 * time.Millisecond, 13, -900, true, "", 0},
		{"lower seq right after the first input: a reordering", 0, 5, -50, false, RejectOutOfOrder, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testParams()
			if tc.syncTimeout > 0 {
				p.Sync.Timeout = tc.syncTimeout
			}
			h := newHarness(t, p, newTestBackend(d))
			h.waitState(StateActive)
			warm := tc.warm
			if warm == 0 {
				warm = 3
			}
			for k := range warm {
				h.send(makeInputs(d, uint64(10+k), at(100*k)))
				h.waitChunk()
			}
			// The context's seq is the cache's + 1000 (makeInputs): both
			// restart, or not, alike.
			h.send(makeInputs(d, tc.seq, at(tc.stampMs)))
			if tc.jump {
				if m := h.waitChunk(); m.KVSeq != tc.seq {
					t.Errorf("chunk kv_seq %d, want %d", m.KVSeq, tc.seq)
				}
				// One jump, detected on the context (it arrives first);
				// the cache of the same stamp is then accepted.
				if h.node.TimeJumps() != 1 || h.log.count("time jump backwards on "+p.Topics.Context) != 1 {
					t.Errorf("%d jumps; log:\n%s", h.node.TimeJumps(), h.log)
				}
				if s := h.node.Stats(); s.TotalRejected() != 0 {
					t.Errorf("rejected %v", s.Rejected)
				}
				return
			}
			h.noChunk(50 * time.Millisecond)
			if s := h.node.Stats(); s.Rejected[tc.reject] != 2 || h.node.TimeJumps() != 0 {
				t.Errorf("rejected %v, %d jumps; want both inputs %s and no jump", s.Rejected, h.node.TimeJumps(), tc.reject)
			}
		})
	}
}

// TestTimeJumpDropsOldTimeline: the inputs waiting for a partner when the
// stamps jump back belong to the old timeline and are dropped, counted as
// dropped.time_jump; the partner of the jump's input stays and pairs.
func TestTimeJumpDropsOldTimeline(t *testing.T) {
	d := tinyDims()
	base := time.Unix(1_700_000_000, 0)
	p := testParams()
	p.Sync.Timeout = time.Hour // nothing expires during the test
	h := newHarness(t, p, newTestBackend(d))
	h.waitState(StateActive)
	h.send(makeInputs(d, 0, base))
	h.waitChunk()
	// Two caches of the old timeline wait for their contexts.
	h.sendKV(makeInputs(d, 1, base.Add(time.Second)).kv)
	h.sendKV(makeInputs(d, 2, base.Add(2*time.Second)).kv)
	// The producer restarts 10 minutes earlier: the cache arrives first.
	restart := makeInputs(d, 0, base.Add(-10*time.Minute))
	h.sendKV(restart.kv)
	h.sendCtx(restart.ctx)
	if m := h.waitChunk(); m.KVSeq != 0 || m.Header.Stamp != restart.kv.Header.Stamp {
		t.Errorf("chunk kv_seq %d stamp %+v, want the restart's", m.KVSeq, m.Header.Stamp)
	}
	s := h.node.Stats()
	if s.Dropped[DropTimeJump] != 2 || h.node.TimeJumps() != 1 || s.TotalRejected() != 0 {
		t.Errorf("dropped %v, rejected %v, %d jumps; want 2 time_jump drops, none rejected, 1 jump", s.Dropped, s.Rejected, h.node.TimeJumps())
	}
	if st := h.diag(); diagValue(t, st, "dropped.time_jump") != "2" || diagValue(t, st, "waiting_for_partner") != "0" {
		t.Errorf("diagnostics dropped.time_jump %s waiting %s", diagValue(t, st, "dropped.time_jump"), diagValue(t, st, "waiting_for_partner"))
	}
}

// TestPairerDropAfter checks dropAfter on both policies directly.
func TestPairerDropAfter(t *testing.T) {
	base := time.Unix(1_700_000_000, 0)
	kv := func(s int) *kvInput { return &kvInput{stamp: base.Add(time.Duration(s) * time.Second)} }
	ctx := func(s int) *ctxInput { return &ctxInput{stamp: base.Add(time.Duration(s) * time.Second)} }
	var drops []Drop
	drop := func(_ string, why Drop) { drops = append(drops, why) }

	exact := &pairer{policy: params.SyncExact, capacity: 8, timeout: time.Hour}
	exact.kvs = []*kvInput{kv(1), kv(5), kv(6)}
	exact.ctxs = []*ctxInput{ctx(2), ctx(7)}
	exact.dropAfter(base.Add(2*time.Second), drop)
	if len(exact.kvs) != 1 || len(exact.ctxs) != 1 || !exact.kvs[0].stamp.Equal(base.Add(time.Second)) || !exact.ctxs[0].stamp.Equal(base.Add(2*time.Second)) {
		t.Errorf("exact: kept %d caches, %d contexts", len(exact.kvs), len(exact.ctxs))
	}
	if len(drops) != 3 || drops[0] != DropTimeJump {
		t.Errorf("exact: drops %v, want 3 time_jump", drops)
	}

	drops = nil
	latest := &pairer{policy: params.SyncLatest, capacity: 8, timeout: time.Hour, pendingKV: kv(9), latest: ctx(1)}
	latest.dropAfter(base.Add(2*time.Second), drop)
	if latest.pendingKV != nil || latest.latest == nil || len(drops) != 1 {
		t.Errorf("latest: pending %v, latest %v, drops %v; want the cache dropped, the older context kept", latest.pendingKV, latest.latest, drops)
	}
}

// TestTimeJumpBeforeClockJump replays, in-process, what Cyclone DDS did on
// a real ROS 2 Humble (issue 16): under use_sim_time the first input of a
// new play of the regression bag arrives 15 ms before the node takes the
// /clock message that jumps back, when the clock still reads the old
// timeline's end, 4.006 s after that input's stamp. The jump is detected
// from the input's own stamp and seq before the age check, the age check
// waits for the clock to follow, and the second play gives its 8 chunks
// (before: that input was rejected as stale, the jump went unseen and the
// play gave 0 chunks, every later input out_of_order). On the wall clock
// the same input is rejected as stale, and the jump is still detected.
func TestTimeJumpBeforeClockJump(t *testing.T) {
	in := regressionInputs(t)
	c, err := golden.LoadTiny(t.Context(), golden.TinyCases()[0])
	if err != nil {
		t.Fatal(err)
	}
	stampOf := func(m bag.Message) time.Time {
		if m.Type == msgs.TypeVideoKVCache {
			var k msgs.VideoKVCache
			if err := k.UnmarshalCDR(m.Data); err != nil {
				t.Fatal(err)
			}
			return stampTime(k.Header.Stamp)
		}
		var x msgs.TextContext
		if err := x.UnmarshalCDR(m.Data); err != nil {
			t.Fatal(err)
		}
		return stampTime(x.Header.Stamp)
	}
	for _, sim := range []bool{true, false} {
		t.Run(map[bool]string{true: "use_sim_time", false: "wall clock"}[sim], func(t *testing.T) {
			p := testParams()
			p.MaxInputAge = time.Second
			p.UseSimTime = sim
			clock := newFakeClock()
			h := newHarness(t, p, tinyCPU(t, c), withClock(clock))
			h.waitState(StateActive)
			// playAt sends in[k:] with the clock 20 ms after each stamp.
			playAt := func(k int) int {
				chunks := 0
				for _, m := range in[k:] {
					clock.Set(stampOf(m).Add(20 * time.Millisecond))
					if m.Type == msgs.TypeTextContext {
						h.sendRaw(h.ctxPub, slices.Clone(m.Data))
						continue
					}
					h.sendRaw(h.kvPub, slices.Clone(m.Data))
					h.waitChunk()
					chunks++
				}
				return chunks
			}
			if n := playAt(0); n != 8 {
				t.Fatalf("first play: %d chunks", n)
			}
			// The old timeline's clock runs on; the new play's first input
			// (the context of seq 0) comes before its /clock.
			first := in[0]
			if first.Type != msgs.TypeTextContext {
				t.Fatal("the bag's first input is not a context")
			}
			clock.Set(stampOf(first).Add(4006 * time.Millisecond))
			h.sendRaw(h.ctxPub, slices.Clone(first.Data))
			if h.node.TimeJumps() != 1 {
				t.Fatalf("%d time jumps after the new play's first input, want 1; log:\n%s", h.node.TimeJumps(), h.log)
			}
			if !sim {
				s := h.node.Stats()
				if s.Rejected[RejectStale] != 1 {
					t.Fatalf("wall clock: rejected %v, want the first input stale", s.Rejected)
				}
				// The cache of seq 0 waits in vain for its context; the
				// other 7 pairs give their chunks.
				clock.Set(stampOf(in[1]).Add(20 * time.Millisecond))
				h.sendRaw(h.kvPub, slices.Clone(in[1].Data))
				if n := playAt(2); n != 7 {
					t.Errorf("wall clock: second play gave %d chunks, want 7", n)
				}
				return
			}
			if n := playAt(1); n != 8 {
				t.Errorf("second play gave %d chunks, want 8", n)
			}
			s := h.node.Stats()
			if s.TotalRejected() != 0 || s.Out != 16 || h.node.TimeJumps() != 1 {
				t.Errorf("rejected %v, %d chunks, %d jumps; want none, 16, 1", s.Rejected, s.Out, h.node.TimeJumps())
			}
			// Once the clock has followed, the age check is back.
			last := in[len(in)-2]
			clock.Set(stampOf(last).Add(5 * time.Second))
			h.sendRaw(h.ctxPub, slices.Clone(last.Data))
			if s := h.node.Stats(); s.Rejected[RejectStale] != 1 {
				t.Errorf("after the jump: rejected %v, want one stale input", s.Rejected)
			}
		})
	}
}

// TestPairSkewDiagnostics: the diagnostics measure how far apart the two
// inputs of an observation arrive, and when a cache comes more than
// sync.timeout after its context (Cyclone at full size on a loaded
// machine, issue 16) they name that as the cause of the pair_timeout
// drops and the sync.timeout that would take it.
func TestPairSkewDiagnostics(t *testing.T) {
	d := tinyDims()
	clock := newFakeClock()
	p := testParams()
	p.StaleAfter = 0 // the last pair is 2.1 s old at the end: WARN, not STALE, is checked
	h := newHarness(t, p, newTestBackend(d), withClock(clock))
	h.waitState(StateActive)
	base := clock.Now()
	// Two pairs, the cache 200 ms and 300 ms after its context.
	for k, lag := range []time.Duration{200 * time.Millisecond, 300 * time.Millisecond} {
		in := makeInputs(d, uint64(k), base.Add(time.Duration(k)*time.Second))
		clock.Set(base.Add(time.Duration(k) * time.Second))
		h.sendCtx(in.ctx)
		clock.Advance(lag)
		h.sendKV(in.kv)
		h.waitChunk()
	}
	st := h.diag()
	if diagValue(t, st, "pair_skew_ms.max") != "300.00" || diagValue(t, st, "pair_skew.later."+p.Topics.KVCache) != "2" ||
		diagValue(t, st, "pair_skew.late_partners") != "0" || diagValue(t, st, "pair_skew.hint") != "none" || st.Level != 0 {
		t.Errorf("after two pairs: %v (level %d)", st.Values, st.Level)
	}
	// The third cache comes 1.4 s after its context: the context has
	// timed out by then.
	in := makeInputs(d, 2, base.Add(2*time.Second))
	clock.Set(base.Add(2 * time.Second))
	h.sendCtx(in.ctx)
	clock.Advance(1400 * time.Millisecond)
	h.sendKV(in.kv)
	h.noChunk(20 * time.Millisecond)
	st = h.diag()
	hint := diagValue(t, st, "pair_skew.hint")
	for _, want := range []string{"1 inputs reached the node after their partner had waited sync.timeout 1s",
		p.Topics.KVCache + " up to 1.4s after its " + p.Topics.Context, "pair_timeout", "sync.timeout:=2"} {
		if !strings.Contains(hint, want) || !strings.Contains(st.Message, want) {
			t.Errorf("hint %q / message %q: want %q", hint, st.Message, want)
		}
	}
	if st.Level != 1 || diagValue(t, st, "pair_skew.late_partners") != "1" || diagValue(t, st, "pair_skew_ms.max") != "1400.00" ||
		diagValue(t, st, "dropped.pair_timeout") != "1" {
		t.Errorf("after the late cache: level %d, %v", st.Level, st.Values)
	}
}

// TestClockJumpResetsOrdering replays issue 24's `ros2 bag play --clock`
// under load: the first pairs of a new play never reach the node, and the
// first that do come from a later part of the sequence, less than the
// jump threshold (here sync.timeout 5 s) before the last accepted stamp,
// with seqs past the first. Only /clock shows the new timeline. The jump
// of the node's clock resets the ordering state by itself: those inputs
// are accepted and paired, the old timeline's waiting input is dropped
// (time_jump) and the first chunk is not tied to the old timeline's last
// (rtc.resets.time_jump). Before: every input was rejected as out of
// order or duplicate, 0 chunks.
func TestClockJumpResetsOrdering(t *testing.T) {
	d := tinyDims()
	clock := newFakeClock()
	p := testParams()
	p.UseSimTime = true
	p.Sync.Timeout = 5 * time.Second
	p.RTC.Mode = expert.RTCReplace
	p.StaleAfter = 0
	h := newHarness(t, p, newTestBackend(d), withClock(clock))
	h.waitState(StateActive)
	base := clock.Now()
	at := func(k int) time.Time { return base.Add(time.Duration(k) * 500 * time.Millisecond) }
	for k := range 10 {
		clock.Set(at(k).Add(20 * time.Millisecond))
		h.send(makeInputs(d, uint64(k), at(k)))
		h.waitChunk()
	}
	// A cache of the old timeline waits for its context when the play
	// ends.
	clock.Set(at(10).Add(20 * time.Millisecond))
	h.sendKV(makeInputs(d, 10, at(10)).kv)

	// The bag is played again: /clock jumps back to its start; its
	// first five pairs are lost.
	clock.Set(at(0))
	for k := 5; k < 10; k++ {
		clock.Set(at(k).Add(20 * time.Millisecond))
		h.send(makeInputs(d, uint64(k), at(k)))
		if s := h.node.Stats(); s.TotalRejected() != 0 { // the receive path runs in send
			t.Fatalf("pair %d of the new play rejected: %v; log:\n%s", k, s.Rejected, h.log)
		}
		m := h.waitChunk()
		if m.KVSeq != uint64(k) || m.Header.Stamp != toMsgTime(at(k)) {
			t.Fatalf("chunk kv_seq %d, want %d", m.KVSeq, k)
		}
		if k == 5 && m.RTCMode != "off" {
			t.Errorf("first chunk after the jump tied to the old timeline (rtc_mode %s, prev seq %d)", m.RTCMode, m.RTCPrevSeq)
		}
	}
	s := h.node.Stats()
	if s.TotalRejected() != 0 || s.Out != 15 || h.node.TimeJumps() != 1 || s.Dropped[DropTimeJump] != 1 {
		t.Errorf("rejected %v, %d chunks, %d time jumps, dropped %v; want none, 15, 1, one time_jump", s.Rejected, s.Out, h.node.TimeJumps(), s.Dropped)
	}
	if s.RTCResets[RTCResetTimeJump] != 1 {
		t.Errorf("rtc resets %v, want one time_jump", s.RTCResets)
	}
	if n := h.log.count("WARN", "time jump backwards of the node's clock (/clock)"); n != 1 {
		t.Errorf("%d clock jump warnings, want 1:\n%s", n, h.log)
	}
}

// TestClockJumpSeenByDiagnostics: with no input after it, a jump of the
// node's clock is seen at the next diagnostics tick, and the old
// timeline's waiting input is dropped at once.
func TestClockJumpSeenByDiagnostics(t *testing.T) {
	d := tinyDims()
	clock := newFakeClock()
	p := testParams()
	p.UseSimTime = true
	h := newHarness(t, p, newTestBackend(d), withClock(clock))
	h.waitState(StateActive)
	base := clock.Now()
	h.send(makeInputs(d, 0, base))
	h.waitChunk()
	clock.Set(base.Add(500 * time.Millisecond))
	h.sendKV(makeInputs(d, 1, base.Add(500*time.Millisecond)).kv) // waits for its context
	clock.Set(base.Add(-time.Minute))
	st := h.diag()
	if diagValue(t, st, "time_jumps") != "1" || diagValue(t, st, "dropped.time_jump") != "1" || diagValue(t, st, "waiting_for_partner") != "0" {
		t.Fatalf("after the clock's jump: %v", st.Values)
	}
}

// TestClockFollowsStampJump: when the new timeline's first input comes
// before the /clock message that jumps back (Cyclone DDS, issue 16), the
// stamps show the jump first and the clock's jump that follows is the
// same one (time_jumps 1); that input, which arrived at a reading the
// clock has now gone back from, still times out after sync.timeout on the
// new clock (before, not until the clock had come back to its arrival).
func TestClockFollowsStampJump(t *testing.T) {
	d := tinyDims()
	clock := newFakeClock()
	p := testParams()
	p.UseSimTime = true
	h := newHarness(t, p, newTestBackend(d), withClock(clock))
	h.waitState(StateActive)
	base := clock.Now()
	h.send(makeInputs(d, 5, base))
	h.waitChunk()
	// The new play's first context, a minute back, before its /clock.
	clock.Set(base.Add(time.Minute))
	h.sendCtx(makeInputs(d, 0, base.Add(-time.Minute)).ctx)
	clock.Set(base.Add(-time.Minute + 20*time.Millisecond))
	if st := h.diag(); diagValue(t, st, "time_jumps") != "1" || diagValue(t, st, "waiting_for_partner") != "1" {
		t.Fatalf("the clock follows the stamps' jump: %v", st.Values)
	}
	clock.Advance(1500 * time.Millisecond)
	if st := h.diag(); diagValue(t, st, "dropped.pair_timeout") != "1" || diagValue(t, st, "waiting_for_partner") != "0" {
		t.Fatalf("1.5 s on the new clock: %v", st.Values)
	}
}

// TestClockJumpResetsSeamStepCheck: the step check of
// actions.limits.max_step across the seam does not compare a chunk of the
// new timeline with the old one's. After /clock jumps back, an
// observation stamped one period after the old timeline's last, with the
// same seq (the same noise) and a context scaled up, gives the old chunk's
// rows moved by one constant: its steps within are the old chunk's, below
// max_step, and its row 0 steps from the old chunk's row 0 by more. It is
// published, where before it was refused as a step.
func TestClockJumpResetsSeamStepCheck(t *testing.T) {
	d := tinyDims()
	clock := newFakeClock()
	p := testParams()
	p.UseSimTime = true
	p.StaleAfter = 0
	base := clock.Now()
	in := makeInputs(d, 1, base)
	rows := expectedActions(t, d, in, p.Steps, float32(p.Shift), in.kv.Seq)
	limit := 0.0
	for i := d.ActionDim; i < len(rows); i++ {
		limit = max(limit, math.Abs(float64(rows[i])-float64(rows[i-d.ActionDim]))*1.01)
	}
	again := makeInputs(d, 1, base.Add(p.ControlPeriod))
	ctx := pattern(d.ContextLen(), 4, 0.03) // makeInputs' context of seq 1
	for i := range ctx {
		ctx[i] *= 1000
	}
	again.ctx.Context = msgs.NewTensorF32(again.ctx.Context.Shape, ctx)
	rowsAgain := expectedActions(t, d, again, p.Steps, float32(p.Shift), again.kv.Seq)
	if c := math.Abs(float64(rowsAgain[0]) - float64(rows[0])); c <= limit {
		t.Fatalf("the seam step %v is not above max_step %v: the test proves nothing", c, limit)
	}
	p.Actions.Post.Limits = actions.Limits{MaxStep: []float64{limit}, Mode: actions.LimitRefuse}
	h := newHarness(t, p, newTestBackend(d), withClock(clock))
	h.waitState(StateActive)
	clock.Set(base.Add(20 * time.Millisecond))
	h.send(in)
	h.waitChunk()
	clock.Set(base.Add(-time.Minute)) // /clock jumps back
	h.send(again)
	waitFor(t, "the second chunk published or refused", func() bool { s := h.node.Stats(); return s.Out+s.TotalRefused() == 2 })
	if s := h.node.Stats(); s.TotalRefused() != 0 || h.node.TimeJumps() != 1 {
		t.Fatalf("refused %v, %d jumps; want none, 1; log:\n%s", s.Refused, h.node.TimeJumps(), h.log)
	}
	if m := h.waitChunk(); m.Header.Stamp != again.kv.Header.Stamp {
		t.Fatalf("chunk stamp %+v, want the new timeline's", m.Header.Stamp)
	}
}
