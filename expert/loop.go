package expert

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// DefaultSteps and DefaultShift are the evaluation settings of the released
// model: ten Euler steps on a schedule shifted by 5.
const (
	DefaultSteps = 10
	DefaultShift = 5
)

// Schedule is a shifted flow-matching schedule: N+1 noise levels sigma from
// 1 down to exactly 0. Step k feeds timestep Sigmas[k]*1000 and moves the
// latents by Sigmas[k+1]-Sigmas[k].
type Schedule struct {
	Shift  float32
	Sigmas []float32 // N+1 values, Sigmas[0] = 1, Sigmas[N] = 0
}

// NewSchedule builds the schedule of WanContinuousFlowMatchScheduler in
// float32, as the reference does: u = linspace(1, 0, steps+1), then
// sigma = shift*u / (1 + (shift-1)*u).
func NewSchedule(steps int, shift float32) (Schedule, error) {
	if steps < 1 || steps > 1000 {
		return Schedule{}, fmt.Errorf("expert: steps must be in [1,1000], got %d", steps)
	}
	if !(shift > 0) || math.IsInf(float64(shift), 0) {
		return Schedule{}, fmt.Errorf("expert: shift must be a positive finite number, got %v", shift)
	}
	u := linspace32(1, 0, steps+1)
	s := Schedule{Shift: shift, Sigmas: make([]float32, len(u))}
	for i, v := range u {
		s.Sigmas[i] = shift * v / (1 + (shift-1)*v)
	}
	return s, nil
}

// linspace32 mirrors torch.linspace for float32 on the CPU: the first half
// counts up from start, the second half down from end, so both ends are
// exact.
func linspace32(start, end float32, n int) []float32 {
	out := make([]float32, n)
	if n == 1 {
		out[0] = start
		return out
	}
	step := (end - start) / float32(n-1)
	half := n / 2
	for i := range out {
		if i < half {
			out[i] = start + step*float32(i)
		} else {
			out[i] = end - step*float32(n-i-1)
		}
	}
	return out
}

// Steps is the number of denoise steps N.
func (s Schedule) Steps() int { return len(s.Sigmas) - 1 }

// Timestep is the timestep fed to step k: sigma[k]*1000.
func (s Schedule) Timestep(k int) float32 { return s.Sigmas[k] * 1000 }

// Delta is the Euler step size of step k: sigma[k+1]-sigma[k] (negative).
func (s Schedule) Delta(k int) float32 { return s.Sigmas[k+1] - s.Sigmas[k] }

// Timesteps lists the N timesteps of the schedule.
func (s Schedule) Timesteps() []float32 {
	ts := make([]float32, s.Steps())
	for k := range ts {
		ts[k] = s.Timestep(k)
	}
	return ts
}

// Noise returns n standard-normal float32 values drawn from a PCG generator
// seeded with seed (Box-Muller on its 53-bit uniforms). The stream is fixed
// by this function alone, so a chunk's initial noise is reproduced bit for
// bit from its reported seed on any machine.
func Noise(seed uint64, n int) []float32 {
	out := make([]float32, n)
	NoiseInto(seed, out)
	return out
}

// NoiseInto writes Noise(seed, len(out)) into out without allocating.
func NoiseInto(seed uint64, out []float32) {
	var src rand.PCG
	src.Seed(seed, 0x9e3779b97f4a7c15)
	uniform := func() float64 { return (float64(src.Uint64()>>11) + 0.5) / (1 << 53) }
	n := len(out)
	for i := 0; i < n; i += 2 {
		r := math.Sqrt(-2 * math.Log(uniform()))
		sin, cos := math.Sincos(2 * math.Pi * uniform())
		out[i] = float32(r * cos)
		if i+1 < n {
			out[i+1] = float32(r * sin)
		}
	}
}

// StepInfo describes one finished denoise step to an observer.
type StepInfo struct {
	Index    int           // step k, from 0
	Timestep float32       // sigma[k]*1000
	Pred     []float32     // the backend's prediction (valid during the callback only)
	Latents  []float32     // the latents after the Euler update (valid during the callback only)
	Elapsed  time.Duration // wall time of the backend's Step
}

// Result is one denoised chunk.
type Result struct {
	Actions   []float32       // [ActionTokens, ActionDim], normalised action space
	BindTime  time.Duration   // wall time of BindChunk
	StepTimes []time.Duration // wall time of each Step
}

// Denoise binds c to b and runs the Euler loop of s from the initial noise
// x0, which it does not modify. onStep, when not nil, is called after every
// step. Any error leaves no partial result: a prediction that is not finite
// is an error naming the step.
func Denoise(ctx context.Context, b Backend, c *Chunk, s Schedule, x0 []float32, onStep func(StepInfo)) (Result, error) {
	d := b.Dims()
	if err := d.CheckLatents("initial noise", x0); err != nil {
		return Result{}, err
	}
	if s.Steps() < 1 {
		return Result{}, fmt.Errorf("expert: schedule has no steps")
	}
	t0 := time.Now()
	if err := b.BindChunk(ctx, c); err != nil {
		return Result{}, fmt.Errorf("bind chunk: %w", err)
	}
	res := Result{BindTime: time.Since(t0), StepTimes: make([]time.Duration, s.Steps())}
	x := append([]float32(nil), x0...)
	if err := Integrate(ctx, b, s, x, make([]float32, len(x)), res.StepTimes, onStep); err != nil {
		return Result{}, err
	}
	res.Actions = x
	return res, nil
}

// Integrate runs the Euler loop of s on the chunk bound to b, in place: x
// holds the initial noise on entry and the actions on a nil return (on
// error, unspecified values). pred is scratch of x's length; stepTimes,
// when not nil, has s.Steps() entries and receives each Step's wall time.
// onStep, when not nil, is called after every step. A prediction that is
// not finite is an error naming the step. It allocates only for an error.
func Integrate(ctx context.Context, b Backend, s Schedule, x, pred []float32, stepTimes []time.Duration, onStep func(StepInfo)) error {
	return IntegrateGuided(ctx, b, s, x, pred, stepTimes, nil, onStep)
}
