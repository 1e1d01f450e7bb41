package actions

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type goldenCase struct {
	Name     string `json:"name"`
	Mode     string `json:"mode"`
	Stepwise bool   `json:"stepwise"`
	Gripper  *struct {
		Affine, Invert, Binarize bool
	} `json:"gripper"`
	Limits *struct {
		Min     []float64 `json:"min"`
		Max     []float64 `json:"max"`
		MaxStep []float64 `json:"max_step"`
	} `json:"limits"`
	Want []uint32 `json:"want"`
}

type goldenFile struct {
	Tokens  int          `json:"tokens"`
	Dim     int          `json:"dim"`
	ZeroDim int          `json:"zero_dim"`
	Y       []uint32     `json:"y"`
	Cases   []goldenCase `json:"cases"`
}

const statsPath = "testdata/dataset_stats.json"

func loadGolden(t *testing.T) goldenFile {
	t.Helper()
	data, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(data, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) < 12 || len(g.Y) != g.Tokens*g.Dim {
		t.Fatalf("golden.json: %d cases, %d inputs", len(g.Cases), len(g.Y))
	}
	return g
}

func floats(bits []uint32) []float32 {
	out := make([]float32, len(bits))
	for i, b := range bits {
		out[i] = math.Float32frombits(b)
	}
	return out
}

// TestMatchesReference compares every mode (global and stepwise
// statistics, constant bounds, the gripper steps, clamped limits) with the
// NumPy transcription of the spec, bit for bit.
func TestMatchesReference(t *testing.T) {
	g := loadGolden(t)
	y := floats(g.Y)
	seen := map[Kind]bool{}
	for _, c := range g.Cases {
		t.Run(c.Name, func(t *testing.T) {
			m, err := ParseMode(c.Mode)
			if err != nil {
				t.Fatal(err)
			}
			seen[m.Kind] = true
			cfg := Config{Norm: m, Stats: statsPath, Key: "default", Stepwise: c.Stepwise, Gripper: Gripper{Dim: -1}}
			if c.Gripper != nil {
				cfg.Gripper.Affine, cfg.Gripper.Invert, cfg.Gripper.Binarize = c.Gripper.Affine, c.Gripper.Invert, c.Gripper.Binarize
			}
			if c.Limits != nil {
				cfg.Limits = Limits{Min: c.Limits.Min, Max: c.Limits.Max, MaxStep: c.Limits.MaxStep, Mode: LimitClamp}
			}
			p, err := New(cfg, g.Tokens, g.Dim)
			if err != nil {
				t.Fatal(err)
			}
			dst := make([]float32, len(y))
			res, err := p.Apply(dst, y, time.Unix(100, 0), 50*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			if c.Limits != nil && !res.Clamped {
				t.Errorf("limits case: nothing reported clamped")
			}
			want := floats(c.Want)
			bad := 0
			for i := range want {
				if math.Float32bits(dst[i]) != math.Float32bits(want[i]) {
					if bad++; bad <= 5 {
						t.Errorf("action %d dim %d: got %v, reference %v", i/g.Dim, i%g.Dim, dst[i], want[i])
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d values differ", bad, len(want))
			}
		})
	}
	for _, k := range []Kind{KindMinMax, KindQ01Q99, KindZScore, KindConst} {
		if !seen[k] {
			t.Errorf("no golden case for mode kind %d", k)
		}
	}
}

// TestZeroRangeDimension: the stats' zero-range dimension is offset only
// (x = y + lo), as the spec says, not scaled by 2/(tiny range).
func TestZeroRangeDimension(t *testing.T) {
	g := loadGolden(t)
	for _, stepwise := range []bool{false, true} {
		n, err := LoadNormalizer(statsPath, StatsSpec{Key: "default", Mode: Mode{Kind: KindMinMax}, Stepwise: stepwise}, g.Tokens, g.Dim)
		if err != nil {
			t.Fatal(err)
		}
		for r := range n.Rows {
			k := r*n.Dim + g.ZeroDim
			if n.Scale[k] != 1 {
				t.Errorf("stepwise %v row %d: zero-range dimension has scale %v, want 1", stepwise, r, n.Scale[k])
			}
		}
		if n.Scale[0] == 1 {
			t.Errorf("dimension 0 has scale 1: the range rule applied to a normal range")
		}
	}
}

// TestRangeTolBoundary: as upstream (`range < RANGE_TOL`), a range of
// exactly RangeTol is scaled like any other; only a smaller one is taken
// as 2 (scale 1). Dimension 0's range is 0.0001 (RangeTol), dimension 1's
// 0.00009.
func TestRangeTolBoundary(t *testing.T) {
	path := writeStats(t, `{"action": {"default": {"global_min": [0, 0.5], "global_max": [0.0001, 0.50009]}}}`)
	n, err := LoadNormalizer(path, StatsSpec{Key: "default", Mode: Mode{Kind: KindMinMax}}, 1, 2)
	if err != nil {
		t.Fatal(err)
	}
	lo, hi := 0.0, 0.0001
	if hi-lo != RangeTol {
		t.Fatalf("range %v is not RangeTol %v: the test proves nothing", hi-lo, RangeTol)
	}
	if want := 2 / (hi - lo); n.Scale[0] != want || n.Offset[0] != -1 {
		t.Errorf("range of exactly RangeTol: scale %v offset %v, want %v, -1 (scaled)", n.Scale[0], n.Offset[0], want)
	}
	if n.Scale[1] != 1 || n.Offset[1] != -0.5 {
		t.Errorf("range below RangeTol: scale %v offset %v, want 1, -0.5 (offset only)", n.Scale[1], n.Offset[1])
	}
}

// TestSeamPriorRow: across the seam, row 0 of a chunk stamped s periods
// after the previous one is step-checked against exactly the previous
// chunk's row s-1, the action for the instant before it, also with the
// stamp off the grid by less than half a period. The previous chunk's
// dimension 0 rises and its dimension 1 falls, so that its rows s-2 and s
// (in one dimension or the other) are more than max_step from the new row
// 0, and row s-1 is not.
func TestSeamPriorRow(t *testing.T) {
	const T, D = 4, 2
	dt := 50 * time.Millisecond
	t0 := time.Unix(10, 0)
	rise := []float32{-0.4, 0.05, 0.5, 0.5}
	prev := chunk(T, D, func(r, j int) float32 {
		if j == 0 {
			return rise[r]
		}
		return -rise[r]
	})
	next := chunk(T, D, func(r, j int) float32 { return -0.2 }) // 0.25 from row 1; 0.7 from row 2 (dim 0), row 0 (dim 1)
	for _, off := range []time.Duration{0, -2 * dt / 5, 2 * dt / 5} {
		p, err := New(Config{Limits: Limits{MaxStep: []float64{0.5}, Mode: LimitRefuse}}, T, D)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Apply(make([]float32, T*D), prev, t0, dt); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Apply(make([]float32, T*D), next, t0.Add(2*dt+off), dt); err != nil {
			t.Errorf("stamp 2 periods %+v after: %v; want it checked against row 1 only", off, err)
		}
	}
}

// TestSeamPriorNeedsSameDt: a chunk made with another control period
// (control_period changed live) has no prior in the previous chunk: its
// rows are for other instants, and its row 0 is not step-checked against
// them.
func TestSeamPriorNeedsSameDt(t *testing.T) {
	const T, D = 4, 2
	t0 := time.Unix(10, 0)
	p, err := New(Config{Limits: Limits{MaxStep: []float64{0.5}, Mode: LimitRefuse}}, T, D)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Apply(make([]float32, T*D), chunk(T, D, func(int, int) float32 { return 0.1 }), t0, 50*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	jump := chunk(T, D, func(int, int) float32 { return 0.9 })
	if _, err := p.Apply(make([]float32, T*D), jump, t0.Add(200*time.Millisecond), 100*time.Millisecond); err != nil {
		t.Errorf("dt 100 ms after a chunk of dt 50 ms: %v; want no seam check", err)
	}
	// With the same dt it is checked (the test's control).
	if _, err := p.Apply(make([]float32, T*D), chunk(T, D, func(int, int) float32 { return 0.1 }), t0.Add(400*time.Millisecond), 100*time.Millisecond); err == nil {
		t.Error("a seam step of 0.8 at the same dt accepted")
	}
}

func writeStats(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "dataset_stats.json")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHostileStats: every bad file is refused with an error naming the key
// and the problem.
func TestHostileStats(t *testing.T) {
	good7 := `[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]`
	cases := []struct {
		name, body, mode, key string
		stepwise              bool
		want                  []string
	}{
		{"missing key", `{"action": {"default": {}}}`, "min/max", "libero", false, []string{`action key "libero"`, `"default"`}},
		{"no action", `{"state": {}}`, "min/max", "default", false, []string{`no "action"`}},
		{"missing stat", `{"action": {"default": {"global_min": ` + good7 + `}}}`, "min/max", "default", false, []string{`"default"`, `"global_max"`}},
		{"wrong dim", `{"action": {"default": {"global_min": [0, 1], "global_max": ` + good7 + `}}}`, "min/max", "default", false, []string{`"default"`, "global_min has 2 values; want 7"}},
		{"wrong rows", `{"action": {"default": {"stepwise_min": [` + good7 + `], "stepwise_max": [` + good7 + `]}}}`, "min/max", "default", true, []string{`"default"`, "stepwise_min has 1 rows; want 32"}},
		{"NaN", `{"action": {"default": {"global_min": [0, NaN, 0, 0, 0, 0, 0], "global_max": ` + good7 + `}}}`, "min/max", "default", false, []string{`"default"`, "global_min[1] is NaN"}},
		{"Infinity", `{"action": {"default": {"global_mean": ` + good7 + `, "global_std": [1, 1, -Infinity, 1, 1, 1, 1]}}}`, "z-score", "default", false, []string{`"default"`, "global_std[2] is -Infinity"}},
		{"string value", `{"action": {"default": {"global_min": [0, "x", 0, 0, 0, 0, 0], "global_max": ` + good7 + `}}}`, "min/max", "default", false, []string{"global_min[1] is x"}},
		{"zero std", `{"action": {"default": {"global_mean": ` + good7 + `, "global_std": [1, 1, 1, 0, 1, 1, 1]}}}`, "z-score", "default", false, []string{`"default"`, "global_std[3] is 0", "positive std"}},
		{"overflowing number", `{"action": {"default": {"global_min": [0, 1e999, 0, 0, 0, 0, 0], "global_max": ` + good7 + `}}}`, "min/max", "default", false, []string{"global_min[1]", "finite"}},
		{"not json", `{"action": `, "min/max", "default", false, []string{"not a JSON object"}},
		{"duplicate statistic", `{"action": {"default": {"global_min": ` + good7 + `, "global_max": [1, 1, 1, 1, 1, 1, 1], "global_max": ` + good7 + `}}}`, "min/max", "default", false,
			[]string{`in "action": in "default": the key "global_max" appears twice in one object`}},
		{"duplicate action key", `{"action": {"default": {"global_min": ` + good7 + `, "global_max": [1, 1, 1, 1, 1, 1, 1]}, "default": {}}}`, "min/max", "default", false,
			[]string{`in "action": the key "default" appears twice`}},
		{"duplicate section", `{"action": {"default": {"global_min": ` + good7 + `, "global_max": [1, 1, 1, 1, 1, 1, 1]}}, "action": {}}`, "min/max", "default", false,
			[]string{`the key "action" appears twice`}},
		{"duplicate in a statistic not read", `{"action": {"default": {"global_min": ` + good7 + `, "global_max": [1, 1, 1, 1, 1, 1, 1]}}, "state": {"default": {"mean": [0], "mean": [1]}}}`, "min/max", "default", false,
			[]string{`in "state": in "default": the key "mean" appears twice`}},
		{"duplicate NaN file", `{"action": {"default": {"global_min": [NaN], "global_min": [0]}}}`, "min/max", "default", false,
			[]string{`the key "global_min" appears twice`}},
		{"max below min", `{"action": {"default": {"global_min": ` + good7 + `, "global_max": [1, 1, 0.1, 1, 1, 1, 1]}}}`, "min/max", "default", false,
			[]string{`"default"`, "global_max[2] is 0.1, below global_min[2] 0.3"}},
		{"q99 below q01 stepwise", `{"action": {"default": {"stepwise_q01": [` + strings.Repeat(good7+",", 31) + good7 + `], "stepwise_q99": [` + strings.Repeat("[1, 1, 1, 1, 1, 1, 1],", 30) + `[1, 1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0.5, 1]]}}}`, "q01/q99", "default", true,
			[]string{"stepwise_q99[31][5] is 0.5, below stepwise_q01[31][5] 0.6"}},
		{"null value", `{"action": {"default": {"global_min": [null, 0, 0, 0, 0, 0, 0], "global_max": ` + good7 + `}}}`, "min/max", "default", false,
			[]string{`"default"`, "global_min[0] is null: want a finite number"}},
		{"null list", `{"action": {"default": {"global_min": null, "global_max": ` + good7 + `}}}`, "min/max", "default", false,
			[]string{"global_min: want a list of 7 numbers: got null"}},
		{"null rows", `{"action": {"default": {"stepwise_min": null, "stepwise_max": null}}}`, "min/max", "default", true,
			[]string{"stepwise_min: want a list of 32 lists of 7 numbers: got null"}},
		{"null key", `{"action": {"default": null}}`, "min/max", "default", false, []string{`action key "default": not an object of statistics: got null`}},
		{"null action", `{"action": null}`, "min/max", "default", false, []string{`"action": not an object of keys: got null`}},
		{"null file", `null`, "min/max", "default", false, []string{"is null; want a JSON object"}},
		{"trailing data", `{"action": {}} {}`, "min/max", "default", false, []string{"after the JSON value"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := ParseMode(c.mode)
			if err != nil {
				t.Fatal(err)
			}
			_, err = New(Config{Norm: m, Stats: writeStats(t, c.body), Key: c.key, Stepwise: c.stepwise}, 32, 7)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	t.Run("huge file", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "dataset_stats.json")
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(MaxStatsFile + 1); err != nil {
			t.Fatal(err)
		}
		f.Close()
		_, err = New(Config{Norm: Mode{Kind: KindMinMax}, Stats: p, Key: "default"}, 32, 7)
		if err == nil || !strings.Contains(err.Error(), "dataset_stats.json") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("folder", func(t *testing.T) {
		_, err := New(Config{Norm: Mode{Kind: KindMinMax}, Stats: t.TempDir(), Key: "default"}, 32, 7)
		if err == nil {
			t.Fatal("a folder accepted as the stats file")
		}
	})
	t.Run("no file", func(t *testing.T) {
		_, err := New(Config{Norm: Mode{Kind: KindMinMax}, Key: "default"}, 32, 7)
		if err == nil || !strings.Contains(err.Error(), "actions.stats_file") {
			t.Fatalf("got %v", err)
		}
	})
}

func TestParseMode(t *testing.T) {
	for _, s := range []string{"off", "min/max", "q01/q99", "z-score", "-1/1", "0/2.5"} {
		m, err := ParseMode(s)
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if m.String() != s {
			t.Errorf("%q spelt back as %q", s, m.String())
		}
	}
	for _, s := range []string{"", "minmax", "1/1", "2/1", "nan/1", "a/b", "-inf/1"} {
		if _, err := ParseMode(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func chunk(tokens, dim int, f func(r, j int) float32) []float32 {
	out := make([]float32, tokens*dim)
	for r := range tokens {
		for j := range dim {
			out[r*dim+j] = f(r, j)
		}
	}
	return out
}

// TestLimits: bounds and steps are clamped or refused as configured, the
// step check spans the seam with the previous accepted chunk, and
// non-finite values are always refused.
func TestLimits(t *testing.T) {
	const T, D = 4, 2
	dt := 50 * time.Millisecond
	t0 := time.Unix(10, 0)
	flat := chunk(T, D, func(r, j int) float32 { return 0.1 })
	over := chunk(T, D, func(r, j int) float32 {
		if r == 2 && j == 1 {
			return 5
		}
		return 0.1
	})
	newPost := func(mode LimitMode) *Post {
		p, err := New(Config{Limits: Limits{Min: []float64{-1}, Max: []float64{1}, MaxStep: []float64{0.5}, Mode: mode}}, T, D)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("refuse bounds", func(t *testing.T) {
		p := newPost(LimitRefuse)
		dst := make([]float32, T*D)
		_, err := p.Apply(dst, over, t0, dt)
		r, ok := err.(*Refusal)
		if !ok || r.Reason != ReasonStep || r.Row != 2 || r.Dim != 1 {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("clamp", func(t *testing.T) {
		p := newPost(LimitClamp)
		dst := make([]float32, T*D)
		res, err := p.Apply(dst, over, t0, dt)
		if err != nil || !res.Clamped {
			t.Fatalf("res %+v err %v", res, err)
		}
		for i, v := range dst {
			if v < -1 || v > 1 {
				t.Errorf("value %d = %v outside the bounds", i, v)
			}
			if i >= D && math.Abs(float64(v-dst[i-D])) > 0.5+1e-6 {
				t.Errorf("value %d steps by %v", i, v-dst[i-D])
			}
		}
		if dst[2*D+1] != 0.6 {
			t.Errorf("the wild value became %v, want 0.1 + max_step", dst[2*D+1])
		}
	})
	t.Run("bounds only refuse", func(t *testing.T) {
		p, err := New(Config{Limits: Limits{Min: []float64{-1, -1}, Max: []float64{1, 2}, Mode: LimitRefuse}}, T, D)
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.Apply(make([]float32, T*D), over, t0, dt)
		if r, ok := err.(*Refusal); !ok || r.Reason != ReasonBounds || r.Limit != 2 {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("seam", func(t *testing.T) {
		p := newPost(LimitRefuse)
		if _, err := p.Apply(make([]float32, T*D), flat, t0, dt); err != nil {
			t.Fatal(err)
		}
		jump := chunk(T, D, func(r, j int) float32 { return 0.9 })
		// Two periods later: row 0 is the instant after the previous chunk's row 1.
		_, err := p.Apply(make([]float32, T*D), jump, t0.Add(2*dt), dt)
		if r, ok := err.(*Refusal); !ok || r.Reason != ReasonStep || r.Row != 0 {
			t.Fatalf("seam jump of 0.8: got %v", err)
		}
		// A refused chunk is not the previous one: the same again refused.
		if _, err := p.Apply(make([]float32, T*D), jump, t0.Add(2*dt), dt); err == nil {
			t.Fatal("second seam jump accepted")
		}
		// Past the previous chunk's end there is no seam to check.
		if _, err := p.Apply(make([]float32, T*D), jump, t0.Add(time.Duration(T+1)*dt), dt); err != nil {
			t.Fatalf("after a gap: %v", err)
		}
	})
	t.Run("non-finite", func(t *testing.T) {
		p, err := New(Config{Gripper: Gripper{Dim: -1, Invert: true}}, T, D)
		if err != nil {
			t.Fatal(err)
		}
		bad := append([]float32(nil), flat...)
		bad[5] = float32(math.Inf(1))
		_, err = p.Apply(make([]float32, T*D), bad, t0, dt)
		if r, ok := err.(*Refusal); !ok || r.Reason != ReasonNonFinite || r.Row != 2 || r.Dim != 1 {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("bad config", func(t *testing.T) {
		for _, l := range []Limits{
			{Min: []float64{1}, Max: []float64{0}},
			{Min: []float64{0, 0}, Max: []float64{1, -1}},
			{Min: []float64{2}, Max: []float64{1, 3}},
			{Min: []float64{math.Inf(-1)}},
			{Max: []float64{math.NaN()}},
			{Max: []float64{1, 1, 1}},
			{Min: []float64{0, 0, 0}, Max: []float64{1, 1, 1}},
			{MaxStep: []float64{0}},
			{MaxStep: []float64{math.NaN()}},
		} {
			if _, err := New(Config{Limits: l}, T, D); err == nil {
				t.Errorf("%+v accepted", l)
			}
		}
		if _, err := New(Config{Gripper: Gripper{Dim: 2, Affine: true}}, T, D); err == nil {
			t.Error("gripper dimension 2 of 2 accepted")
		}
	})
}

// TestOneSidedLimits: limits.min alone or limits.max alone is a bound on
// one side, which enables the stage; clamp moves only the values past it,
// refuse names it as the limit; the other side is unbounded.
func TestOneSidedLimits(t *testing.T) {
	const T, D = 4, 2
	dt := 50 * time.Millisecond
	t0 := time.Unix(10, 0)
	in := chunk(T, D, func(r, j int) float32 { return float32(r*D+j) - 3 }) // -3 to 4
	for _, c := range []struct {
		name   string
		limits Limits
		lo, hi float64
	}{
		{"max alone", Limits{Max: []float64{1}}, math.Inf(-1), 1},
		{"min alone", Limits{Min: []float64{-1}}, -1, math.Inf(1)},
		{"max alone per dimension", Limits{Max: []float64{1, 2}}, math.Inf(-1), 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Limits: c.limits}
			if !cfg.Enabled() {
				t.Fatal("a one-sided limit leaves the stage disabled")
			}
			p, err := New(cfg, T, D)
			if err != nil {
				t.Fatal(err)
			}
			dst := make([]float32, T*D)
			res, err := p.Apply(dst, in, t0, dt)
			if err != nil || !res.Clamped {
				t.Fatalf("clamp: res %+v err %v", res, err)
			}
			for i, v := range dst {
				lo, hi := c.limits.Bounds(i % D)
				want := math.Min(math.Max(float64(in[i]), lo), hi)
				if float64(v) != want {
					t.Errorf("value %d: %v clamped to %v, want %v", i, in[i], v, want)
				}
			}
			cfg.Limits.Mode = LimitRefuse
			p, err = New(cfg, T, D)
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Apply(dst, in, t0, dt)
			r, ok := err.(*Refusal)
			if !ok || r.Reason != ReasonBounds {
				t.Fatalf("refuse: got %v", err)
			}
			if math.IsInf(c.lo, 0) && (r.Limit != c.hi || r.Value <= c.hi) {
				t.Errorf("refused %v against %v, want a value above the upper bound %v", r.Value, r.Limit, c.hi)
			}
			if !math.IsInf(c.lo, 0) && (r.Limit != c.lo || r.Value >= c.lo) {
				t.Errorf("refused %v against %v, want a value below the lower bound %v", r.Value, r.Limit, c.lo)
			}
			// Within the one bound, any value on the open side passes.
			inside := chunk(T, D, func(r, j int) float32 {
				if math.IsInf(c.lo, 0) {
					return -1e30
				}
				return 1e30
			})
			if _, err := p.Apply(dst, inside, t0.Add(time.Hour), dt); err != nil {
				t.Errorf("a value on the unbounded side refused: %v", err)
			}
		})
	}
}
