package asyncsim

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/fastwam/actionexpert/expert"
)

// CycleOptions configure RunCycles: the device model's inputs and the
// closed-loop simulation each deployment's cycle is fed to.
type CycleOptions struct {
	Board       Board
	Model       Model
	Deployments []Deployment
	// Sim is the simulation's template (inputs, backend, parameters,
	// control period, periods, RTC settings). For each deployment
	// RunCycles sets its Latency to the cycle in control periods, its
	// Delay to ceil of that, its Params.Steps to the deployment's steps,
	// and raises its Horizon to the delay when the delay exceeds it.
	Sim Options
}

// CycleRow is one deployment's estimate and what the simulation made of
// it.
type CycleRow struct {
	Cycle Cycle
	// Periods is the inference delay, the cycle in control periods.
	Periods float64
	// Slack is how many control periods of the previous chunk are left
	// when the next one arrives: a chunk covers action_tokens periods from
	// its observation, and the next arrives ceil(Periods) + Periods
	// periods after it (the node takes the first observation after it
	// delivered). Below 0 the executor starves.
	Slack float64
	// MinBandwidth is the lowest effective bandwidth, bytes/s, at which
	// the deployment keeps the executor fed (Slack >= 0), the rest of the
	// board as given; +Inf when none does (the compute alone is too long).
	MinBandwidth float64
	// Result is the closed-loop simulation at that latency; nil when the
	// cycle is longer than the chunk (Periods > action_tokens - 1): a
	// chunk arrives with no row left to execute, and the executor starves
	// between every two chunks.
	Result *Result
}

// Starvations is the executor's starvation count (the same in every RTC
// mode: the timing does not depend on it); -1 without a simulation.
func (r *CycleRow) Starvations() int {
	if r.Result == nil || len(r.Result.Modes) == 0 {
		return -1
	}
	return int(r.Result.Modes[0].Stats.Starvations)
}

// SeamP95 is the p95 seam jump of RTC mode m, NaN without a simulation.
func (r *CycleRow) SeamP95(m expert.RTCMode) float64 {
	if r.Result == nil {
		return math.NaN()
	}
	if mr := r.Result.Mode(m); mr != nil {
		return mr.SeamQuantiles().P95
	}
	return math.NaN()
}

// RunCycles estimates each deployment's cycle on the board and runs the
// closed-loop simulation at that latency. Deployments with the same
// latency and steps share one simulation. An error is a board, model or
// deployment the device model refuses, or a simulation that failed.
func RunCycles(ctx context.Context, o CycleOptions) ([]CycleRow, error) {
	if len(o.Deployments) == 0 {
		return nil, errNoDeployments
	}
	if o.Sim.Backend == nil {
		return nil, fmt.Errorf("asyncsim: cycles: no backend")
	}
	dt := o.Sim.ControlPeriod
	if dt == 0 {
		dt = 50 * time.Millisecond
		o.Sim.ControlPeriod = dt
	}
	if dt < time.Millisecond || dt > time.Minute {
		return nil, fmt.Errorf("asyncsim: control period %v; want 1 ms to 1 min", dt)
	}
	rows := o.Sim.Backend.Dims().ActionTokens
	type key struct {
		lat   float64
		steps int
	}
	done := map[key]*Result{}
	out := make([]CycleRow, 0, len(o.Deployments))
	for _, d := range o.Deployments {
		c, err := o.Board.Estimate(o.Model, d)
		if err != nil {
			return nil, err
		}
		// The latency in periods, to the nanosecond's precision the
		// simulation's clock has.
		lat := float64(c.Total) / float64(dt)
		row := CycleRow{Cycle: c, Periods: lat, Slack: slack(c.Total, dt, rows)}
		if row.MinBandwidth, err = MinBandwidth(o.Board, o.Model, d, rows, dt); err != nil {
			return nil, err
		}
		if lat <= float64(rows-1) {
			k := key{lat, d.Steps}
			res, ok := done[k]
			if !ok {
				so := o.Sim
				so.Latency = lat
				so.Delay = int(math.Ceil(lat))
				so.Horizon = max(so.Horizon, so.Delay)
				so.Params.Steps = d.Steps
				if res, err = Run(ctx, so); err != nil {
					return nil, fmt.Errorf("asyncsim: %v (cycle %v, %.2f periods): %w", d, c.Total, lat, err)
				}
				done[k] = res
			}
			row.Result = res
		}
		out = append(out, row)
	}
	return out, nil
}

// slack is what is left of a chunk of rows actions, in control periods of
// dt, when the next chunk arrives, for a cycle of total (CycleRow.Slack).
func slack(total, dt time.Duration, rows int) float64 {
	lat := float64(total) / float64(dt)
	return float64(rows) - math.Ceil(lat) - lat
}

// Bandwidths MinBandwidth searches between, bytes/s.
const (
	minSearchBandwidth = 1e6
	maxSearchBandwidth = 1e15
)

// MinBandwidth is the lowest effective weight-streaming bandwidth, bytes/s,
// at which deployment d keeps an executor of chunks of rows actions at
// control period dt fed (a slack >= 0), with b's other figures: found by
// bisection to 1e-9 relative; +Inf when even 1e15 bytes/s does not (the
// compute or the overheads alone take too long), 1e6 when that is enough.
// An error is a board, model or deployment Estimate refuses at 1e15
// bytes/s.
func MinBandwidth(b Board, m Model, d Deployment, rows int, dt time.Duration) (float64, error) {
	if rows < 1 || dt <= 0 {
		return 0, fmt.Errorf("asyncsim: minimum bandwidth for %d rows at %v; want rows >= 1 and a period above 0", rows, dt)
	}
	fed := func(bw float64) (bool, error) {
		b.Bandwidth = bw
		c, err := b.Estimate(m, d)
		if err != nil { // too slow for the model (MaxCycle): not fed
			return false, err
		}
		return slack(c.Total, dt, rows) >= 0, nil
	}
	lo, hi := minSearchBandwidth, maxSearchBandwidth
	if ok, err := fed(hi); err != nil || !ok {
		return math.Inf(1), err
	}
	if ok, _ := fed(lo); ok {
		return lo, nil
	}
	for hi/lo > 1+1e-9 { // fed(hi), not fed(lo)
		mid := math.Sqrt(lo * hi)
		if ok, _ := fed(mid); ok {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi, nil
}
