package node

import (
	"slices"
	"time"

	"github.com/fastwam/actionexpert/node/params"
)

// pair is one VideoKVCache with the TextContext it is denoised with.
type pair struct {
	kv  *kvInput
	ctx *ctxInput
	// timeline is the number of time jumps backwards before the pair was
	// made: the worker does not tie it to a chunk of an earlier one.
	timeline uint64
}

// firstRecv is when the pair's observation started to arrive, on the
// monotonic clock: the earlier
// arrival for an exact pair, the cache's arrival for a latest-context one
// (whose context may be arbitrarily old).
func (p *pair) firstRecv(policy params.SyncPolicy) time.Time {
	if policy == params.SyncExact && p.ctx.mono.Before(p.kv.mono) {
		return p.ctx.mono
	}
	return p.kv.mono
}

// lastRecv is when the node had both inputs of the pair, on the node's
// clock: the later arrival for an exact pair, the cache's arrival for a
// latest-context one.
func (p *pair) lastRecv(policy params.SyncPolicy) time.Time {
	if policy == params.SyncExact && p.ctx.recv.After(p.kv.recv) {
		return p.ctx.recv
	}
	return p.kv.recv
}

// dropFunc reports a valid input that will never be paired.
type dropFunc func(topic string, why Drop)

// pairer pairs the two inputs. With SyncExact it holds up to capacity
// messages per topic, oldest first (stamps increase: the receive path
// rejects anything else), until the partner with the same stamp arrives
// or timeout passes. With SyncLatest it keeps the newest context and at
// most one cache waiting for a first context. It is not safe for
// concurrent use.
type pairer struct {
	rc       *recycler // takes back what the pairer drops; nil in unit tests
	policy   params.SyncPolicy
	capacity int
	timeout  time.Duration
	kvTopic  string
	ctxTopic string

	kvs  []*kvInput  // exact: waiting caches
	ctxs []*ctxInput // exact: waiting contexts

	latest    *ctxInput // latest: newest context
	pendingKV *kvInput  // latest: cache waiting for a first context

	skew skewStats // exact: how far apart the two inputs of an observation arrive
}

// Arrival skew (exact policy). The two messages of one observation travel
// separately, and a 72 MB cache can reach the node well after its 2 MB
// context (on Cyclone DDS on a loaded machine, more than a second). The
// pairer measures, for every observation whose two inputs it saw, the
// later arrival minus the earlier on the node's clock, and which topic came
// later: for the pairs it made, and for a partner that arrives after its
// peer timed out (the pairer remembers the last expiredRing stamps that
// timed out on each topic). The diagnostics report it, and name it as the
// cause of pair_timeout drops with the sync.timeout it would take.

// expiredRing is how many timed-out stamps per topic the pairer remembers.
const expiredRing = 8

// expiredInput is an input dropped by the timeout: its stamp and arrival.
type expiredInput struct {
	stamp, recv time.Time
	set         bool
}

// skewStats is the arrival skew of the two inputs (see above).
type skewStats struct {
	win             window // later arrival minus earlier, pairs and late partners
	kvLater         uint64 // observations whose cache arrived after its context
	ctxLater        uint64
	late            uint64        // partners that arrived after their peer timed out
	lateMax         time.Duration // the largest skew of those
	lateKV          bool          // the last late partner was a cache
	expKV, expCtx   [expiredRing]expiredInput
	nextKV, nextCtx int
}

// record adds one observation's skew; kvLater says which input came later.
func (s *skewStats) record(d time.Duration, kvLater bool) {
	s.win.add(d)
	if kvLater {
		s.kvLater++
	} else {
		s.ctxLater++
	}
}

// expired remembers a timed-out input of the cache (kv) or context topic.
func (s *skewStats) expired(stamp, recv time.Time, kv bool) {
	if kv {
		s.expKV[s.nextKV] = expiredInput{stamp, recv, true}
		s.nextKV = (s.nextKV + 1) % expiredRing
		return
	}
	s.expCtx[s.nextCtx] = expiredInput{stamp, recv, true}
	s.nextCtx = (s.nextCtx + 1) % expiredRing
}

// latePartner checks whether an input of the other topic with stamp timed
// out before this one (kv: a cache) arrived at now, and records it.
func (s *skewStats) latePartner(stamp, now time.Time, kv bool) {
	ring := &s.expKV
	if kv {
		ring = &s.expCtx
	}
	for i := range ring {
		if e := &ring[i]; e.set && e.stamp.Equal(stamp) {
			d := now.Sub(e.recv)
			s.record(d, kv)
			s.late++
			s.lateMax, s.lateKV = max(s.lateMax, d), kv
			e.set = false
			return
		}
	}
}

// addKV offers a cache; it returns the pair it completes, if any.
func (p *pairer) addKV(k *kvInput, now time.Time, drop dropFunc) *pair {
	p.expire(now, drop)
	if p.policy == params.SyncLatest {
		if p.latest != nil {
			return p.rc.newPair(k, p.latest.share())
		}
		if p.pendingKV != nil {
			drop(p.kvTopic, DropUnpaired)
			p.rc.freeKV(p.pendingKV)
		}
		p.pendingKV = k
		return nil
	}
	p.skew.latePartner(k.stamp, k.recv, true)
	for i, c := range p.ctxs {
		if c.stamp.Equal(k.stamp) {
			p.skew.record(k.recv.Sub(c.recv), true)
			p.dropOlder(k.stamp, i, drop)
			p.ctxs = slices.Delete(p.ctxs, 0, 1)
			return p.rc.newPair(k, c)
		}
	}
	if len(p.kvs) == p.capacity {
		drop(p.kvTopic, DropOverflow)
		p.rc.freeKV(p.kvs[0])
		p.kvs = slices.Delete(p.kvs, 0, 1)
	}
	p.kvs = append(p.kvs, k)
	return nil
}

// addContext offers a context; it returns the pair it completes, if any.
func (p *pairer) addContext(c *ctxInput, now time.Time, drop dropFunc) *pair {
	p.expire(now, drop)
	if p.policy == params.SyncLatest {
		if p.latest != nil {
			p.rc.freeCtx(p.latest) // the pairer's hold; pairs may keep it
		}
		p.latest = c
		if k := p.pendingKV; k != nil {
			p.pendingKV = nil
			return p.rc.newPair(k, c.share())
		}
		return nil
	}
	p.skew.latePartner(c.stamp, c.recv, false)
	for i, k := range p.kvs {
		if k.stamp.Equal(c.stamp) {
			p.skew.record(c.recv.Sub(k.recv), false)
			p.dropOlderKV(i, drop)
			p.dropOlderCtx(c.stamp, drop)
			p.kvs = slices.Delete(p.kvs, 0, 1)
			return p.rc.newPair(k, c)
		}
	}
	if len(p.ctxs) == p.capacity {
		drop(p.ctxTopic, DropOverflow)
		p.rc.freeCtx(p.ctxs[0])
		p.ctxs = slices.Delete(p.ctxs, 0, 1)
	}
	p.ctxs = append(p.ctxs, c)
	return nil
}

// dropOlder removes, for a cache matching p.ctxs[i], the contexts before
// index i and the waiting caches older than stamp: a later arrival could
// only pair with them out of order.
func (p *pairer) dropOlder(stamp time.Time, i int, drop dropFunc) {
	for _, c := range p.ctxs[:i] {
		drop(p.ctxTopic, DropUnpaired)
		p.rc.freeCtx(c)
	}
	p.ctxs = slices.Delete(p.ctxs, 0, i)
	n := 0
	for n < len(p.kvs) && p.kvs[n].stamp.Before(stamp) {
		drop(p.kvTopic, DropUnpaired)
		p.rc.freeKV(p.kvs[n])
		n++
	}
	p.kvs = slices.Delete(p.kvs, 0, n)
}

func (p *pairer) dropOlderKV(i int, drop dropFunc) {
	for _, k := range p.kvs[:i] {
		drop(p.kvTopic, DropUnpaired)
		p.rc.freeKV(k)
	}
	p.kvs = slices.Delete(p.kvs, 0, i)
}

func (p *pairer) dropOlderCtx(stamp time.Time, drop dropFunc) {
	n := 0
	for n < len(p.ctxs) && p.ctxs[n].stamp.Before(stamp) {
		drop(p.ctxTopic, DropUnpaired)
		p.rc.freeCtx(p.ctxs[n])
		n++
	}
	p.ctxs = slices.Delete(p.ctxs, 0, n)
}

// Removal uses slices.Delete, which clears the vacated tail, so that a
// dropped message's payload is not kept alive by the backing array.

// expire drops the messages that waited longer than the timeout.
func (p *pairer) expire(now time.Time, drop dropFunc) {
	old := func(recv time.Time) bool { return now.Sub(recv) > p.timeout }
	if p.policy == params.SyncLatest {
		if p.pendingKV != nil && old(p.pendingKV.recv) {
			drop(p.kvTopic, DropPairTimeout)
			p.rc.freeKV(p.pendingKV)
			p.pendingKV = nil
		}
		return
	}
	n := 0
	for n < len(p.kvs) && old(p.kvs[n].recv) {
		p.skew.expired(p.kvs[n].stamp, p.kvs[n].recv, true)
		drop(p.kvTopic, DropPairTimeout)
		p.rc.freeKV(p.kvs[n])
		n++
	}
	p.kvs = slices.Delete(p.kvs, 0, n)
	n = 0
	for n < len(p.ctxs) && old(p.ctxs[n].recv) {
		p.skew.expired(p.ctxs[n].stamp, p.ctxs[n].recv, false)
		drop(p.ctxTopic, DropPairTimeout)
		p.rc.freeCtx(p.ctxs[n])
		n++
	}
	p.ctxs = slices.Delete(p.ctxs, 0, n)
}

// dropAfter drops the messages held whose stamps lie after stamp: at a
// time jump backwards to stamp they belong to the old timeline, and no
// input of the new one can pair with them. Messages at or before stamp
// (the partner of the jump's input, arrived first) stay.
func (p *pairer) dropAfter(stamp time.Time, drop dropFunc) {
	if p.policy == params.SyncLatest {
		if p.pendingKV != nil && p.pendingKV.stamp.After(stamp) {
			drop(p.kvTopic, DropTimeJump)
			p.rc.freeKV(p.pendingKV)
			p.pendingKV = nil
		}
		if p.latest != nil && p.latest.stamp.After(stamp) {
			drop(p.ctxTopic, DropTimeJump)
			p.rc.freeCtx(p.latest)
			p.latest = nil
		}
		return
	}
	p.kvs = slices.DeleteFunc(p.kvs, func(k *kvInput) bool {
		if !k.stamp.After(stamp) {
			return false
		}
		drop(p.kvTopic, DropTimeJump)
		p.rc.freeKV(k)
		return true
	})
	p.ctxs = slices.DeleteFunc(p.ctxs, func(c *ctxInput) bool {
		if !c.stamp.After(stamp) {
			return false
		}
		drop(p.ctxTopic, DropTimeJump)
		p.rc.freeCtx(c)
		return true
	})
}

// rebase restarts, at the node's clock's jump back to now, the wait of
// the messages held that arrived after now (the clock's future: they
// would not time out until the clock had come back there), and forgets
// the timed-out stamps (their arrival times are the old timeline's).
func (p *pairer) rebase(now time.Time) {
	for _, k := range p.kvs {
		k.recv = earlier(k.recv, now)
	}
	for _, c := range p.ctxs {
		c.recv = earlier(c.recv, now)
	}
	if p.pendingKV != nil {
		p.pendingKV.recv = earlier(p.pendingKV.recv, now)
	}
	p.skew.expKV, p.skew.expCtx = [expiredRing]expiredInput{}, [expiredRing]expiredInput{}
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// waiting is the number of messages held.
func (p *pairer) waiting() int {
	n := len(p.kvs) + len(p.ctxs)
	if p.pendingKV != nil {
		n++
	}
	return n
}
