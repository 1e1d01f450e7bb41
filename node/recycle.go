package node

import "sync"

// maxFree bounds each free list: the inputs alive at once are the
// pairing buffer's, the slot's, the worker's and the one being decoded.
const maxFree = 16

// freeList keeps released values for reuse, so the receive path allocates
// nothing per message in steady state. Its zero value keeps nothing; see
// newRecycler.
type freeList[T any] struct {
	mu    sync.Mutex
	items []*T
}

func (f *freeList[T]) get() *T {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.items); n > 0 {
		x := f.items[n-1]
		f.items[n-1] = nil
		f.items = f.items[:n-1]
		return x
	}
	return new(T)
}

func (f *freeList[T]) put(x *T) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.items) < cap(f.items) {
		f.items = append(f.items, x)
	}
}

// recycler hands out and takes back the receive path's inputs and pairs.
// A cache has one holder at a time (the receive path, the pairing buffer,
// a pair); a context may be shared by many pairs and the pairing buffer
// under the latest policy, so it counts its holders. A nil *recycler
// allocates and releases nothing (the pairer's unit tests).
type recycler struct {
	// give hands a message's bytes back to a transport that recycles
	// them (see Recycler); nil when it does not.
	give  func([]byte)
	kvs   freeList[kvInput]
	ctxs  freeList[ctxInput]
	pairs freeList[pair]
}

// newRecycler returns a recycler whose free lists hold up to maxFree
// values each (allocated now, so that the first releases do not allocate).
func newRecycler() *recycler {
	r := &recycler{}
	r.kvs.items = make([]*kvInput, 0, maxFree)
	r.ctxs.items = make([]*ctxInput, 0, maxFree)
	r.pairs.items = make([]*pair, 0, maxFree)
	return r
}

func (r *recycler) newKV() *kvInput {
	if r == nil {
		return &kvInput{}
	}
	return r.kvs.get()
}

func (r *recycler) newCtx() *ctxInput {
	var c *ctxInput
	if r != nil {
		c = r.ctxs.get()
	} else {
		c = new(ctxInput)
	}
	c.refs.Store(1)
	return c
}

func (r *recycler) newPair(k *kvInput, c *ctxInput) *pair {
	if r == nil {
		return &pair{kv: k, ctx: c}
	}
	p := r.pairs.get()
	p.kv, p.ctx = k, c
	return p
}

// freeKV takes back a cache its holder is done with. The payload views are
// cleared so that a cache on the free list does not keep a message alive.
func (r *recycler) freeKV(k *kvInput) {
	if r == nil || k == nil {
		return
	}
	k.msg.Keys.Data, k.msg.Values.Data = nil, nil
	k.lease.Release()
	r.giveBack(k.raw)
	k.raw = nil
	r.kvs.put(k)
}

// releaseKVPayload hands a cache's message bytes back to the transport as
// soon as its tensors have been decoded out of them (the worker then holds
// the header fields only, for the rest of the chunk): while the chunk is
// denoised, the next message can be received into them. freeKV later
// releases the rest.
func (r *recycler) releaseKVPayload(k *kvInput) {
	if r == nil || k == nil {
		return
	}
	k.msg.Keys.Data, k.msg.Values.Data = nil, nil
	k.lease.Release()
	r.giveBack(k.raw)
	k.raw = nil
}

// freeCtx drops one holder of a context and takes it back after the last.
func (r *recycler) freeCtx(c *ctxInput) {
	if r == nil || c == nil || c.refs.Add(-1) != 0 {
		return
	}
	c.msg.Context.Data = nil
	r.giveBack(c.raw)
	c.raw = nil
	r.ctxs.put(c)
}

// giveBack hands a message's bytes back to the transport.
func (r *recycler) giveBack(data []byte) {
	if r.give != nil && data != nil {
		r.give(data)
	}
}

// freePair takes back a pair and releases its inputs.
func (r *recycler) freePair(p *pair) {
	if r == nil || p == nil {
		return
	}
	r.freeKV(p.kv)
	r.freeCtx(p.ctx)
	p.kv, p.ctx = nil, nil
	r.pairs.put(p)
}

// share adds a holder to a context.
func (c *ctxInput) share() *ctxInput {
	c.refs.Add(1)
	return c
}
