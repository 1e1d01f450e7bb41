package node

import (
	"fmt"
	"slices"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/node/params"
)

// liveParams are the parameters that may change while the node runs
// (see IsLive): taken by the worker before its next chunk.
type liveParams struct {
	steps          int
	shift          float64
	sched          expert.Schedule
	clipMin        []float64
	clipMax        []float64
	dryRun         bool
	maxInputAge    time.Duration
	syncTimeout    time.Duration
	controlPeriod  time.Duration
	rtc            params.RTCParams
	changed        []string // names, for the log
	resetsRTCState bool
}

// UpdateLive makes the node use the live parameters of p (see
// LiveParams) from its next chunk on; p's other parameters are ignored.
// Values the node cannot use (an action bound of the wrong length, a
// horizon beyond the chunk) are an error and change nothing.
func (n *Node) UpdateLive(p params.Params) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if err := checkRTC(p, n.dims); err != nil {
		return err
	}
	if k := len(p.ClipMin); k != 0 && k != 1 && k != n.dims.ActionDim {
		return fmt.Errorf("node: clip.min and clip.max have %d values; want 1 or %d (the action dimension)", k, n.dims.ActionDim)
	}
	sched, err := expert.NewSchedule(p.Steps, float32(p.Shift))
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	n.stateMu.Lock()
	cur := n.p
	n.stateMu.Unlock()
	lp := &liveParams{
		steps: p.Steps, shift: p.Shift, sched: sched,
		clipMin: slices.Clone(p.ClipMin), clipMax: slices.Clone(p.ClipMax), dryRun: p.DryRun,
		maxInputAge: p.MaxInputAge, syncTimeout: p.Sync.Timeout, controlPeriod: p.ControlPeriod, rtc: p.RTC,
	}
	for _, c := range []struct {
		name    string
		changed bool
	}{
		{"steps", cur.Steps != p.Steps}, {"shift", cur.Shift != p.Shift},
		{"clip.min", !slices.Equal(cur.ClipMin, p.ClipMin)}, {"clip.max", !slices.Equal(cur.ClipMax, p.ClipMax)},
		{"dry_run", cur.DryRun != p.DryRun}, {"max_input_age", cur.MaxInputAge != p.MaxInputAge},
		{"sync.timeout", cur.Sync.Timeout != p.Sync.Timeout}, {"control_period", cur.ControlPeriod != p.ControlPeriod},
		{"rtc", cur.RTC != p.RTC},
	} {
		if c.changed {
			lp.changed = append(lp.changed, c.name)
		}
	}
	lp.resetsRTCState = cur.RTC != p.RTC || cur.ControlPeriod != p.ControlPeriod
	// The input checks read their values under n.mu: they apply at once,
	// so that a too-strict max_input_age can be relaxed while every input
	// is being rejected.
	n.mu.Lock()
	n.recvMaxAge = p.MaxInputAge
	n.pairer.timeout = p.Sync.Timeout
	n.mu.Unlock()
	n.pending.Store(lp)
	return nil
}

// applyLive takes the parameters UpdateLive left for the worker. It runs
// on the worker goroutine only, between chunks.
func (n *Node) applyLive() {
	lp := n.pending.Swap(nil)
	if lp == nil {
		return
	}
	n.stateMu.Lock()
	n.p.Steps, n.p.Shift, n.sched = lp.steps, lp.shift, lp.sched
	n.p.ClipMin, n.p.ClipMax, n.p.DryRun = lp.clipMin, lp.clipMax, lp.dryRun
	n.p.MaxInputAge, n.p.Sync.Timeout = lp.maxInputAge, lp.syncTimeout
	n.p.ControlPeriod, n.p.RTC = lp.controlPeriod, lp.rtc
	n.stateMu.Unlock()
	if lp.resetsRTCState {
		n.rtc.p, n.rtc.dt, n.rtc.has = lp.rtc, lp.controlPeriod, false
	}
	if len(lp.changed) > 0 {
		n.log.Infof("parameters changed from this chunk on: %v", lp.changed)
	}
}
