package node

import (
	"errors"

	"github.com/fastwam/actionexpert/kvshm"
	"github.com/fastwam/actionexpert/msgs"
)

// The shared-memory KV hand-off (kv_transport shm, docs/shm.md): a
// KVHandoff descriptor names a slot of a segment the producer wrote; the
// receive path checks it against the mapped segment and pairs a cache
// whose tensors view the slot, and the worker copies them into the
// backend's inputs as it would a message's (process), then checks that
// the slot was not rewritten meanwhile (checkSlot).

// onKVHandoff is the receive path of the shm.topic descriptors.
func (n *Node) onKVHandoff(data []byte) {
	now, mono := n.now(), n.mono()
	topic := n.p.SHM.Topic
	n.stats.received(topic)
	in := n.recycle.newKV()
	if n.State() != StateActive {
		n.recycle.freeKV(in)
		n.dropped(topic, DropInactive)
		return
	}
	if rej := n.decodeHandoff(in, topic, data); rej != nil {
		n.recycle.freeKV(in)
		n.rejected(rej)
		return
	}
	n.acceptKV(in, topic, now, mono)
}

// decodeHandoff decodes a descriptor, leases its slot and fills in with a
// cache whose tensors view the slot, checked as a message's would be.
func (n *Node) decodeHandoff(in *kvInput, topic string, data []byte) *inputError {
	h := &n.handoff
	if err := h.UnmarshalCDRReuse(data); err != nil {
		return decodeError(topic, err)
	}
	if err := n.shm.Acquire(h, &in.lease); err != nil {
		if errors.Is(err, kvshm.ErrStale) {
			return reject(topic, RejectSHMStale, "%v", err)
		}
		return reject(topic, RejectSHM, "%v", err)
	}
	m := &in.msg
	m.Header.Stamp = h.Header.Stamp
	if m.Header.FrameID != h.Header.FrameID {
		m.Header.FrameID = h.Header.FrameID
	}
	m.Seq, m.VisibleVideoTokens = h.Seq, h.VisibleVideoTokens
	m.Keys = msgs.Tensor{Shape: append(m.Keys.Shape[:0], h.Keys.Shape...), DType: h.Keys.DType, Data: in.lease.Keys}
	m.Values = msgs.Tensor{Shape: append(m.Values.Shape[:0], h.Values.Shape...), DType: h.Values.DType, Data: in.lease.Values}
	return checkKV(in, topic, n.dims)
}

// copyGuarded runs copy, the worker's copy of a pair's tensors, and for a
// cache in shared memory checks the slot around it: the segment's size
// before (a truncated file would fault), a fault during it (Guard), and
// the generation after (a torn copy). A non-nil result is the rejection, and
// takes precedence over what copy found: nothing copied may be computed
// on.
func (n *Node) copyGuarded(p *pair, copy func() bool) (ok bool, rej *inputError) {
	l := &p.kv.lease
	if !l.Held() {
		return copy(), nil
	}
	topic := n.p.SHM.Topic
	if err := l.Check(); err != nil {
		return false, reject(topic, RejectTorn, "%v (stamp %s)", err, fmtStamp(p.kv.stamp))
	}
	if err := kvshm.Guard(func() { ok = copy() }); err != nil {
		return false, reject(topic, RejectTorn, "%v (stamp %s)", err, fmtStamp(p.kv.stamp))
	}
	if !l.Intact() {
		return false, reject(topic, RejectTorn, "%v (stamp %s)", kvshm.ErrTorn, fmtStamp(p.kv.stamp))
	}
	return ok, nil
}
