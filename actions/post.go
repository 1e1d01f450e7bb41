package actions

import (
	"fmt"
	"math"
	"time"
)

// Gripper is the gripper post-processing of upstream's LIBERO evaluation,
// applied after un-normalising, in this order: Affine maps g to 2g - 1
// (the dataloader's 0 = close, 1 = open to [-1, 1]), Invert maps g to -g,
// Binarize maps g to sign(g) (0 stays 0). All are off by default.
type Gripper struct {
	Dim      int // the gripper's dimension; -1 = the last one
	Affine   bool
	Invert   bool
	Binarize bool
}

// Enabled reports whether any step is on.
func (g Gripper) Enabled() bool { return g.Affine || g.Invert || g.Binarize }

// LimitMode says what a value outside the bounds (or a step above the
// largest) does to its chunk.
type LimitMode int

// Limit modes.
const (
	LimitClamp  LimitMode = iota // clamp the value into the bounds (and the step to the largest)
	LimitRefuse                  // refuse the whole chunk
)

// ParseLimitMode reads "clamp" or "refuse".
func ParseLimitMode(s string) (LimitMode, error) {
	switch s {
	case "clamp":
		return LimitClamp, nil
	case "refuse":
		return LimitRefuse, nil
	}
	return 0, fmt.Errorf("want clamp or refuse, got %q", s)
}

// String spells the mode as ParseLimitMode reads it.
func (m LimitMode) String() string {
	if m == LimitRefuse {
		return "refuse"
	}
	return "clamp"
}

// Limits are the safety limits checked on the executable actions. Min, Max
// and MaxStep each hold no value (no limit), one value for every
// dimension, or one per dimension: Min alone or Max alone is a one-sided
// bound. MaxStep bounds |a[i][j] - a[i-1][j]| between consecutive actions,
// and across the seam: between a chunk's first row and the previous
// accepted chunk's action for the instant before it.
type Limits struct {
	Min, Max []float64
	MaxStep  []float64
	Mode     LimitMode
}

// Bounded reports whether Min or Max holds a value.
func (l Limits) Bounded() bool { return len(l.Min) > 0 || len(l.Max) > 0 }

// Bounds returns the bounds of dimension j: -Inf where Min holds no
// value, +Inf where Max holds none.
func (l Limits) Bounds(j int) (lo, hi float64) {
	lo, hi = math.Inf(-1), math.Inf(1)
	if len(l.Min) > 0 {
		lo = pick(l.Min, j)
	}
	if len(l.Max) > 0 {
		hi = pick(l.Max, j)
	}
	return lo, hi
}

// Check checks the limits against each other: counts of none, 1 or dim
// values (with dim 0, before the action dimension is known: Min and Max
// both of more than one value must have as many), finite bounds with each
// min <= its max, each max_step positive and finite. Its errors name the
// limits as limits.min, limits.max and limits.max_step.
func (l Limits) Check(dim int) error {
	for _, v := range []struct {
		name string
		vals []float64
	}{{"limits.min", l.Min}, {"limits.max", l.Max}, {"limits.max_step", l.MaxStep}} {
		if n := len(v.vals); dim > 0 && n != 0 && n != 1 && n != dim {
			return fmt.Errorf("%s has %d values; want none, 1 or %d (the action dimension)", v.name, n, dim)
		}
		for i, f := range v.vals {
			if !isFinite(f) {
				return fmt.Errorf("%s[%d] is %v; want a finite number", v.name, i, f)
			}
		}
	}
	if n, m := len(l.Min), len(l.Max); n > 1 && m > 1 && n != m {
		return fmt.Errorf("limits.min has %d values and limits.max %d; want as many when both give one per action dimension", n, m)
	}
	if len(l.Min) > 0 && len(l.Max) > 0 {
		for j := range max(len(l.Min), len(l.Max)) {
			if lo, hi := l.Bounds(j); lo > hi {
				return fmt.Errorf("limit %d: want limits.min <= limits.max, got [%v, %v]", j, lo, hi)
			}
		}
	}
	for i, s := range l.MaxStep {
		if !(s > 0) {
			return fmt.Errorf("limits.max_step[%d] is %v; want a positive finite number", i, s)
		}
	}
	return nil
}

// Config is the whole post-processing stage.
type Config struct {
	Norm     Mode
	Stats    string // dataset_stats.json, when Norm needs statistics
	Key      string
	Stepwise bool
	Gripper  Gripper
	Limits   Limits
}

// Enabled reports whether the stage changes anything: with nothing
// configured the node publishes the model's rows only.
func (c Config) Enabled() bool {
	return c.Norm.Kind != KindOff || c.Gripper.Enabled() ||
		c.Limits.Bounded() || len(c.Limits.MaxStep) > 0
}

// Refusal says why a chunk was refused.
type Refusal struct {
	Reason string // ReasonNonFinite, ReasonBounds or ReasonStep
	Row    int
	Dim    int
	Value  float64
	Limit  float64
}

// Reasons a chunk is refused.
const (
	ReasonNonFinite = "non_finite" // a value is NaN or infinite after post-processing
	ReasonBounds    = "bounds"     // a value outside [min, max] with mode refuse
	ReasonStep      = "step"       // a step between consecutive actions above max_step with mode refuse
)

func (r *Refusal) Error() string {
	switch r.Reason {
	case ReasonNonFinite:
		return fmt.Sprintf("action %d, dimension %d is %v after post-processing", r.Row, r.Dim, r.Value)
	case ReasonBounds:
		return fmt.Sprintf("action %d, dimension %d is %v, outside its bound %v", r.Row, r.Dim, r.Value, r.Limit)
	case ReasonStep:
		if r.Row == 0 {
			return fmt.Sprintf("action 0, dimension %d steps by %v from the previous chunk's action for the instant before, above max_step %v", r.Dim, r.Value, r.Limit)
		}
		return fmt.Sprintf("action %d, dimension %d steps by %v from action %d, above max_step %v", r.Row, r.Dim, r.Value, r.Row-1, r.Limit)
	}
	return r.Reason
}

// Post is the post-processing stage for chunks of Tokens x Dim actions. It
// keeps the last accepted chunk for the step check across seams; one
// goroutine uses it at a time.
type Post struct {
	cfg          Config
	tokens, dim  int
	norm         *Normalizer // nil: KindOff
	gripper      int         // the gripper's dimension
	prev         []float32   // the last accepted chunk's actions
	prevStamp    time.Time
	hasPrev      bool
	prevDt       time.Duration
	scratchPrior []float32
}

// New checks cfg against the chunk's shape and loads the statistics.
func New(cfg Config, tokens, dim int) (*Post, error) {
	if tokens < 1 || dim < 1 {
		return nil, fmt.Errorf("actions: chunk of %d x %d actions: want at least 1 x 1", tokens, dim)
	}
	p := &Post{cfg: cfg, tokens: tokens, dim: dim, prev: make([]float32, tokens*dim), scratchPrior: make([]float32, dim)}
	var err error
	switch {
	case cfg.Norm.NeedsStats():
		if cfg.Stats == "" {
			return nil, fmt.Errorf("actions: norm mode %s needs a dataset_stats.json (actions.stats_file)", cfg.Norm)
		}
		p.norm, err = LoadNormalizer(cfg.Stats, StatsSpec{Key: cfg.Key, Mode: cfg.Norm, Stepwise: cfg.Stepwise}, tokens, dim)
	case cfg.Norm.Kind == KindConst:
		p.norm, err = ConstNormalizer(cfg.Norm, dim)
	}
	if err != nil {
		return nil, fmt.Errorf("actions: %w", err)
	}
	p.gripper = cfg.Gripper.Dim
	if p.gripper == -1 {
		p.gripper = dim - 1
	}
	if cfg.Gripper.Enabled() && (p.gripper < 0 || p.gripper >= dim) {
		return nil, fmt.Errorf("actions: gripper dimension %d is outside the %d action dimensions", cfg.Gripper.Dim, dim)
	}
	if err := cfg.Limits.Check(dim); err != nil {
		return nil, fmt.Errorf("actions: %w", err)
	}
	return p, nil
}

// Config returns the stage's configuration.
func (p *Post) Config() Config { return p.cfg }

// Normalizer returns the un-normalisation map, nil with norm mode off.
func (p *Post) Normalizer() *Normalizer { return p.norm }

// Result says what Apply did to an accepted chunk.
type Result struct {
	Clamped bool // a value was clamped into its bounds or its step limited
}

// Apply post-processes one chunk of the model's rows (src) into dst
// (tokens*dim values each; they may be the same slice): un-normalisation,
// gripper, then the limits. stamp and dt place the chunk in time (row i is
// for stamp + i*dt) for the step check across the seam with the previous
// accepted chunk. A refused chunk returns a *Refusal, leaves the previous
// chunk as it was, and dst must not be used.
func (p *Post) Apply(dst, src []float32, stamp time.Time, dt time.Duration) (Result, error) {
	if len(src) != p.tokens*p.dim || len(dst) != len(src) {
		return Result{}, fmt.Errorf("actions: chunk of %d and %d values; want %d x %d", len(src), len(dst), p.tokens, p.dim)
	}
	if p.norm != nil {
		p.norm.Backward(dst, src)
	} else if &dst[0] != &src[0] {
		copy(dst, src)
	}
	if g := p.cfg.Gripper; g.Enabled() {
		for r := range p.tokens {
			dst[r*p.dim+p.gripper] = gripper(g, dst[r*p.dim+p.gripper])
		}
	}
	var res Result
	for i, v := range dst {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return Result{}, &Refusal{Reason: ReasonNonFinite, Row: i / p.dim, Dim: i % p.dim, Value: float64(v)}
		}
	}
	l := p.cfg.Limits
	prior, havePrior := p.priorAction(stamp, dt)
	for r := range p.tokens {
		for j := range p.dim {
			i := r*p.dim + j
			v := float64(dst[i])
			if len(l.MaxStep) > 0 && (r > 0 || havePrior) {
				var before float64
				if r > 0 {
					before = float64(dst[i-p.dim])
				} else {
					before = float64(prior[j])
				}
				ms := pick(l.MaxStep, j)
				if d := v - before; math.Abs(d) > ms {
					if l.Mode == LimitRefuse {
						return Result{}, &Refusal{Reason: ReasonStep, Row: r, Dim: j, Value: d, Limit: ms}
					}
					v, res.Clamped = before+math.Copysign(ms, d), true
				}
			}
			if l.Bounded() {
				lo, hi := l.Bounds(j)
				if v < lo || v > hi {
					if l.Mode == LimitRefuse {
						lim := lo
						if v > hi {
							lim = hi
						}
						return Result{}, &Refusal{Reason: ReasonBounds, Row: r, Dim: j, Value: v, Limit: lim}
					}
					v, res.Clamped = math.Min(math.Max(v, lo), hi), true
				}
			}
			if float64(dst[i]) != v {
				dst[i] = float32(v)
			}
		}
	}
	copy(p.prev, dst)
	p.prevStamp, p.prevDt, p.hasPrev = stamp, dt, true
	return res, nil
}

// Reset forgets the previous chunk: the next chunk's first row is not
// step-checked against it (after a gap, a restart, a time jump).
func (p *Post) Reset() { p.hasPrev = false }

// priorAction is the previous accepted chunk's action for the instant
// stamp - dt, when it has one.
func (p *Post) priorAction(stamp time.Time, dt time.Duration) ([]float32, bool) {
	if !p.hasPrev || dt <= 0 || p.prevDt != dt {
		return nil, false
	}
	s := math.Round(float64(stamp.Sub(p.prevStamp))/float64(dt)) - 1
	if s < 0 || s >= float64(p.tokens) {
		return nil, false
	}
	k := int(s)
	copy(p.scratchPrior, p.prev[k*p.dim:(k+1)*p.dim])
	return p.scratchPrior, true
}

func gripper(g Gripper, v float32) float32 {
	x := float64(v)
	if g.Affine {
		x = 2*x - 1
	}
	if g.Invert {
		x = -x
	}
	if g.Binarize {
		switch {
		case x > 0:
			x = 1
		case x < 0:
			x = -1
		}
	}
	return float32(x)
}

func pick(v []float64, j int) float64 {
	if len(v) == 1 {
		return v[0]
	}
	return v[j]
}
