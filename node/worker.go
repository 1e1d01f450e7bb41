package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/msgs"
)

// reloader is implemented by backends that can recover from a device
// failure (the HTP backend after a DSP subsystem restart).
type reloader interface {
	Reload(ctx context.Context) error
}

// process turns one pair into a published chunk. It runs on the worker
// goroutine only.
func (n *Node) process(ctx context.Context, p *pair) {
	d := n.dims
	kvTopic, ctxTopic := n.p.Topics.KVCache, n.p.Topics.Context
	tIn := n.now()
	for _, t := range []struct {
		topic, field string
		src          msgs.Tensor
		dst          []float32
	}{
		{kvTopic, "keys", p.kv.msg.Keys, n.chunk.VideoKeys},
		{kvTopic, "values", p.kv.msg.Values, n.chunk.VideoValues},
		{ctxTopic, "context", p.ctx.msg.Context, n.chunk.Context},
	} {
		if err := t.src.DecodeF32Into(t.dst); err != nil {
			n.rejectedPair(reject(t.topic, RejectShape, "%s: %w", t.field, err))
			return
		}
	}
	copy(n.chunk.ContextMask, p.ctx.msg.AttentionMask)
	n.chunk.VisibleVideo = int(p.kv.msg.VisibleVideoTokens)

	seq := n.seq
	// The seed follows the producer's sequence number, not this node's
	// chunk counter, so that a replay of any part of a recording (or a
	// restart of the node) draws the same noise for the same observation
	// even when chunks were dropped.
	seed := n.p.NoiseSeed + p.kv.msg.Seq
	x0 := expert.Noise(seed, d.LatentLen())
	t0 := n.now()
	host := hostTimes{Decode: p.kv.decode + p.ctx.decode, Input: t0.Sub(tIn)}
	// The backend validates the chunk before any compute (the contract's
	// ValidateChunk): non-finite values are found there, once, as are
	// inputs this backend cannot take (the HTP graph's fixed visibility).
	// They are rejected inputs, not backend failures: no reload.
	res, err := expert.Denoise(ctx, n.backend, &n.chunk, n.sched, x0, nil)
	denoise := n.now().Sub(t0)
	var bad *expert.InputError
	if errors.As(err, &bad) {
		topic, reason := kvTopic, RejectShape
		switch {
		case bad.NonFinite():
			reason = RejectNonFinite
		case bad.Input == "visible_video":
			reason = RejectVisibleVideo
		case bad.Input == "context_mask":
			reason = RejectMask
		}
		if bad.Input == "context" || bad.Input == "context_mask" {
			topic = ctxTopic
		}
		n.rejectedPair(reject(topic, reason, "%v (stamp %s)", bad, fmtStamp(p.kv.stamp)))
		return
	}
	n.seq++
	if err != nil {
		if ctx.Err() != nil {
			n.dropped(kvTopic, DropShutdown)
			return
		}
		n.backendFailed(ctx, seq, err)
		return
	}
	n.setBackendState("ok")
	clipped := n.clip(res.Actions)

	m := &n.out
	m.Header = p.kv.msg.Header
	m.Seq, m.KVSeq, m.ContextSeq = seq, p.kv.msg.Seq, p.ctx.msg.Seq
	for i := range m.Actions {
		m.Actions[i].Values = res.Actions[i*d.ActionDim : (i+1)*d.ActionDim]
	}
	m.Steps, m.Shift, m.NoiseSeed, m.Backend = uint32(n.sched.Steps()), n.sched.Shift, seed, n.p.Backend
	m.DryRun, m.Clipped = n.p.DryRun, clipped

	tPub := n.now()
	r2p := tPub.Sub(p.firstRecv(n.p.Sync.Policy))
	age := tPub.Sub(p.kv.stamp)
	stale := n.p.MaxInputAge > 0 && age > n.p.MaxInputAge
	m.DenoiseMs, m.ReceiveToPublishMs, m.InputAgeMs = ms(denoise), ms(r2p), ms(age)
	m.StaleInput = stale

	host.Bind = res.BindTime
	for _, st := range res.StepTimes {
		host.Steps += st
	}
	buf, err := m.AppendCDR(n.outBuf[:0])
	host.Encode = n.now().Sub(tPub)
	n.host = host
	if err != nil {
		n.backendFailed(ctx, seq, fmt.Errorf("encode action chunk: %w", err))
		return
	}
	n.outBuf = buf
	if err := n.stats.publish(n.actions, buf, denoise, r2p, age, stale, clipped); err != nil {
		if c := n.stats.fail(); c == 1 || c%100 == 0 {
			n.log.Errorf("chunk %d: publish %s: %v (%d failures so far)", seq, n.p.Topics.Actions, err, c)
		}
		return
	}
	if seq == 0 {
		n.log.Infof("first chunk published: denoise %.1f ms, receive to publish %.1f ms", ms(denoise), ms(r2p))
	}
}

func ms(d time.Duration) float32 { return float32(d.Seconds() * 1000) }

// clip bounds the actions in place and reports whether any value changed.
// NaN cannot reach here: Denoise rejects non-finite predictions.
func (n *Node) clip(a []float32) bool {
	lo, hi := n.p.ClipMin, n.p.ClipMax
	if len(lo) == 0 {
		return false
	}
	clipped := false
	for i, v := range a {
		j := 0
		if len(lo) > 1 {
			j = i % n.dims.ActionDim
		}
		if l := float32(lo[j]); v < l {
			a[i], clipped = l, true
		} else if h := float32(hi[j]); v > h {
			a[i], clipped = h, true
		}
	}
	return clipped
}

// backendFailed counts and logs a failed chunk and lets a backend that
// can recover reload itself.
func (n *Node) backendFailed(ctx context.Context, seq uint64, err error) {
	c := n.stats.fail()
	n.setBackendState("error: " + err.Error())
	if c == 1 || c%100 == 0 {
		n.log.Errorf("chunk %d not published: %v (%d backend errors so far)", seq, err, c)
	}
	r, ok := n.backend.(reloader)
	if !ok {
		return
	}
	if rerr := r.Reload(ctx); rerr != nil {
		n.setBackendState(fmt.Sprintf("error: %v; reload failed: %v", err, rerr))
		n.log.Errorf("backend reload failed: %v", rerr)
		return
	}
	n.setBackendState("reloaded after: " + err.Error())
	n.log.Warnf("backend reloaded after: %v", err)
}
