package node

import (
	"context"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/kvshm"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
)

// shmHarness is a node on kv_transport shm with a producer's segment.
type shmHarness struct {
	*harness
	w   *kvshm.Writer
	pub Publisher
}

func newSHMHarness(t *testing.T, b expert.Backend, edit func(*params.Params)) *shmHarness {
	t.Helper()
	d := b.Dims()
	dir := t.TempDir()
	kvBytes := int64(4 * d.KVLen())
	w, err := kvshm.Create(dir, "kv", kvshm.Layout{Slots: 2, SlotSize: kvshm.SlotSizeFor(kvBytes, kvBytes)}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	p := testParams()
	p.KVTransport, p.SHM.Dir = params.KVTransportSHM, dir
	if edit != nil {
		edit(&p)
	}
	h := newHarness(t, p, b)
	pub, err := h.bus.Advertise(Topic{Name: p.SHM.Topic, Type: msgs.TypeKVHandoff})
	if err != nil {
		t.Fatal(err)
	}
	return &shmHarness{harness: h, w: w, pub: pub}
}

// write puts a cache's tensors into the next slot and returns the
// descriptor (not published).
func (h *shmHarness) write(kv msgs.VideoKVCache) *msgs.KVHandoff {
	h.t.Helper()
	ts, err := h.w.Place([]uint8{kv.Keys.DType, kv.Values.DType}, kv.Keys.Shape, kv.Values.Shape)
	if err != nil {
		h.t.Fatal(err)
	}
	slot, mem, err := h.w.Begin()
	if err != nil {
		h.t.Fatal(err)
	}
	copy(mem[ts[0].Offset:], kv.Keys.Data)
	copy(mem[ts[1].Offset:], kv.Values.Data)
	gen, err := h.w.Commit()
	if err != nil {
		h.t.Fatal(err)
	}
	return &msgs.KVHandoff{Header: kv.Header, Seq: kv.Seq, VisibleVideoTokens: kv.VisibleVideoTokens,
		Segment: h.w.Name(), Slot: uint32(slot), Generation: gen, Keys: ts[0], Values: ts[1]}
}

// sendSHM publishes the context, then the cache's descriptor.
func (h *shmHarness) sendSHM(in inputs, d *msgs.KVHandoff) {
	h.t.Helper()
	h.sendCtx(in.ctx)
	h.sendRaw(h.pub, mustCDR(h.t, d))
}

// TestSHMHandoffSameChunks: the chunks computed from caches handed over
// in shared memory are the chunks the same caches give over DDS.
func TestSHMHandoffSameChunks(t *testing.T) {
	d := tinyDims()
	dds := newHarness(t, testParams(), newTestBackend(d))
	shm := newSHMHarness(t, newTestBackend(d), nil)
	dds.waitState(StateActive)
	shm.waitState(StateActive)
	stamp := time.Now()
	for seq := uint64(1); seq <= 5; seq++ { // more than the 2 slots
		in := makeInputs(d, seq, stamp.Add(time.Duration(seq)*100*time.Millisecond))
		dds.send(in)
		want := dds.waitChunk()
		shm.sendSHM(in, shm.write(in.kv))
		got := shm.waitChunk()
		if got.KVSeq != seq || len(got.Actions) != len(want.Actions) {
			t.Fatalf("seq %d: chunk of kv_seq %d", seq, got.KVSeq)
		}
		for i := range want.Actions {
			for j, v := range want.Actions[i].Values {
				if got.Actions[i].Values[j] != v {
					t.Fatalf("seq %d: action [%d][%d] = %v over shm, %v over dds", seq, i, j, got.Actions[i].Values[j], v)
				}
			}
		}
	}
}

// TestSHMTornAndCrashed: a slot the producer rewrites, or begins to
// rewrite and dies (its generation stays odd), after the descriptor was
// received and before the worker copied it is rejected as torn: nothing
// is computed on it.
func TestSHMTornAndCrashed(t *testing.T) {
	for _, crash := range []bool{false, true} {
		d := tinyDims()
		b := newTestBackend(d)
		entered := make(chan struct{}, 64)
		b.gate, b.onStep = make(chan struct{}), func() { entered <- struct{}{} }
		h := newSHMHarness(t, b, nil)
		h.waitState(StateActive)
		stamp := time.Now()
		in1 := makeInputs(d, 1, stamp)
		h.sendSHM(in1, h.write(in1.kv))
		<-entered // the worker is in chunk 1's first step
		in2 := makeInputs(d, 2, stamp.Add(100*time.Millisecond))
		h.sendSHM(in2, h.write(in2.kv)) // slot 1, waiting for the worker
		in3 := makeInputs(d, 3, stamp.Add(200*time.Millisecond))
		h.write(in3.kv) // slot 0
		if crash {
			if _, mem, err := h.w.Begin(); err != nil { // slot 1 again, never committed
				t.Fatal(err)
			} else {
				binary.LittleEndian.PutUint32(mem, math.Float32bits(float32(math.NaN())))
			}
		} else {
			h.write(in3.kv) // slot 1 rewritten
		}
		close(b.gate)
		if c := h.waitChunk(); c.KVSeq != 1 {
			t.Fatalf("crash %v: chunk of kv_seq %d", crash, c.KVSeq)
		}
		h.noChunk(200 * time.Millisecond)
		s := h.node.Stats()
		b.mu.Lock()
		binds := b.binds
		b.mu.Unlock()
		if s.Rejected[RejectTorn] != 1 || binds != 1 || s.Out != 1 {
			t.Fatalf("crash %v: rejected %v, %d binds, %d chunks; want 1 torn, 1 bind, 1 chunk; log:\n%s", crash, s.Rejected, binds, s.Out, h.log)
		}
	}
}

// TestSHMRefused: a segment of an owner not allowed, a hostile descriptor
// and a stale one are rejected on receipt, counted by reason, and never
// reach the backend.
func TestSHMRefused(t *testing.T) {
	d := tinyDims()
	for _, c := range []struct {
		name string
		edit func(*params.Params)
		desc func(*msgs.KVHandoff)
		want Reason
	}{
		{"wrong_owner", func(p *params.Params) { p.SHM.AllowedUIDs = []int{os.Getuid() + 1} }, nil, RejectSHM},
		{"outside_slot", nil, func(m *msgs.KVHandoff) { m.Values.Offset = 1 << 40 }, RejectSHM},
		{"overlap", nil, func(m *msgs.KVHandoff) { m.Values.Offset = m.Keys.Offset }, RejectSHM},
		{"wrong_shape", nil, func(m *msgs.KVHandoff) {
			m.Keys.Shape = []uint32{m.Keys.Shape[0], 1, m.Keys.Shape[2] * m.Keys.Shape[3], 1}
		}, RejectShape},
		{"stale_generation", nil, func(m *msgs.KVHandoff) { m.Generation += 2 }, RejectSHMStale},
		{"symlink_dir_escape", nil, func(m *msgs.KVHandoff) { m.Segment = "../" + m.Segment }, RejectSHM},
	} {
		b := newTestBackend(d)
		h := newSHMHarness(t, b, c.edit)
		h.waitState(StateActive)
		in := makeInputs(d, 1, time.Now())
		m := h.write(in.kv)
		if c.desc != nil {
			c.desc(m)
		}
		h.sendSHM(in, m)
		h.noChunk(100 * time.Millisecond)
		s := h.node.Stats()
		b.mu.Lock()
		binds := b.binds
		b.mu.Unlock()
		if s.Rejected[c.want] != 1 || binds != 0 {
			t.Errorf("%s: rejected %v, %d binds; want 1 %s, none bound; log:\n%s", c.name, s.Rejected, binds, c.want, h.log)
		}
	}
}

// TestManagedSHM: the managed node (the one fastwam_node runs) on
// kv_transport shm subscribes to the descriptors, configures, and
// computes a chunk from a slot; before configure a descriptor is counted
// as dropped, like a message. (It once subscribed to topics.kv_cache
// only, and configure failed: "managed node has no subscription".)
func TestManagedSHM(t *testing.T) {
	d := tinyDims()
	dir := t.TempDir()
	kvBytes := int64(4 * d.KVLen())
	w, err := kvshm.Create(dir, "kv", kvshm.Layout{Slots: 2, SlotSize: kvshm.SlotSizeFor(kvBytes, kvBytes)}, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	p := testParams()
	p.SelfTest.Skip = true
	p.KVTransport, p.SHM.Dir = params.KVTransportSHM, dir
	r := newManagedRig(t, p)
	pub, err := r.bus.Advertise(Topic{Name: p.SHM.Topic, Type: msgs.TypeKVHandoff})
	if err != nil {
		t.Fatal(err)
	}
	sh := &shmHarness{harness: &harness{t: t}, w: w}
	send := func(in inputs) {
		t.Helper()
		if err := r.ctxPub.Publish(mustCDR(t, &in.ctx)); err != nil {
			t.Fatal(err)
		}
		if err := pub.Publish(mustCDR(t, sh.write(in.kv))); err != nil {
			t.Fatal(err)
		}
	}
	base := time.Unix(1_700_000_000, 0)
	send(makeInputs(d, 1, base))
	r.noChunk()
	if st := r.diag(); diagValue(t, st, "dropped.unconfigured") != "2" {
		t.Fatalf("unconfigured diagnostics: %+v", st)
	}
	if err := r.m.Configure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.m.Activate(); err != nil {
		t.Fatal(err)
	}
	send(makeInputs(d, 2, base.Add(time.Second)))
	if c := r.chunk(); c.KVSeq != 2 {
		t.Fatalf("chunk of kv seq %d, want 2", c.KVSeq)
	}
	// A VideoKVCache on topics.kv_cache is not an input on this transport.
	in3 := makeInputs(d, 3, base.Add(2*time.Second))
	if err := r.kvPub.Publish(mustCDR(t, &in3.kv)); err != nil {
		t.Fatal(err)
	}
	r.noChunk()
	// The descriptors are counted under their topic.
	st := r.diag()
	if got := diagValue(t, st, "in."+p.SHM.Topic); got != "1" {
		t.Fatalf("in.%s = %s, want 1", p.SHM.Topic, got)
	}
	for _, kv := range st.Values {
		if kv.Key == "in."+p.Topics.KVCache {
			t.Fatalf("diagnostics count %s, not an input on kv_transport shm", kv.Key)
		}
	}
}

// TestSHMSegmentChanged: what the reader refuses about a segment reaches
// the node as a rejection with its reason, and the node runs on: a
// segment whose slots are larger than the contract's keys and values need
// in float32 (refused from its header page, not mapped), and the mapped
// segment truncated to 0 bytes under the node, then named by the next
// descriptor (once a SIGBUS that killed the node).
func TestSHMSegmentChanged(t *testing.T) {
	d := tinyDims()
	h := newSHMHarness(t, newTestBackend(d), nil)
	h.waitState(StateActive)
	stamp := time.Now()
	in1 := makeInputs(d, 1, stamp)
	h.sendSHM(in1, h.write(in1.kv))
	if c := h.waitChunk(); c.KVSeq != 1 {
		t.Fatalf("chunk of kv_seq %d, want 1", c.KVSeq)
	}

	kvBytes := int64(4 * d.KVLen())
	big, err := kvshm.Create(filepath.Dir(h.w.Path()), "big", kvshm.Layout{Slots: 2, SlotSize: kvshm.SlotSizeFor(kvBytes, kvBytes) + kvshm.SlotAlign}, false)
	if err != nil {
		t.Fatal(err)
	}
	defer big.Close()
	w := h.w
	h.w = big
	in2 := makeInputs(d, 2, stamp.Add(100*time.Millisecond))
	m2 := h.write(in2.kv)
	h.w = w
	h.sendRaw(h.pub, mustCDR(t, m2)) // delivered synchronously
	if n := h.log.count("rejected ("+string(RejectSHM)+")", "want at most"); n != 1 {
		t.Errorf("segment with slots over the contract's: %d rejections saying so, want 1; log:\n%s", n, h.log)
	}

	in3 := makeInputs(d, 3, stamp.Add(200*time.Millisecond))
	m3 := h.write(in3.kv)
	if err := os.Truncate(h.w.Path(), 0); err != nil {
		t.Fatal(err)
	}
	h.sendRaw(h.pub, mustCDR(t, m3)) // the reason is logged once: the kind's first
	if s := h.node.Stats(); s.Rejected[RejectSHM] != 2 || s.Out != 1 {
		t.Errorf("rejected %v, %d chunks; want 2 %s, 1 chunk; log:\n%s", s.Rejected, s.Out, RejectSHM, h.log)
	}

	// The producer restarts: its new segment is mapped, the chunk computed.
	if h.w, err = kvshm.Create(filepath.Dir(w.Path()), "kv2", w.Layout(), false); err != nil {
		t.Fatal(err)
	}
	defer h.w.Close()
	in4 := makeInputs(d, 4, stamp.Add(300*time.Millisecond))
	h.sendSHM(in4, h.write(in4.kv))
	if c := h.waitChunk(); c.KVSeq != 4 {
		t.Fatalf("after the restart: chunk of kv_seq %d, want 4", c.KVSeq)
	}
}
