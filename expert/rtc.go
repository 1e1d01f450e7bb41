package expert

import (
	"context"
	"fmt"
	"math"
	"time"
)

// RTCMode selects how real-time chunking ties a chunk being denoised to the
// actions of the previous chunk that the robot will execute while it is
// being computed.
type RTCMode uint8

// The real-time chunking modes.
const (
	// RTCOff denoises every chunk independently (the plain Euler loop).
	RTCOff RTCMode = iota
	// RTCReplace overwrites the masked rows after every Euler update with
	// the target noised to the new level, (1-sigma')*Y + sigma'*eps, blended
	// by the row weight (inpainting).
	RTCReplace
	// RTCGuided corrects every prediction toward the target with RTC's
	// guidance weight, taking the identity in place of the model's
	// Jacobian (forward-only RTC; see docs/rtc.md).
	RTCGuided
)

var rtcModeNames = [...]string{RTCOff: "off", RTCReplace: "replace", RTCGuided: "guided"}

// String returns the mode's parameter spelling: off, replace or guided.
func (m RTCMode) String() string {
	if int(m) < len(rtcModeNames) {
		return rtcModeNames[m]
	}
	return fmt.Sprintf("RTCMode(%d)", uint8(m))
}

// ParseRTCMode reads a mode's parameter spelling.
func ParseRTCMode(s string) (RTCMode, error) {
	for m, name := range rtcModeNames {
		if s == name {
			return RTCMode(m), nil
		}
	}
	return RTCOff, fmt.Errorf("expert: rtc mode %q: want off, replace or guided", s)
}

// MaskSchedule is the shape of the soft mask between the rows that are
// certainly executed before the new chunk arrives (weight 1) and the
// execution horizon (weight 0 from there on).
type MaskSchedule uint8

// The mask schedules of RTC.
const (
	// MaskExp decays as c*(e^c-1)/(e-1) with c the linear ramp (RTC's
	// default).
	MaskExp MaskSchedule = iota
	// MaskLinear decays linearly.
	MaskLinear
	// MaskOnes weighs every row before the horizon 1.
	MaskOnes
	// MaskZeros weighs only the delayed rows (those before d) 1.
	MaskZeros
)

var maskNames = [...]string{MaskExp: "exp", MaskLinear: "linear", MaskOnes: "ones", MaskZeros: "zeros"}

// String returns the schedule's parameter spelling.
func (m MaskSchedule) String() string {
	if int(m) < len(maskNames) {
		return maskNames[m]
	}
	return fmt.Sprintf("MaskSchedule(%d)", uint8(m))
}

// ParseMaskSchedule reads a schedule's parameter spelling.
func ParseMaskSchedule(s string) (MaskSchedule, error) {
	for m, name := range maskNames {
		if s == name {
			return MaskSchedule(m), nil
		}
	}
	return MaskExp, fmt.Errorf("expert: rtc mask schedule %q: want exp, linear, ones or zeros", s)
}

// PrefixWeights fills w, one weight per action row of the new chunk, with
// RTC's soft mask. avail is the number of rows the previous chunk still
// has an action for (its leftover, T - s), and the ramp ends where the
// leftover ends: the end is e = min(horizon, avail), as in the RTC paper's
// mask (whose ramp runs to H - s, its H being the chunk length) and
// LeRobot's RTCProcessor (which cuts an execution horizon longer than the
// leftover to the leftover). Then, with d = min(delay, e), row i weighs 1
// for i < d, the schedule applied to the ramp c = (e-i)/(e-d+1) for
// d <= i < e, and 0 from e on (see docs/rtc.md).
func PrefixWeights(w []float32, delay, horizon, avail int, sched MaskSchedule) error {
	switch {
	case delay < 0:
		return fmt.Errorf("expert: rtc inference delay %d: want >= 0 actions", delay)
	case horizon < 0:
		return fmt.Errorf("expert: rtc execution horizon %d: want >= 0 actions", horizon)
	case avail < 0:
		return fmt.Errorf("expert: rtc target rows %d: want >= 0", avail)
	case sched >= MaskSchedule(len(maskNames)):
		return fmt.Errorf("expert: rtc mask schedule %v: want exp, linear, ones or zeros", sched)
	}
	horizon = min(horizon, avail)
	delay = min(delay, horizon)
	for i := range w {
		var v float64
		switch {
		case i >= horizon:
			v = 0
		case i < delay:
			v = 1
		default:
			c := float64(horizon-i) / float64(horizon-delay+1)
			switch sched {
			case MaskOnes:
				v = 1
			case MaskZeros:
				v = 0
			case MaskLinear:
				v = c
			case MaskExp:
				v = c * math.Expm1(c) / (math.E - 1)
			}
		}
		w[i] = float32(v)
	}
	return nil
}

// GuidanceWeight is RTC's guidance weight at noise level sigma (Wan's
// convention: 1 is noise, 0 clean), clipped to beta: with tau = 1-sigma and
// r^2 = (1-tau)^2 / (tau^2 + (1-tau)^2), c = min(beta, (1-tau)/(tau*r^2)).
// At sigma = 1 (tau = 0) the unclipped weight is infinite and c = beta
// (also for sigma > 1); at sigma = 0 the formula is 0/0 and a clean chunk
// has nothing left to guide, so c = 0 (also for sigma < 0 and NaN). The
// Euler loop evaluates it only at sigma_0 .. sigma_{N-1}, all in (0, 1].
func GuidanceWeight(sigma, beta float32) float32 {
	s := float64(sigma)
	tau := 1 - s
	switch {
	case tau <= 0:
		return beta
	case !(s > 0):
		return 0
	}
	r2 := s * s / (tau*tau + s*s)
	return float32(math.Min(float64(beta), s/(tau*r2)))
}

// Guide ties the chunk being denoised to the previous chunk. The rows are
// the action tokens of the chunk: Target and Noise have one row of
// ActionDim values per token, Weights one value per token.
type Guide struct {
	Mode        RTCMode
	Target      []float32 // Y: the previous chunk's action for each row; rows of weight 0 are not read
	Weights     []float32 // W: the soft mask, in [0, 1]
	Noise       []float32 // eps: the chunk's own initial noise (replace mode)
	MaxGuidance float32   // beta: the guidance weight's clip (guided mode)
}

// Check reports whether g fits a chunk of dims d: every buffer its mode
// reads has the right length and holds finite values, weights in [0, 1].
// A nil Guide and RTCOff are always valid.
func (g *Guide) Check(d Dims) error {
	if g == nil || g.Mode == RTCOff {
		return nil
	}
	if g.Mode > RTCGuided {
		return fmt.Errorf("expert: rtc mode %v: want off, replace or guided", g.Mode)
	}
	if len(g.Weights) != d.ActionTokens {
		return fmt.Errorf("expert: rtc weights have %d rows, want %d (action_tokens)", len(g.Weights), d.ActionTokens)
	}
	for i, w := range g.Weights {
		if !(w >= 0 && w <= 1) {
			return fmt.Errorf("expert: rtc weight of row %d is %v, want a value in [0, 1]", i, w)
		}
	}
	if err := d.CheckLatents("rtc target", g.Target); err != nil {
		return err
	}
	if g.Mode == RTCReplace {
		if err := d.CheckLatents("rtc noise", g.Noise); err != nil {
			return err
		}
	}
	if g.Mode == RTCGuided && (!(g.MaxGuidance > 0) || math.IsInf(float64(g.MaxGuidance), 0)) {
		return fmt.Errorf("expert: rtc max guidance %v: want a finite number > 0 (beta; 0 would turn the guidance off, LeRobot refuses it too)", g.MaxGuidance)
	}
	return nil
}

// IntegrateGuided is Integrate with real-time chunking: g (nil, or mode
// RTCOff, for the plain loop, bit for bit) guides the rows its weights
// cover toward its target. In RTCGuided mode each prediction becomes
// pred - c(sigma)*W*(Y - x0_hat) with x0_hat = x - sigma*pred before the
// Euler update; in RTCReplace mode, after each update to level sigma',
// every row becomes (1-W)*x + W*((1-sigma')*Y + sigma'*eps). onStep sees the
// corrected prediction and the latents after both. It allocates only for
// an error.
func IntegrateGuided(ctx context.Context, b Backend, s Schedule, x, pred []float32, stepTimes []time.Duration, g *Guide, onStep func(StepInfo)) error {
	if len(pred) != len(x) {
		return fmt.Errorf("expert: pred has %d elements, latents %d; they must match", len(pred), len(x))
	}
	if stepTimes != nil && len(stepTimes) != s.Steps() {
		return fmt.Errorf("expert: %d step times for a schedule of %d steps", len(stepTimes), s.Steps())
	}
	if g != nil && g.Mode == RTCOff {
		g = nil
	}
	if g != nil {
		if err := g.Check(b.Dims()); err != nil {
			return err
		}
		if len(x) != len(g.Target) {
			return fmt.Errorf("expert: latents have %d elements, rtc target %d; they must match", len(x), len(g.Target))
		}
	}
	for k := 0; k < s.Steps(); k++ {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("denoise step %d: %w", k, err)
		}
		tau := s.Timestep(k)
		ts := time.Now()
		if err := b.Step(ctx, x, tau, pred); err != nil {
			return fmt.Errorf("denoise step %d (timestep %g): %w", k, tau, err)
		}
		el := time.Since(ts)
		if stepTimes != nil {
			stepTimes[k] = el
		}
		if i := FirstNonFinite(pred); i >= 0 {
			return fmt.Errorf("denoise step %d (timestep %g): prediction[%d] is %v", k, tau, i, pred[i])
		}
		if g != nil && g.Mode == RTCGuided {
			g.guide(x, pred, s.Sigmas[k])
		}
		dt := s.Delta(k)
		for i := range x {
			x[i] += pred[i] * dt
		}
		if g != nil && g.Mode == RTCReplace {
			g.replace(x, s.Sigmas[k+1])
		}
		if onStep != nil {
			onStep(StepInfo{Index: k, Timestep: tau, Pred: pred, Latents: x, Elapsed: el})
		}
	}
	return nil
}

// guide applies the forward-only RTC correction to pred at level sigma.
func (g *Guide) guide(x, pred []float32, sigma float32) {
	c := GuidanceWeight(sigma, g.MaxGuidance)
	dim := len(x) / len(g.Weights)
	for r, w := range g.Weights {
		if w == 0 {
			continue
		}
		cw := c * w
		for i := r * dim; i < (r+1)*dim; i++ {
			x0 := x[i] - sigma*pred[i]
			pred[i] -= cw * (g.Target[i] - x0)
		}
	}
}

// replace blends the target, noised to level sigma, into the rows of x.
func (g *Guide) replace(x []float32, sigma float32) {
	dim := len(x) / len(g.Weights)
	for r, w := range g.Weights {
		if w == 0 {
			continue
		}
		for i := r * dim; i < (r+1)*dim; i++ {
			y := (1-sigma)*g.Target[i] + sigma*g.Noise[i]
			x[i] = (1-w)*x[i] + w*y
		}
	}
}
