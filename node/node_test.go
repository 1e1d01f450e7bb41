package node

import (
	"context"
	"encoding/binary"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
)

// expectedActions denoises in the way the node must: a fresh fixture
// backend, the chunk decoded from the messages, seed = base + kv seq.
func expectedActions(t *testing.T, d expert.Dims, in inputs, steps int, shift float32, seed uint64) []float32 {
	t.Helper()
	s, err := expert.NewSchedule(steps, shift)
	if err != nil {
		t.Fatal(err)
	}
	res, err := expert.Denoise(context.Background(), newTestBackend(d), in.chunk(t, d), s, expert.Noise(seed, d.LatentLen()), nil)
	if err != nil {
		t.Fatal(err)
	}
	return res.Actions
}

func flatten(m msgs.ActionChunk) []float32 {
	var x []float32
	for _, r := range m.Actions {
		x = append(x, r.Values...)
	}
	return x
}

func sameFloats(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func TestEndToEndExactPairing(t *testing.T) {
	d := tinyDims()
	p := testParams()
	p.NoiseSeed = 100
	h := newHarness(t, p, newTestBackend(d))
	h.waitState(StateActive)

	base := time.Unix(1_700_000_123, 456_000_000)
	for k := range 2 {
		in := makeInputs(d, uint64(7+k), base.Add(time.Duration(k)*100*time.Millisecond))
		in.kv.VisibleVideoTokens = 4
		h.send(in)
		m := h.waitChunk()
		if m.Seq != uint64(k) || m.KVSeq != uint64(7+k) || m.ContextSeq != uint64(1007+k) {
			t.Errorf("chunk %d: seq %d kv_seq %d context_seq %d", k, m.Seq, m.KVSeq, m.ContextSeq)
		}
		if m.Header != in.kv.Header {
			t.Errorf("chunk %d: header %+v, want the cache's %+v", k, m.Header, in.kv.Header)
		}
		// The seed is the base plus the producer's kv seq (7+k), not the
		// node's chunk counter.
		if m.NoiseSeed != 107+uint64(k) || m.Steps != 3 || m.Shift != 5 || m.Backend != "cpu" {
			t.Errorf("chunk %d: noise_seed %d steps %d shift %v backend %q", k, m.NoiseSeed, m.Steps, m.Shift, m.Backend)
		}
		if m.DryRun || m.Clipped || m.StaleInput {
			t.Errorf("chunk %d: flags dry_run %v clipped %v stale %v, want all false", k, m.DryRun, m.Clipped, m.StaleInput)
		}
		if len(m.Actions) != d.ActionTokens {
			t.Fatalf("chunk %d: %d rows, want %d", k, len(m.Actions), d.ActionTokens)
		}
		for i, r := range m.Actions {
			if len(r.Values) != d.ActionDim {
				t.Fatalf("row %d has %d values, want %d", i, len(r.Values), d.ActionDim)
			}
		}
		want := expectedActions(t, d, in, 3, 5, 107+uint64(k))
		sameFloats(t, "actions", flatten(m), want)

		// The fixture is sensitive to the routing of the inputs.
		swapped := in
		swapped.kv.Keys, swapped.kv.Values = in.kv.Values, in.kv.Keys
		if other := expectedActions(t, d, swapped, 3, 5, 107+uint64(k)); expert.MaxAbsDiff(other, want) == 0 {
			t.Fatal("fixture backend does not distinguish keys from values")
		}
	}
}

func TestCrossTopicArrivalOrders(t *testing.T) {
	d := tinyDims()
	h := newHarness(t, testParams(), newTestBackend(d))
	h.waitState(StateActive)
	base := time.Unix(1_700_000_000, 0)
	in := make([]inputs, 6)
	for i := range in {
		in[i] = makeInputs(d, uint64(i), base.Add(time.Duration(i)*time.Second))
	}
	// Both caches before their contexts.
	h.sendKV(in[0].kv)
	h.sendKV(in[1].kv)
	h.sendCtx(in[0].ctx)
	if m := h.waitChunk(); m.KVSeq != 0 {
		t.Fatalf("first pair: kv_seq %d, want 0", m.KVSeq)
	}
	h.sendCtx(in[1].ctx)
	if m := h.waitChunk(); m.KVSeq != 1 {
		t.Fatalf("second pair: kv_seq %d, want 1", m.KVSeq)
	}
	// Context first, then cache.
	h.sendCtx(in[2].ctx)
	h.sendKV(in[2].kv)
	if m := h.waitChunk(); m.KVSeq != 2 || m.ContextSeq != 1002 {
		t.Fatalf("third pair: kv_seq %d context_seq %d", m.KVSeq, m.ContextSeq)
	}
	// A context whose cache never comes is dropped when a later pair forms.
	h.sendCtx(in[3].ctx)
	h.sendCtx(in[4].ctx)
	h.sendKV(in[4].kv)
	if m := h.waitChunk(); m.KVSeq != 4 {
		t.Fatalf("fourth pair: kv_seq %d, want 4", m.KVSeq)
	}
	// The late cache of the skipped observation is out of order now.
	h.sendKV(in[3].kv)
	h.noChunk(50 * time.Millisecond)
	s := h.node.Stats()
	if s.Dropped[DropUnpaired] != 1 || s.Rejected[RejectOutOfOrder] != 1 || s.Out != 4 {
		t.Errorf("unpaired %d out_of_order %d out %d, want 1 1 4", s.Dropped[DropUnpaired], s.Rejected[RejectOutOfOrder], s.Out)
	}
}

func TestExactPairingTimeoutAndOverflow(t *testing.T) {
	d := tinyDims()
	clock := newFakeClock()
	p := testParams()
	p.Sync.Timeout = 500 * time.Millisecond
	p.Sync.Buffer = 2
	h := newHarness(t, p, newTestBackend(d), withClock(clock))
	h.waitState(StateActive)
	at := func(i int) inputs {
		return makeInputs(d, uint64(i), clock.Now().Add(time.Duration(i)*time.Millisecond))
	}

	// A context arriving after the timeout does not pair.
	in0 := at(0)
	h.sendKV(in0.kv)
	clock.Advance(600 * time.Millisecond)
	h.sendCtx(in0.ctx)
	h.noChunk(30 * time.Millisecond)
	if s := h.node.Stats(); s.Dropped[DropPairTimeout] != 1 {
		t.Fatalf("pair_timeout %d, want 1", s.Dropped[DropPairTimeout])
	}
	// The waiting context expires on a diagnostics tick, without traffic.
	clock.Advance(600 * time.Millisecond)
	st := h.diag()
	if got := diagValue(t, st, "dropped.pair_timeout"); got != "2" {
		t.Errorf("dropped.pair_timeout %s after the tick, want 2", got)
	}
	if diagValue(t, st, "waiting_for_partner") != "0" {
		t.Errorf("waiting_for_partner %s, want 0", diagValue(t, st, "waiting_for_partner"))
	}
	if st.Level != msgs.LevelWarn {
		t.Errorf("level %d after pair timeouts, want WARN", st.Level)
	}

	// Three caches in a buffer of two: the oldest is pushed out.
	in := []inputs{at(10), at(11), at(12)}
	for _, x := range in {
		h.sendKV(x.kv)
	}
	h.sendCtx(in[0].ctx) // its cache is gone: waits
	h.noChunk(30 * time.Millisecond)
	h.sendCtx(in[1].ctx) // pairs; the context of in[0] can no longer pair
	if m := h.waitChunk(); m.KVSeq != 11 {
		t.Fatalf("kv_seq %d, want 11", m.KVSeq)
	}
	h.sendCtx(in[2].ctx)
	if m := h.waitChunk(); m.KVSeq != 12 {
		t.Fatalf("kv_seq %d, want 12", m.KVSeq)
	}
	s := h.node.Stats()
	if s.Dropped[DropOverflow] != 1 || s.Dropped[DropUnpaired] != 1 {
		t.Errorf("pair_overflow %d unpaired %d, want 1 1", s.Dropped[DropOverflow], s.Dropped[DropUnpaired])
	}
}

func TestLatestContextPairing(t *testing.T) {
	d := tinyDims()
	clock := newFakeClock()
	p := testParams()
	p.Sync.Policy = params.SyncLatest
	p.Sync.Timeout = 500 * time.Millisecond
	h := newHarness(t, p, newTestBackend(d), withClock(clock))
	h.waitState(StateActive)
	now := clock.Now()

	// A cache before any context waits for the first one.
	a := makeInputs(d, 1, now)
	h.sendKV(a.kv)
	h.noChunk(20 * time.Millisecond)
	ctxA := makeInputs(d, 50, now.Add(-time.Hour)).ctx // stamps of contexts are not checked
	h.sendCtx(ctxA)
	if m := h.waitChunk(); m.KVSeq != 1 || m.ContextSeq != ctxA.Seq {
		t.Fatalf("kv_seq %d context_seq %d, want 1 %d", m.KVSeq, m.ContextSeq, ctxA.Seq)
	}
	// Every later cache pairs with the newest context at once.
	h.sendKV(makeInputs(d, 2, now.Add(time.Millisecond)).kv)
	if m := h.waitChunk(); m.ContextSeq != ctxA.Seq {
		t.Fatalf("context_seq %d, want %d", m.ContextSeq, ctxA.Seq)
	}
	ctxB := makeInputs(d, 60, now.Add(-2*time.Hour)).ctx
	h.sendCtx(ctxB)
	in3 := makeInputs(d, 3, now.Add(2*time.Millisecond))
	h.sendKV(in3.kv)
	m := h.waitChunk()
	if m.ContextSeq != ctxB.Seq {
		t.Fatalf("context_seq %d, want the newest context %d", m.ContextSeq, ctxB.Seq)
	}
	want := expectedActions(t, d, inputs{kv: in3.kv, ctx: ctxB}, 3, 5, in3.kv.Seq) // seed = base 0 + kv seq
	sameFloats(t, "actions", flatten(m), want)

	// Caches still go through the stamp checks.
	h.sendKV(makeInputs(d, 4, now.Add(time.Millisecond)).kv)
	h.noChunk(20 * time.Millisecond)
	if s := h.node.Stats(); s.Rejected[RejectOutOfOrder] != 1 {
		t.Errorf("out_of_order %d, want 1", s.Rejected[RejectOutOfOrder])
	}
}

func TestLatestPendingCacheTimesOut(t *testing.T) {
	d := tinyDims()
	clock := newFakeClock()
	p := testParams()
	p.Sync.Policy = params.SyncLatest
	p.Sync.Timeout = 500 * time.Millisecond
	h := newHarness(t, p, newTestBackend(d), withClock(clock))
	h.waitState(StateActive)
	h.sendKV(makeInputs(d, 1, clock.Now()).kv)
	clock.Advance(time.Second)
	h.sendCtx(makeInputs(d, 1, clock.Now()).ctx)
	h.noChunk(30 * time.Millisecond)
	if s := h.node.Stats(); s.Dropped[DropPairTimeout] != 1 || s.Paired != 0 {
		t.Errorf("pair_timeout %d paired %d, want 1 0", s.Dropped[DropPairTimeout], s.Paired)
	}
}

// f16Table holds float16 bit patterns with their exact values.
var f16Table = []struct {
	bits uint16
	v    float32
}{{0x3C00, 1}, {0xBC00, -1}, {0x3800, 0.5}, {0x0000, 0}, {0x4000, 2}, {0xC200, -3}, {0x3400, 0.25}}

func TestFloat16Inputs(t *testing.T) {
	d := tinyDims()
	h := newHarness(t, testParams(), newTestBackend(d))
	h.waitState(StateActive)
	in := makeInputs(d, 1, time.Unix(1_700_000_000, 0))
	want := in.chunk(t, d)
	data := make([]byte, 2*d.KVLen())
	for i := range d.KVLen() {
		e := f16Table[(i*3)%len(f16Table)]
		data[2*i], data[2*i+1] = byte(e.bits), byte(e.bits>>8)
		want.VideoKeys[i] = e.v
	}
	in.kv.Keys = msgs.Tensor{Shape: in.kv.Keys.Shape, DType: msgs.DTypeFloat16, Data: data}
	h.send(in)
	m := h.waitChunk()
	s, _ := expert.NewSchedule(3, 5)
	res, err := expert.Denoise(context.Background(), newTestBackend(d), want, s, expert.Noise(in.kv.Seq, d.LatentLen()), nil)
	if err != nil {
		t.Fatal(err)
	}
	sameFloats(t, "actions from float16 keys", flatten(m), res.Actions)
}

// TestRejections sends every kind of invalid input twice: nothing is
// published, the reason is counted twice, logged once, and reported in the
// diagnostics.
func TestRejections(t *testing.T) {
	d := tinyDims()
	type sendFunc func(h *harness, now time.Time, k int)
	valid := func(k int, now time.Time) inputs {
		return makeInputs(d, uint64(k), now.Add(time.Duration(k)*time.Millisecond))
	}
	cases := []struct {
		name   string
		reason Reason
		params func(*params.Params)
		send   sendFunc
	}{
		{"garbage cache", RejectDecode, nil, func(h *harness, now time.Time, k int) {
			h.sendRaw(h.kvPub, []byte{0, 1, 0, 0, 9, 9})
		}},
		{"garbage context", RejectDecode, nil, func(h *harness, now time.Time, k int) {
			h.sendRaw(h.ctxPub, []byte{1, 2, 3})
		}},
		{"unknown dtype", RejectDType, nil, func(h *harness, now time.Time, k int) {
			in := valid(k, now)
			h.sendCtx(in.ctx)
			h.sendRaw(h.kvPub, patchValues(t, in.kv, func(b []byte, dtype, dataLen int) []byte {
				b[dtype] = 7
				return b
			}))
		}},
		{"wrong shape", RejectShape, nil, func(h *harness, now time.Time, k int) {
			in := valid(k, now)
			in.kv.Keys.Shape = []uint32{uint32(d.Layers), 1, uint32(d.VideoTokens) / 2, uint32(2 * d.AttnWidth())}
			h.send(in)
		}},
		{"wrong context shape", RejectShape, nil, func(h *harness, now time.Time, k int) {
			in := valid(k, now)
			in.ctx.Context.Shape = []uint32{uint32(d.ContextTokens), uint32(d.TextDim)}
			h.send(in)
		}},
		{"short payload", RejectShape, nil, func(h *harness, now time.Time, k int) {
			in := valid(k, now)
			h.sendCtx(in.ctx)
			h.sendRaw(h.kvPub, patchValues(t, in.kv, func(b []byte, dtype, dataLen int) []byte {
				n := binary.LittleEndian.Uint32(b[dataLen:])
				binary.LittleEndian.PutUint32(b[dataLen:], n-4)
				return b[:len(b)-4]
			}))
		}},
		{"mask length", RejectMask, nil, func(h *harness, now time.Time, k int) {
			in := valid(k, now)
			in.ctx.AttentionMask = in.ctx.AttentionMask[:d.ContextTokens-1]
			h.send(in)
		}},
		{"mask all false", RejectMask, nil, func(h *harness, now time.Time, k int) {
			in := valid(k, now)
			in.ctx.AttentionMask = make([]bool, d.ContextTokens)
			h.send(in)
		}},
		{"visible video", RejectVisibleVideo, nil, func(h *harness, now time.Time, k int) {
			in := valid(k, now)
			in.kv.VisibleVideoTokens = uint32(d.VideoTokens + 1)
			h.send(in)
		}},
		{"NaN key", RejectNonFinite, nil, func(h *harness, now time.Time, k int) {
			in := valid(k, now)
			keys := pattern(d.KVLen(), 1, 0)
			keys[d.KVLen()-3] = float32(math.NaN())
			in.kv.Keys = msgs.NewTensorF32(in.kv.Keys.Shape, keys)
			h.send(in)
		}},
		{"Inf context", RejectNonFinite, nil, func(h *harness, now time.Time, k int) {
			in := valid(k, now)
			c := pattern(d.ContextLen(), 1, 0)
			c[0] = float32(math.Inf(-1))
			in.ctx.Context = msgs.NewTensorF32(in.ctx.Context.Shape, c)
			h.send(in)
		}},
		{"zero stamp", RejectNoStamp, nil, func(h *harness, now time.Time, k int) {
			in := valid(k, now)
			in.kv.Header.Stamp = msgs.Time{}
			h.sendKV(in.kv)
		}},
		{"stale", RejectStale, func(p *params.Params) { p.MaxInputAge = time.Second }, func(h *harness, now time.Time, k int) {
			h.sendKV(valid(k, now.Add(-2*time.Second)).kv)
		}},
		{"duplicate", RejectDuplicate, nil, func(h *harness, now time.Time, k int) {
			in := valid(1, now)
			if k == 0 {
				h.sendKV(in.kv) // first one is fine
			}
			h.sendKV(in.kv)
		}},
		{"out of order cache", RejectOutOfOrder, nil, func(h *harness, now time.Time, k int) {
			if k == 0 {
				h.sendKV(valid(100, now).kv)
			}
			h.sendKV(valid(k, now).kv)
		}},
		{"out of order context", RejectOutOfOrder, nil, func(h *harness, now time.Time, k int) {
			if k == 0 {
				h.sendCtx(valid(100, now).ctx)
			}
			h.sendCtx(valid(k, now).ctx)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clock := newFakeClock()
			p := testParams()
			if c.params != nil {
				c.params(&p)
			}
			h := newHarness(t, p, newTestBackend(d), withClock(clock))
			h.waitState(StateActive)
			for k := range 2 {
				c.send(h, clock.Now(), k)
				// Rejections in the worker must not be superseded.
				waitFor(t, "the rejection", func() bool { return h.node.Stats().Rejected[c.reason] == uint64(k+1) })
			}
			h.noChunk(20 * time.Millisecond)
			s := h.node.Stats()
			if s.Out != 0 || s.TotalRejected() != 2 {
				t.Errorf("out %d rejected %v, want 0 and only two %s", s.Out, s.Rejected, c.reason)
			}
			// Every pair is accounted for: a rejected pair counts in
			// RejectedPairs, an input rejected on receipt never paired.
			if s.Paired != s.RejectedPairs || s.Failed != 0 {
				t.Errorf("paired %d, rejected pairs %d, failed %d: a pair is unaccounted for", s.Paired, s.RejectedPairs, s.Failed)
			}
			if n := h.log.count("WARN", "("+string(c.reason)+")"); n != 1 {
				t.Errorf("%d warnings for %s, want 1; log:\n%s", n, c.reason, h.log)
			}
			defer func() { // the shutdown summary gives the count
				if h.log.count("INFO", "stopped:", "rejected: "+string(c.reason)+" 2") != 1 {
					t.Errorf("no count of %s in the shutdown summary; log:\n%s", c.reason, h.log)
				}
			}()
			defer h.stop()
			st := h.diag()
			if st.Level != msgs.LevelWarn || !strings.Contains(st.Message, "2 inputs rejected") {
				t.Errorf("diagnostics level %d message %q, want WARN with 2 rejections", st.Level, st.Message)
			}
			if got := diagValue(t, st, "rejected."+string(c.reason)); got != "2" {
				t.Errorf("rejected.%s = %s, want 2", c.reason, got)
			}
			// The node still works afterwards.
			good := valid(1000, clock.Now().Add(time.Hour))
			if c.reason == RejectStale {
				good = valid(1000, clock.Now())
			}
			h.send(good)
			if m := h.waitChunk(); m.KVSeq != 1000 {
				t.Errorf("kv_seq %d after the rejections, want 1000", m.KVSeq)
			}
		})
	}
}

// patchValues encodes kv, whose last field is the values tensor, and lets
// edit change the bytes: dtype is the index of the values' dtype byte and
// dataLen that of their payload's length prefix. The encoder refuses
// invalid tensors, so invalid ones are made by patching valid bytes.
func patchValues(t *testing.T, kv msgs.VideoKVCache, edit func(b []byte, dtype, dataLen int) []byte) []byte {
	t.Helper()
	b := mustCDR(t, &kv)
	n := len(kv.Values.Data)
	dataLen := len(b) - n - 4
	dtype := dataLen - 4 // one byte, then three of padding
	if binary.LittleEndian.Uint32(b[dataLen:]) != uint32(n) || b[dtype] != kv.Values.DType {
		t.Fatalf("values tensor not where expected in the encoding")
	}
	return edit(b, dtype, dataLen)
}

func TestClipping(t *testing.T) {
	d := tinyDims()
	for _, tc := range []struct {
		name   string
		lo, hi []float64
	}{
		{"scalar", []float64{-0.3}, []float64{0.2}},
		{"per dimension", []float64{-1, -0.5, -0.2, -0.1, 0, -2, -0.05}, []float64{1, 0.5, 0.2, 0.3, 0.1, 2, 0.05}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := testParams()
			p.ClipMin, p.ClipMax = tc.lo, tc.hi
			h := newHarness(t, p, newTestBackend(d))
			h.waitState(StateActive)
			in := makeInputs(d, 1, time.Unix(1_700_000_000, 0))
			h.send(in)
			m := h.waitChunk()
			raw := expectedActions(t, d, in, 3, 5, in.kv.Seq)
			changed := false
			for i, v := range flatten(m) {
				j := 0
				if len(tc.lo) > 1 {
					j = i % d.ActionDim
				}
				want := min(max(raw[i], float32(tc.lo[j])), float32(tc.hi[j]))
				if v != want {
					t.Fatalf("value %d = %v, want clip(%v) = %v", i, v, raw[i], want)
				}
				changed = changed || want != raw[i]
			}
			if !changed || !m.Clipped {
				t.Errorf("clipped flag %v, values changed %v; want both true", m.Clipped, changed)
			}
		})
	}
	p := testParams()
	p.ClipMin, p.ClipMax = []float64{-1, -1, -1}, []float64{1, 1, 1}
	if _, err := New(Config{Params: p}, newTestBackend(d), NewBus()); err == nil || !strings.Contains(err.Error(), "clip") {
		t.Errorf("New with 3 clip bounds for 7 dimensions: %v, want an error about clip", err)
	}
}

func TestDryRunAndStaleOutput(t *testing.T) {
	d := tinyDims()
	clock := newFakeClock()
	b := newTestBackend(d)
	b.onStep = func() { clock.Advance(600 * time.Millisecond) }
	p := testParams()
	p.DryRun = true
	p.MaxInputAge = time.Second
	h := newHarness(t, p, b, withClock(clock))
	h.waitState(StateActive)
	h.send(makeInputs(d, 1, clock.Now()))
	m := h.waitChunk()
	if !m.DryRun || !m.StaleInput {
		t.Errorf("dry_run %v stale_input %v, want both true", m.DryRun, m.StaleInput)
	}
	if m.InputAgeMs != 1800 || m.DenoiseMs != 1800 || m.ReceiveToPublishMs != 1800 {
		t.Errorf("input_age_ms %v denoise_ms %v receive_to_publish_ms %v, want 1800 each (3 steps of 600 ms)",
			m.InputAgeMs, m.DenoiseMs, m.ReceiveToPublishMs)
	}
	st := h.diag()
	if diagValue(t, st, "out.stale_input") != "1" || diagValue(t, st, "dry_run") != "true" || st.Level != msgs.LevelWarn {
		t.Errorf("stale %s dry_run %s level %d", diagValue(t, st, "out.stale_input"), diagValue(t, st, "dry_run"), st.Level)
	}
	if got := diagValue(t, st, "input_age_ms.last"); got != "1800.00" {
		t.Errorf("input_age_ms.last %s, want 1800.00", got)
	}
	// The age when held is taken after the copy into the backend's
	// inputs and before the steps: none of the 1800 ms of denoise.
	if got := diagValue(t, st, "input_held_ms.max"); got != "0.00" {
		t.Errorf("input_held_ms.max %s, want 0.00 (the clock only moves during the steps)", got)
	}
}

func TestDiagnosticsContent(t *testing.T) {
	d := tinyDims()
	b := newTestBackend(d)
	b.stepDelay = 2 * time.Millisecond
	h := newHarness(t, testParams(), b)
	st := h.diag()
	h.waitState(StateActive)
	if st.Name != DiagnosticName || st.HardwareID != "cpu: "+CPUModel() || diagValue(t, st, "build") != Build() {
		t.Errorf("name %q hardware_id %q", st.Name, st.HardwareID)
	}
	st = h.diag()
	if st.Level != msgs.LevelOK || st.Message != "active, waiting for inputs" || diagValue(t, st, "denoise_ms.p50") != "n/a" {
		t.Errorf("idle: level %d message %q denoise p50 %s", st.Level, st.Message, diagValue(t, st, "denoise_ms.p50"))
	}
	now := time.Now()
	for k := range 3 {
		h.send(makeInputs(d, uint64(k), now.Add(time.Duration(k)*time.Millisecond)))
		h.waitChunk()
	}
	waitFor(t, "three chunks counted", func() bool { return h.node.Stats().Out == 3 })
	st = h.diag()
	if st.Level != msgs.LevelOK || st.Message != "active, 3 chunks published" {
		t.Errorf("level %d message %q", st.Level, st.Message)
	}
	for k, want := range map[string]string{
		"state": "active", "backend": "cpu", "backend_state": "ok", "self_test": "none (no self_test.golden)",
		"steps": "3", "shift": "5", "sync_policy": "exact", "dry_run": "false",
		"in.video_kv_cache": "3", "in.text_context": "3", "paired": "3", "out": "3", "failed": "0",
		"dropped": "0", "rejected": "0", "out.clipped": "0", "out.stale_input": "0", "waiting_for_partner": "0",
	} {
		if got := diagValue(t, st, k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	num := func(k string) float64 {
		v, err := strconv.ParseFloat(diagValue(t, st, k), 64)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		return v
	}
	for _, q := range []string{"denoise_ms", "receive_to_publish_ms", "input_age_ms", "input_held_ms"} {
		if !(num(q+".p50") <= num(q+".p95") && num(q+".p95") <= num(q+".max")) {
			t.Errorf("%s: p50 %v p95 %v max %v not ordered", q, num(q+".p50"), num(q+".p95"), num(q+".max"))
		}
	}
	if num("denoise_ms.p50") < 6 {
		t.Errorf("denoise_ms.p50 %v, want >= 6 (3 steps of 2 ms)", num("denoise_ms.p50"))
	}
	if num("receive_to_publish_ms.p50") < num("denoise_ms.p50")-0.01 {
		t.Errorf("receive_to_publish_ms.p50 %v below denoise_ms.p50 %v", num("receive_to_publish_ms.p50"), num("denoise_ms.p50"))
	}
	if num("input_age_ms.last") <= 0 {
		t.Errorf("input_age_ms.last %v, want > 0", num("input_age_ms.last"))
	}
	// A rejection makes one report WARN, then it is OK again.
	h.sendRaw(h.kvPub, []byte{1})
	if st = h.diag(); st.Level != msgs.LevelWarn || diagValue(t, st, "rejected.decode") != "1" {
		t.Errorf("after a rejection: level %d rejected.decode %s", st.Level, diagValue(t, st, "rejected.decode"))
	}
	if st = h.diag(); st.Level != msgs.LevelOK {
		t.Errorf("a report later: level %d message %q, want OK", st.Level, st.Message)
	}
	h.stop()
	select {
	case a := <-h.diags:
		if a.Status[0].Level != msgs.LevelStale || diagValue(t, a.Status[0], "state") != "stopped" {
			t.Errorf("final diagnostics level %d state %s, want STALE stopped", a.Status[0].Level, diagValue(t, a.Status[0], "state"))
		}
	case <-time.After(5 * time.Second):
		t.Error("no final diagnostics at shutdown")
	}
}

func TestBackendFailureAndReload(t *testing.T) {
	d := tinyDims()
	tb := newTestBackend(d)
	tb.failNext = 1
	h := newHarness(t, testParams(), reloadingBackend{tb})
	h.waitState(StateActive)
	now := time.Unix(1_700_000_000, 0)
	h.send(makeInputs(d, 1, now))
	waitFor(t, "a backend failure", func() bool { return h.node.Stats().Failed == 1 })
	h.noChunk(20 * time.Millisecond)
	st := h.diag()
	if st.Level != msgs.LevelWarn && st.Level != msgs.LevelError {
		t.Errorf("level %d after a backend failure", st.Level)
	}
	if !strings.Contains(diagValue(t, st, "backend_state"), "injected failure") {
		t.Errorf("backend_state %q does not name the failure", diagValue(t, st, "backend_state"))
	}
	tb.mu.Lock()
	reloads := tb.reloads
	tb.mu.Unlock()
	if reloads != 1 {
		t.Errorf("%d reloads, want 1", reloads)
	}
	if h.log.count("ERROR", "injected failure") != 1 {
		t.Errorf("failure not logged once:\n%s", h.log)
	}
	h.send(makeInputs(d, 2, now.Add(time.Second)))
	if m := h.waitChunk(); m.KVSeq != 2 || m.Seq != 1 || m.NoiseSeed != 2 {
		t.Errorf("after recovery: kv_seq %d seq %d noise_seed %d, want 2 1 2", m.KVSeq, m.Seq, m.NoiseSeed)
	}
	if st = h.diag(); st.Level != msgs.LevelOK || diagValue(t, st, "backend_state") != "ok" || diagValue(t, st, "failed") != "1" {
		t.Errorf("after recovery: level %d backend_state %q failed %s", st.Level, diagValue(t, st, "backend_state"), diagValue(t, st, "failed"))
	}
}

func TestBackendErrorLevel(t *testing.T) {
	d := tinyDims()
	tb := newTestBackend(d)
	tb.failNext = 1
	h := newHarness(t, testParams(), tb) // cannot reload
	h.waitState(StateActive)
	h.send(makeInputs(d, 1, time.Unix(1_700_000_000, 0)))
	waitFor(t, "a backend failure", func() bool { return h.node.Stats().Failed == 1 })
	if st := h.diag(); st.Level != msgs.LevelError || !strings.HasPrefix(st.Message, "backend error") {
		t.Errorf("level %d message %q, want ERROR backend error", st.Level, st.Message)
	}
}

// TestBurstBoundedMemory blocks the backend and floods the node with
// 200 pairs of 128 KiB caches: the receive path must not wait, keep at
// most the slot's pair, and count every other pair as dropped.
func TestBurstBoundedMemory(t *testing.T) {
	d := tinyDims()
	d.VideoTokens, d.HeadDim = 64, 64 // 64 KiB per key or value tensor
	b := newTestBackend(d)
	b.gate = make(chan struct{})
	p := testParams()
	p.Steps = 1
	h := newHarness(t, p, b)
	h.waitState(StateActive)

	const n = 200
	base := time.Unix(1_700_000_000, 0)
	encode := func(i int) (ctx, kv []byte) {
		in := makeInputs(d, uint64(i), base.Add(time.Duration(i)*time.Millisecond))
		return mustCDR(t, &in.ctx), mustCDR(t, &in.kv)
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	// Send the first pair and wait until the worker holds it at the gate.
	c0, k0 := encode(0)
	size := len(k0)
	h.sendRaw(h.ctxPub, c0)
	h.sendRaw(h.kvPub, k0)
	c0, k0 = nil, nil
	waitFor(t, "the worker at the gate", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.steps == 1 })
	before := heap()
	start := time.Now()
	for i := 1; i < n; i++ {
		c, k := encode(i)
		h.sendRaw(h.ctxPub, c)
		h.sendRaw(h.kvPub, k)
	}
	elapsed := time.Since(start)
	after := heap()
	grown := int64(after) - int64(before)
	t.Logf("%d pairs of %d KiB sent in %v with the backend blocked; live heap grew %d KiB", n-1, size>>10, elapsed, grown>>10)
	if grown > int64(8*size) {
		t.Errorf("live heap grew %d KiB during the burst; want < %d KiB (a few pairs, not %d)", grown>>10, 8*size>>10, n)
	}
	s := h.node.Stats()
	if s.Paired != n || s.Dropped[DropSuperseded] != n-2 {
		t.Errorf("paired %d superseded %d, want %d and %d", s.Paired, s.Dropped[DropSuperseded], n, n-2)
	}
	close(b.gate) // release: the held chunk and the newest pair are published
	h.waitChunk()
	last := h.waitChunk()
	if last.KVSeq != n-1 {
		t.Errorf("second chunk after the burst has kv_seq %d, want the newest %d", last.KVSeq, n-1)
	}
	h.noChunk(30 * time.Millisecond)
}

// TestBurstTenTimesProcessingRate feeds pairs ten times faster than the
// backend denoises for a while: no deadlock, every pair accounted for.
func TestBurstTenTimesProcessingRate(t *testing.T) {
	d := tinyDims()
	b := newTestBackend(d)
	b.stepDelay = 2 * time.Millisecond
	p := testParams() // 3 steps: >= 6 ms per chunk
	h := newHarness(t, p, b)
	h.waitState(StateActive)
	const n = 300
	base := time.Now()
	start := time.Now()
	for i := range n {
		in := makeInputs(d, uint64(i), base.Add(time.Duration(i)*time.Millisecond))
		h.send(in)
		time.Sleep(600 * time.Microsecond)
	}
	sendTime := time.Since(start)
	waitFor(t, "the last pair", func() bool {
		s := h.node.Stats()
		return s.Out+s.Dropped[DropSuperseded] == n
	})
	s := h.node.Stats()
	t.Logf("%d pairs in %v: %d published, %d superseded", n, sendTime, s.Out, s.Dropped[DropSuperseded])
	if s.Out < 2 || s.Dropped[DropSuperseded] < n/2 {
		t.Errorf("published %d, superseded %d: want drops to dominate at ten times the processing rate", s.Out, s.Dropped[DropSuperseded])
	}
	var lastSeq uint64
	for i := range s.Out {
		m := h.waitChunk()
		if m.Seq != i || (i > 0 && m.KVSeq <= lastSeq) {
			t.Fatalf("chunk %d: seq %d kv_seq %d after %d", i, m.Seq, m.KVSeq, lastSeq)
		}
		lastSeq = m.KVSeq
	}
	if lastSeq != n-1 {
		t.Errorf("last published kv_seq %d, want %d (the newest pair wins)", lastSeq, n-1)
	}
}

// TestShutdownUnderLoad cancels Run while inputs keep coming and a chunk
// is being denoised: Run returns promptly, the backend is never used after
// Run returns, and late messages are dropped without harm.
func TestShutdownUnderLoad(t *testing.T) {
	d := tinyDims()
	b := newTestBackend(d)
	b.stepDelay = 5 * time.Millisecond
	p := testParams()
	p.Steps = 20 // 100 ms per chunk
	goroutines := runtime.NumGoroutine()
	h := newHarness(t, p, b)
	h.waitState(StateActive)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		base := time.Now()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			h.send(makeInputs(d, uint64(i), base.Add(time.Duration(i)*time.Millisecond)))
			time.Sleep(time.Millisecond)
		}
	})
	waitFor(t, "a chunk in progress", func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.steps > 3 })
	start := time.Now()
	h.stop()
	if el := time.Since(start); el > time.Second {
		t.Errorf("Run took %v to return after cancellation", el)
	}
	b.Close()
	time.Sleep(20 * time.Millisecond) // inputs keep arriving after Run returned
	close(stop)
	wg.Wait()
	if m := b.Misuse(); len(m) > 0 {
		t.Errorf("backend misuse: %v", m)
	}
	s := h.node.Stats()
	if s.Dropped[DropShutdown] == 0 || s.Dropped[DropInactive] == 0 {
		t.Errorf("dropped shutdown %d inactive %d; want the interrupted chunk and the late inputs counted",
			s.Dropped[DropShutdown], s.Dropped[DropInactive])
	}
	if h.node.State() != StateStopped {
		t.Errorf("state %s, want stopped", h.node.State())
	}
	waitFor(t, "goroutines to exit", func() bool { return runtime.NumGoroutine() <= goroutines+1 })
}

func TestRunTwice(t *testing.T) {
	h := newHarness(t, testParams(), newTestBackend(tinyDims()))
	h.waitState(StateActive)
	if err := h.node.Run(context.Background()); err == nil {
		t.Error("second Run succeeded")
	}
}

func TestNewChecksConfiguration(t *testing.T) {
	d := tinyDims()
	p := testParams()
	p.CPU.Weights = ""
	if _, err := New(Config{Params: p}, newTestBackend(d), NewBus()); err == nil || !strings.Contains(err.Error(), "cpu.weights") {
		t.Errorf("missing weights: %v", err)
	}
	if _, err := New(Config{Params: testParams()}, nil, NewBus()); err == nil {
		t.Error("nil backend accepted")
	}
	bad := d
	bad.Heads = 0
	if _, err := New(Config{Params: testParams()}, newTestBackend(bad), NewBus()); err == nil || !strings.Contains(err.Error(), "heads") {
		t.Errorf("invalid contract: %v", err)
	}
	bus := NewBus()
	if _, err := bus.Advertise(Topic{Name: "video_kv_cache", Type: "std_msgs/msg/String"}); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{Params: testParams()}, newTestBackend(d), bus); err == nil || !strings.Contains(err.Error(), "video_kv_cache") {
		t.Errorf("topic type clash: %v", err)
	}
}

// TestInputAgeWhenPairedAndHeld checks the two transport latencies of
// /diagnostics: input_paired_ms counts to the later of the two arrivals,
// whichever input it is, and input_held_ms to the end of the worker's copy,
// before the steps (which advance the clock by 600 ms each here).
func TestInputAgeWhenPairedAndHeld(t *testing.T) {
	for _, kvFirst := range []bool{true, false} {
		t.Run("cache first "+strconv.FormatBool(kvFirst), func(t *testing.T) {
			d := tinyDims()
			clock := newFakeClock()
			b := newTestBackend(d)
			b.onStep = func() { clock.Advance(600 * time.Millisecond) }
			h := newHarness(t, testParams(), b, withClock(clock))
			h.waitState(StateActive)
			in := makeInputs(d, 1, clock.Now())
			first, second := func() { h.sendCtx(in.ctx) }, func() { h.sendKV(in.kv) }
			if kvFirst {
				first, second = second, first
			}
			clock.Advance(100 * time.Millisecond)
			first()
			clock.Advance(250 * time.Millisecond)
			second()
			if m := h.waitChunk(); m.InputAgeMs != 2150 {
				t.Errorf("input_age_ms %v, want 2150 (350 ms to the pair, 3 steps of 600 ms)", m.InputAgeMs)
			}
			st := h.diag()
			for _, k := range []string{"input_paired_ms.max", "input_held_ms.max"} {
				if got := diagValue(t, st, k); got != "350.00" {
					t.Errorf("%s = %s, want 350.00", k, got)
				}
			}
		})
	}
}

// TestMaxInputAgeBoundary: max_input_age is exact, on receipt and at
// publication: an input exactly max_input_age old is taken and its chunk
// not flagged stale_input; 500 µs older is rejected as stale on receipt,
// and a chunk published 500 µs past it is flagged. Also after a live
// change of the value.
func TestMaxInputAgeBoundary(t *testing.T) {
	d := tinyDims()
	for _, live := range []bool{false, true} {
		clock := newFakeClock()
		b := newTestBackend(d)
		var during time.Duration // the clock's advance during a chunk's steps
		b.onStep = func() { clock.Advance(during) }
		p := testParams()
		p.Steps = 1
		maxAge := 700 * time.Millisecond
		p.MaxInputAge = maxAge
		if live {
			p.MaxInputAge = time.Hour
		}
		h := newHarness(t, p, b, withClock(clock))
		h.waitState(StateActive)
		if live {
			q := p
			q.MaxInputAge = maxAge
			if err := h.node.UpdateLive(q); err != nil {
				t.Fatal(err)
			}
		}
		const slack = 500 * time.Microsecond
		stamp := clock.Now()
		seq := uint64(0)
		send := func(age time.Duration) {
			stamp = stamp.Add(time.Second)
			clock.Set(stamp.Add(age))
			seq++
			h.send(makeInputs(d, seq, stamp))
		}
		send(maxAge)
		if s := h.node.Stats(); s.TotalRejected() != 0 { // the receive path runs in send
			t.Fatalf("live %v: input exactly max_input_age old rejected: %v", live, s.Rejected)
		}
		if m := h.waitChunk(); m.StaleInput {
			t.Errorf("live %v: input exactly max_input_age old: chunk flagged stale_input", live)
		}
		send(maxAge + slack)
		if s := h.node.Stats(); s.Rejected[RejectStale] != 2 { // the cache and the context
			t.Errorf("live %v: input max_input_age + 500µs old: rejected %v, want both stale", live, s.Rejected)
		}
		during = slack
		send(maxAge - slack)
		if m := h.waitChunk(); m.StaleInput {
			t.Errorf("live %v: chunk published exactly max_input_age after its stamp flagged stale_input", live)
		}
		during = 2 * slack
		send(maxAge - slack)
		if m := h.waitChunk(); !m.StaleInput {
			t.Errorf("live %v: chunk published max_input_age + 500µs after its stamp not flagged stale_input", live)
		}
		h.stop()
	}
}
