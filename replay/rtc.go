package replay

import (
	"fmt"
	"math"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
)

// rtcPlans holds, by stamp, how each recorded chunk was tied to its
// predecessor: the plan rebuilt from the chunk's rtc_ fields and the
// RECORDED previous chunk (by rtc_prev_seq), or why that cannot be done.
// The node asks it for every pair (node.Config.RTCPlan), so that a replay
// reproduces tied chunks from what was published, not from its own output.
type rtcPlans struct {
	plans map[int64]node.RTCPlan
	errs  map[int64]error
}

// newRTCPlans reads the plans of rec's chunks for a backend of dims d. The
// recorded fields are hostile: every one is checked before it is used.
func newRTCPlans(rec *Recording, d expert.Dims) *rtcPlans {
	r := &rtcPlans{plans: map[int64]node.RTCPlan{}, errs: map[int64]error{}}
	bySeq := map[uint64]*Recorded{}
	for i := range rec.Recorded {
		rc := &rec.Recorded[i]
		if _, dup := bySeq[rc.Chunk.Seq]; !dup {
			bySeq[rc.Chunk.Seq] = rc
		}
	}
	flat := map[uint64][]float32{} // the previous chunks' actions, flattened once
	for i := range rec.Recorded {
		c := &rec.Recorded[i].Chunk
		k := stampTime(c.Header.Stamp).UnixNano()
		if _, seen := r.plans[k]; seen {
			continue // the first chunk of a stamp is compared
		}
		if _, seen := r.errs[k]; seen {
			continue
		}
		pl, err := recordedPlan(c, bySeq, flat, d)
		if err != nil {
			r.errs[k] = err
			continue
		}
		r.plans[k] = pl
	}
	return r
}

// plan is the node.Config.RTCPlan of a replay: the recorded plan of the
// chunk with this stamp; an untied chunk for a stamp whose recorded plan
// is unusable (its row fails on that error); none for an unrecorded stamp
// (the node's own state decides).
func (r *rtcPlans) plan(_ uint64, stamp time.Time) (node.RTCPlan, bool) {
	k := stamp.UnixNano()
	if pl, ok := r.plans[k]; ok {
		return pl, true
	}
	if _, bad := r.errs[k]; bad {
		return node.RTCPlan{}, true
	}
	return node.RTCPlan{}, false
}

// recordedPlan rebuilds chunk c's plan; flat caches flattened previous
// chunks by seq.
func recordedPlan(c *msgs.ActionChunk, bySeq map[uint64]*Recorded, flat map[uint64][]float32, d expert.Dims) (node.RTCPlan, error) {
	if c.RTCMode == "" || c.RTCMode == "off" {
		return node.RTCPlan{}, nil
	}
	mode, err := expert.ParseRTCMode(c.RTCMode)
	if err != nil {
		return node.RTCPlan{}, fmt.Errorf("recorded rtc_mode %q: want off, replace or guided", c.RTCMode)
	}
	sched, err := expert.ParseMaskSchedule(c.RTCSchedule)
	if err != nil {
		return node.RTCPlan{}, fmt.Errorf("recorded rtc_schedule %q: want exp, linear, ones or zeros", c.RTCSchedule)
	}
	rows := d.ActionTokens
	switch h, s, dl := int64(c.RTCHorizon), int64(c.RTCShift), int64(c.RTCDelay); {
	case h < 1 || h > int64(rows):
		return node.RTCPlan{}, fmt.Errorf("recorded rtc_horizon %d: want 1 to %d (action_tokens)", h, rows)
	case s >= int64(rows):
		// s may reach the horizon: the chunk is tied to the leftover rows
		// (issue 16); nothing is left from action_tokens on.
		return node.RTCPlan{}, fmt.Errorf("recorded rtc_shift %d: want less than %d (action_tokens)", s, rows)
	case dl > h:
		return node.RTCPlan{}, fmt.Errorf("recorded rtc_delay %d: want at most rtc_horizon %d", dl, h)
	}
	beta := c.RTCMaxGuidance
	if !(beta >= 0) || math.IsInf(float64(beta), 0) || (mode == expert.RTCGuided && beta == 0) {
		return node.RTCPlan{}, fmt.Errorf("recorded rtc_max_guidance %v: want a finite number > 0 in guided mode (0 in replace mode)", beta)
	}
	prev, ok := bySeq[c.RTCPrevSeq]
	if !ok {
		return node.RTCPlan{}, fmt.Errorf("rtc_prev_seq %d: the bag records no chunk with that seq, so the chunk cannot be rebuilt", c.RTCPrevSeq)
	}
	a, ok := flat[c.RTCPrevSeq]
	if !ok {
		if a, err = flatActions(&prev.Chunk, d); err != nil {
			return node.RTCPlan{}, fmt.Errorf("rtc_prev_seq %d: %w", c.RTCPrevSeq, err)
		}
		flat[c.RTCPrevSeq] = a
	}
	return node.RTCPlan{
		Mode: mode, PrevSeq: c.RTCPrevSeq, Prev: a, Shift: int(c.RTCShift), Delay: int(c.RTCDelay),
		Horizon: int(c.RTCHorizon), Schedule: sched, MaxGuidance: beta,
	}, nil
}

// flatActions checks a recorded chunk's rows against d and flattens them.
func flatActions(c *msgs.ActionChunk, d expert.Dims) ([]float32, error) {
	if len(c.Actions) != d.ActionTokens {
		return nil, fmt.Errorf("the previous chunk has %d action rows, want %d (action_tokens)", len(c.Actions), d.ActionTokens)
	}
	out := make([]float32, 0, d.LatentLen())
	for i, r := range c.Actions {
		if len(r.Values) != d.ActionDim {
			return nil, fmt.Errorf("row %d of the previous chunk has %d values, want %d (action_dim)", i, len(r.Values), d.ActionDim)
		}
		out = append(out, r.Values...)
	}
	if i := expert.FirstNonFinite(out); i >= 0 {
		return nil, fmt.Errorf("the previous chunk's action value %d is %v, want a finite number", i, out[i])
	}
	return out, nil
}
