package main

import (
	"fmt"
	"math"
	"strings"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden"
)

// sigmaTolerance is how far a golden's recorded sigma may be from ours: the
// reference computes the same float32 formula, so they agree to rounding.
const sigmaTolerance = 1e-6

// schedule is the schedule parity runs for case c, and what it agrees
// with: -steps and -shift, checked against the golden's recorded
// loop_sigmas when it has a loop (whose length gives the steps unless
// -steps is given).
func (o *parityOpts) schedule(c *golden.Case) (expert.Schedule, string, error) {
	if c.LoopSigmas == nil {
		s, err := expert.NewSchedule(o.steps, float32(o.shift))
		if err != nil {
			return expert.Schedule{}, "", usageError("-steps %d, -shift %g: %v", o.steps, o.shift, err)
		}
		return s, "from -steps and -shift (the golden records no loop)", nil
	}
	s, err := checkLoopSchedule(c.Name, c.LoopSigmas, o.steps, o.set["steps"], o.shift)
	if err != nil {
		return expert.Schedule{}, "", err
	}
	return s, "the golden's loop_sigmas agree", nil
}

// checkLoopSchedule returns the schedule of len(recorded)-1 steps and the
// given shift, after checking that the golden's recorded sigmas are a
// flow-matching schedule and are this one. steps is -steps; stepsSet says
// it was given (then it must be the golden's). A mismatch is an error
// showing both schedules and the likely cause.
func checkLoopSchedule(name string, recorded []float32, steps int, stepsSet bool, shift float64) (expert.Schedule, error) {
	n := len(recorded) - 1
	if why := notASchedule(recorded); why != "" {
		return expert.Schedule{}, fmt.Errorf("golden %s: loop_sigmas %s are not a flow-matching schedule (%s; want %d values falling from 1 to 0): the golden's loop cannot be checked",
			name, sigmaList(recorded), why, n+1)
	}
	if stepsSet && steps != n {
		ours := "(invalid)"
		if s, err := expert.NewSchedule(steps, float32(shift)); err == nil {
			ours = sigmaList(s.Sigmas)
		}
		return expert.Schedule{}, fmt.Errorf("golden %s: its loop has %d steps, -steps is %d:\n  golden loop_sigmas        %s\n  -steps %d -shift %g gives %s\n  drop -steps to check the golden's loop",
			name, n, steps, sigmaList(recorded), steps, shift, ours)
	}
	s, err := expert.NewSchedule(n, float32(shift))
	if err != nil {
		return expert.Schedule{}, fmt.Errorf("golden %s: its loop of %d steps: %w", name, n, err)
	}
	worst := 0.0
	for i, v := range recorded {
		worst = max(worst, math.Abs(float64(v)-float64(s.Sigmas[i])))
	}
	if worst <= sigmaTolerance {
		return s, nil
	}
	cause := fmt.Sprintf("they are not a shifted schedule of %d steps (another scheduler, or damaged data)", n)
	if other, ok := inferShift(recorded); ok {
		cause = fmt.Sprintf("the golden was made with shift %.4g (its loop_sigmas are that schedule of %d steps): run parity with -shift %.4g", other, n, other)
	}
	return expert.Schedule{}, fmt.Errorf("golden %s: loop_sigmas differ from the schedule parity runs (by up to %.3g):\n  golden loop_sigmas        %s\n  parity, %d steps shift %g %s\n  likely cause: %s",
		name, worst, sigmaList(recorded), n, shift, sigmaList(s.Sigmas), cause)
}

// notASchedule says why sigmas are not a flow-matching schedule: finite,
// from 1 down to 0, strictly falling; "" when they are one.
func notASchedule(sigmas []float32) string {
	for i, v := range sigmas {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Sprintf("value %d is %v", i, v)
		}
	}
	n := len(sigmas) - 1
	switch {
	case math.Abs(float64(sigmas[0])-1) > sigmaTolerance:
		return fmt.Sprintf("the first is %g, not 1", sigmas[0])
	case math.Abs(float64(sigmas[n])) > sigmaTolerance:
		return fmt.Sprintf("the last is %g, not 0", sigmas[n])
	}
	for i := 1; i <= n; i++ {
		if !(sigmas[i] < sigmas[i-1]) {
			return fmt.Sprintf("value %d (%g) does not fall below value %d (%g)", i, sigmas[i], i-1, sigmas[i-1])
		}
	}
	return ""
}

// inferShift finds the shift whose schedule of len(sigmas)-1 steps sigmas
// are: sigma = s*u/(1+(s-1)*u) on u = linspace(1, 0, N+1) gives
// s = sigma*(1-u) / (u*(1-sigma)) at every inner point, which must agree.
func inferShift(sigmas []float32) (float64, bool) {
	n := len(sigmas) - 1
	if n < 2 {
		return 0, false // no inner point: every shift gives [1, 0]
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for k := 1; k < n; k++ {
		u, sg := 1-float64(k)/float64(n), float64(sigmas[k])
		s := sg * (1 - u) / (u * (1 - sg))
		lo, hi = min(lo, s), max(hi, s)
	}
	if !(lo > 0) || math.IsInf(hi, 0) || (hi-lo) > 1e-3*hi {
		return 0, false
	}
	s := (lo + hi) / 2
	check, err := expert.NewSchedule(n, float32(s))
	if err != nil {
		return 0, false
	}
	for i, v := range sigmas {
		if math.Abs(float64(v)-float64(check.Sigmas[i])) > 1e-5 {
			return 0, false
		}
	}
	return s, true
}

// sigmaList prints sigmas compactly, at most 12 of them.
func sigmaList(sigmas []float32) string {
	const show = 12
	parts := make([]string, 0, show+1)
	for i, v := range sigmas {
		if i == show {
			parts = append(parts, fmt.Sprintf("... (%d values)", len(sigmas)))
			break
		}
		parts = append(parts, fmt.Sprintf("%.6g", v))
	}
	return "[" + strings.Join(parts, " ") + "]"
}
