package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fastwam/actionexpert/actions"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/msgs"
)

// reloader is implemented by backends that can recover from a device
// failure (the HTP backend after a DSP subsystem restart).
type reloader interface {
	Reload(ctx context.Context) error
}

// process turns one pair into a published chunk. It runs on the worker
// goroutine only. The tensors cross memory once: each is decoded straight
// into the backend's input buffers when the backend is an
// expert.InputBinder (into the node's chunk otherwise), checked for
// non-finite values in the same pass, before anything is bound or run.
func (n *Node) process(ctx context.Context, p *pair) {
	n.applyLive()
	d := n.dims
	kvTopic, ctxTopic := n.p.KVInputTopic(), n.p.Topics.Context
	tIn := n.mono()
	binder, direct := n.backend.(expert.InputBinder)
	views := expert.InputViews{
		VideoKeys:   expert.TensorView{F32: n.chunk.VideoKeys},
		VideoValues: expert.TensorView{F32: n.chunk.VideoValues},
		Context:     expert.TensorView{F32: n.chunk.Context},
	}
	seq := n.seq
	if direct {
		var err error
		if views, err = binder.Inputs(); err != nil {
			n.seq++
			n.backendFailed(ctx, seq, fmt.Errorf("bind chunk: %w", err))
			return
		}
	}
	// A cache in shared memory is copied under copyGuarded (shm.go): a
	// slot rewritten or truncated during the copy is rejected.
	var (
		shapeErr  *inputError
		nonFinite error
	)
	copied, torn := n.copyGuarded(p, func() bool {
		for _, t := range [...]struct {
			topic, field, input string
			src                 *msgs.Tensor
			dst                 expert.TensorView
		}{
			{kvTopic, "keys", "video_keys", &p.kv.msg.Keys, views.VideoKeys},
			{kvTopic, "values", "video_values", &p.kv.msg.Values, views.VideoValues},
			{ctxTopic, "context", "context", &p.ctx.msg.Context, views.Context},
		} {
			var (
				i   int
				v   float32
				err error
			)
			if t.dst.F16 != nil {
				i, v, err = t.src.DecodeF16Checked(t.dst.F16)
			} else {
				i, v, err = t.src.DecodeF32Checked(t.dst.F32)
			}
			if err != nil {
				shapeErr = reject(t.topic, RejectShape, "%s: %w", t.field, err)
				return false
			}
			if i >= 0 {
				nonFinite = expert.NonFiniteInput(t.input, i, v)
				return false
			}
		}
		return true
	})
	switch {
	case torn != nil: // a torn slot's bytes prove nothing else
		n.rtcDrop(RTCResetRejected)
		n.rejectedPair(torn)
		return
	case shapeErr != nil:
		n.rtcDrop(RTCResetRejected)
		n.rejectedPair(shapeErr)
		return
	case nonFinite != nil:
		n.rejectInput(nonFinite, p)
		return
	case !copied:
		return
	}
	held := n.now().Sub(p.kv.stamp)
	// The keys and values are in the backend's buffers now: the 72 MB
	// message goes back to the transport for the next one while this
	// chunk is denoised.
	n.recycle.releaseKVPayload(p.kv)
	visible := int(p.kv.msg.VisibleVideoTokens)

	// The seed follows the producer's sequence number, not this node's
	// chunk counter, so that a replay of any part of a recording (or a
	// restart of the node) draws the same noise for the same observation
	// even when chunks were dropped.
	seed := n.p.NoiseSeed + p.kv.msg.Seq
	expert.NoiseInto(seed, n.x)
	guide, err := n.rtcGuide(p)
	if err != nil {
		// A replay's recorded plan that does not fit: the chunk fails,
		// but the backend is fine (no reload).
		n.seq++
		n.rtcDrop(RTCResetFailed)
		if c := n.stats.fail(); c == 1 || c%100 == 0 {
			n.log.Errorf("chunk %d not published: %v (%d failures so far)", seq, err, c)
		}
		return
	}
	t0 := n.mono()
	host := hostTimes{Decode: p.kv.decode + p.ctx.decode, Input: t0.Sub(tIn)}
	// The backend validates the rest of the chunk before any compute: the
	// mask and visibility, and inputs this backend cannot take (the HTP
	// graph's fixed visibility). They are rejected inputs, not backend
	// failures: no reload.
	if direct {
		err = binder.BindInputs(ctx, p.ctx.msg.AttentionMask, visible)
	} else {
		copy(n.chunk.ContextMask, p.ctx.msg.AttentionMask)
		n.chunk.VisibleVideo = visible
		err = n.backend.BindChunk(ctx, &n.chunk)
	}
	tBound := n.mono()
	host.Bind = tBound.Sub(t0)
	if err != nil {
		err = fmt.Errorf("bind chunk: %w", err)
	} else {
		err = expert.IntegrateGuided(ctx, n.backend, n.sched, n.x, n.pred, nil, guide, nil)
	}
	denoise := n.mono().Sub(t0)
	host.Steps = denoise - host.Bind
	if n.rejectInput(err, p) {
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
	actions := n.x
	clipped := n.clip(actions)

	m := &n.out
	m.Header = p.kv.msg.Header
	m.Seq, m.KVSeq, m.ContextSeq = seq, p.kv.msg.Seq, p.ctx.msg.Seq
	for i := range m.Actions {
		m.Actions[i].Values = actions[i*d.ActionDim : (i+1)*d.ActionDim]
	}
	m.Steps, m.Shift, m.NoiseSeed, m.Backend = uint32(n.sched.Steps()), n.sched.Shift, seed, n.p.Backend
	m.DryRun, m.Clipped = n.p.DryRun, clipped
	n.rtc.plan.fill(m)

	tPub, monoPub := n.now(), n.mono()
	r2p := monoPub.Sub(p.firstRecv(n.p.Sync.Policy))
	age := tPub.Sub(p.kv.stamp)
	stale := n.p.MaxInputAge > 0 && age > n.p.MaxInputAge
	m.DenoiseMs, m.ReceiveToPublishMs, m.InputAgeMs = ms(denoise), ms(r2p), ms(age)
	m.StaleInput = stale
	// Action i is for stamp + i*dt: those before the publish time are past.
	m.Dt, m.InferenceDelay = n.p.ControlPeriod.Seconds(), uint32(ceilPeriods(age, n.p.ControlPeriod, d.ActionTokens))

	// The executable actions, when post-processing is on: computed and
	// checked before anything is published, so that a refused chunk goes
	// out on neither topic.
	// The chunk's place on the control grid, as the executor indexes it:
	// the step check across the seam and the next chunk's s count from it.
	grid := n.rtc.gridStamp(p.kv.stamp)
	robot, ok := n.postProcess(m, actions, grid)
	if !ok {
		return
	}
	buf, err := m.AppendCDR(n.outBuf[:0])
	host.Encode = n.mono().Sub(monoPub)
	n.host = host
	if err != nil {
		n.backendFailed(ctx, seq, fmt.Errorf("encode action chunk: %w", err))
		return
	}
	n.outBuf = buf
	// The executable chunk first: whoever sees the chunk counted (Stats)
	// finds it on both topics.
	if robot != nil {
		if err := robot.Publish(n.robotBuf); err != nil {
			if c := n.stats.fail(); c == 1 || c%100 == 0 {
				n.log.Errorf("chunk %d: publish %s: %v (%d failures so far)", seq, n.p.Actions.Topic, err, c)
			}
			return
		}
	}
	if err := n.stats.publish(n.actions, buf, latencies{denoise: denoise, r2p: r2p, age: age, paired: p.lastRecv(n.p.Sync.Policy).Sub(p.kv.stamp), held: held}, stale, clipped, &n.rtc.plan); err != nil {
		n.rtcDrop(RTCResetFailed)
		if c := n.stats.fail(); c == 1 || c%100 == 0 {
			n.log.Errorf("chunk %d: publish %s: %v (%d failures so far)", seq, n.p.Topics.Actions, err, c)
		}
		return
	}
	n.rtc.published(grid, seq, actions)
	if seq == 0 {
		n.log.Infof("first chunk published: denoise %.1f ms, receive to publish %.1f ms", ms(denoise), ms(r2p))
	}
}

// postProcess runs the actions.* stage on the chunk m (whose rows are
// rows): it fills and encodes the executable chunk and returns its
// publisher, nil when the stage is off. ok is false when the chunk was
// refused (counted and logged): nothing is to be published.
func (n *Node) postProcess(m *msgs.ActionChunk, rows []float32, stamp time.Time) (Publisher, bool) {
	if n.post == nil {
		return nil, true
	}
	res, err := n.post.Apply(n.robotX, rows, stamp, n.p.ControlPeriod)
	if err != nil {
		reason := "error"
		var r *actions.Refusal
		if errors.As(err, &r) {
			reason = r.Reason
		}
		if c := n.stats.refuse(reason); c == 1 || c%100 == 0 {
			n.log.Warnf("chunk %d refused by the action limits, published on neither %s nor %s: %v (%d %q refusals so far, counted in %s)",
				m.Seq, n.p.Topics.Actions, n.p.Actions.Topic, err, c, reason, n.p.Topics.Diagnostics)
		}
		return nil, false
	}
	r := &n.robotOut
	rowsOut := r.Actions
	*r = *m
	r.Actions = rowsOut
	d := n.dims.ActionDim
	for i := range r.Actions {
		r.Actions[i].Values = n.robotX[i*d : (i+1)*d]
	}
	r.Clipped = m.Clipped || res.Clamped
	buf, err := r.AppendCDR(n.robotBuf[:0])
	if err != nil {
		n.backendFailed(context.Background(), m.Seq, fmt.Errorf("encode executable action chunk: %w", err))
		return nil, false
	}
	n.robotBuf = buf
	if res.Clamped {
		n.stats.clampedRobot()
	}
	return n.robot, true
}

// rejectInput counts err as a rejected input and reports true when it is
// an *expert.InputError: the input's topic and reason follow from the
// input it names.
func (n *Node) rejectInput(err error, p *pair) bool {
	if err == nil {
		return false
	}
	var bad *expert.InputError
	if !errors.As(err, &bad) {
		return false
	}
	n.rtcDrop(RTCResetRejected)
	topic, reason := n.p.KVInputTopic(), RejectShape
	switch {
	case bad.NonFinite():
		reason = RejectNonFinite
	case bad.Input == "visible_video":
		reason = RejectVisibleVideo
	case bad.Input == "context_mask":
		reason = RejectMask
	}
	if bad.Input == "context" || bad.Input == "context_mask" {
		topic = n.p.Topics.Context
	}
	n.rejectedPair(reject(topic, reason, "%v (stamp %s)", bad, fmtStamp(p.kv.stamp)))
	return true
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
	n.rtcDrop(RTCResetFailed)
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
