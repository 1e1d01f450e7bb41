package node

import (
	"slices"
	"time"
)

// pair is one VideoKVCache with the TextContext it is denoised with.
type pair struct {
	kv  *kvInput
	ctx *ctxInput
}

// firstRecv is when the pair's observation started to arrive, on the
// monotonic clock: the earlier
// arrival for an exact pair, the cache's arrival for a latest-context one
// (whose context may be arbitrarily old).
func (p *pair) firstRecv(policy SyncPolicy) time.Time {
	if policy == SyncExact && p.ctx.mono.Before(p.kv.mono) {
		return p.ctx.mono
	}
	return p.kv.mono
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
	policy   SyncPolicy
	capacity int
	timeout  time.Duration
	kvTopic  string
	ctxTopic string

	kvs  []*kvInput  // exact: waiting caches
	ctxs []*ctxInput // exact: waiting contexts

	latest    *ctxInput // latest: newest context
	pendingKV *kvInput  // latest: cache waiting for a first context
}

// addKV offers a cache; it returns the pair it completes, if any.
func (p *pairer) addKV(k *kvInput, now time.Time, drop dropFunc) *pair {
	p.expire(now, drop)
	if p.policy == SyncLatest {
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
	for i, c := range p.ctxs {
		if c.stamp.Equal(k.stamp) {
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
	if p.policy == SyncLatest {
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
	for i, k := range p.kvs {
		if k.stamp.Equal(c.stamp) {
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
	if p.policy == SyncLatest {
		if p.pendingKV != nil && old(p.pendingKV.recv) {
			drop(p.kvTopic, DropPairTimeout)
			p.rc.freeKV(p.pendingKV)
			p.pendingKV = nil
		}
		return
	}
	n := 0
	for n < len(p.kvs) && old(p.kvs[n].recv) {
		drop(p.kvTopic, DropPairTimeout)
		p.rc.freeKV(p.kvs[n])
		n++
	}
	p.kvs = slices.Delete(p.kvs, 0, n)
	n = 0
	for n < len(p.ctxs) && old(p.ctxs[n].recv) {
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
	if p.policy == SyncLatest {
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

// waiting is the number of messages held.
func (p *pairer) waiting() int {
	n := len(p.kvs) + len(p.ctxs)
	if p.pendingKV != nil {
		n++
	}
	return n
}
