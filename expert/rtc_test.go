package expert

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
)

// oracle is the exact flow-matching denoiser of a single clean chunk m:
// for x = (1-sigma)*m + sigma*eps it predicts eps - m = (x - m)/sigma, so the
// plain Euler loop lands on m exactly and every row evolves on its own.
type oracle struct {
	d Dims
	m []float32
}

func (o oracle) Dims() Dims                              { return o.d }
func (o oracle) BindChunk(context.Context, *Chunk) error { return nil }
func (o oracle) Close() error                            { return nil }
func (o oracle) Step(_ context.Context, x []float32, tau float32, pred []float32) error {
	sigma := tau / 1000
	for i := range pred {
		pred[i] = (x[i] - o.m[i]) / sigma
	}
	return nil
}

// rtcFixture is an oracle chunk m, a target Y far from it, the initial noise
// and the row weights 1, 0.6, 0, 0 (tinyDims has 4 rows of 2).
func rtcFixture() (oracle, Schedule, []float32, []float32, []float32) {
	d := tinyDims()
	n := d.LatentLen()
	m, y := make([]float32, n), make([]float32, n)
	for i := range m {
		m[i] = float32(i%3) - 1
		y[i] = m[i] + 2 + float32(i)/4
	}
	s, _ := NewSchedule(10, 5)
	return oracle{d, m}, s, y, Noise(3, n), []float32{1, 0.6, 0, 0}
}

func run(t *testing.T, b Backend, s Schedule, eps []float32, g *Guide) []float32 {
	t.Helper()
	x := slices.Clone(eps)
	if err := IntegrateGuided(context.Background(), b, s, x, make([]float32, len(x)), nil, g, nil); err != nil {
		t.Fatal(err)
	}
	return x
}

func rowDist(a, y []float32, row, dim int) float64 {
	var d float64
	for i := row * dim; i < (row+1)*dim; i++ {
		d = math.Max(d, math.Abs(float64(a[i])-float64(y[i])))
	}
	return d
}

// TestRTCBehaviour: with the exact denoiser, off ends at m; replace with
// W = 1 ends exactly at Y; both modes bring the weighted rows nearer Y than
// off does (a flipped guidance sign pushes them away), leave the rows of
// weight 0 bit for bit as off leaves them, and guided follows its closed
// form, computed here in float64.
func TestRTCBehaviour(t *testing.T) {
	b, s, y, eps, w := rtcFixture()
	dim := b.d.ActionDim
	off := run(t, b, s, eps, nil)
	for i := range off {
		if math.Abs(float64(off[i]-b.m[i])) > 1e-5 {
			t.Fatalf("off: x[%d] = %v, the oracle's chunk %v", i, off[i], b.m[i])
		}
	}
	rep := run(t, b, s, eps, &Guide{Mode: RTCReplace, Target: y, Weights: w, Noise: eps})
	gui := run(t, b, s, eps, &Guide{Mode: RTCGuided, Target: y, Weights: w, MaxGuidance: 5})
	for i := range dim {
		if rep[i] != y[i] {
			t.Errorf("replace, W = 1: x[%d] = %v, want exactly Y = %v", i, rep[i], y[i])
		}
	}
	for r, wr := range w {
		dOff, dRep, dGui := rowDist(off, y, r, dim), rowDist(rep, y, r, dim), rowDist(gui, y, r, dim)
		t.Logf("row %d (W %.1f): max|A-Y| off %.4f replace %.4f guided %.4f", r, wr, dOff, dRep, dGui)
		if wr == 0 {
			for i := r * dim; i < (r+1)*dim; i++ {
				if rep[i] != off[i] || gui[i] != off[i] {
					t.Errorf("row %d has weight 0 but moved: off %v replace %v guided %v", r, off[i], rep[i], gui[i])
				}
			}
			continue
		}
		if !(dRep < 0.9*dOff) || !(dGui < 0.9*dOff) {
			t.Errorf("row %d (W %v): replace %.4f and guided %.4f must be nearer Y than off %.4f", r, wr, dRep, dGui, dOff)
		}
	}
	// Guided, closed form: x0_hat = m exactly, so e = x - m evolves as
	// e' = e*sigma'/sigma + c(sigma)*W*(sigma-sigma')*(Y - m).
	for r, wr := range w {
		for i := r * dim; i < (r+1)*dim; i++ {
			e := float64(eps[i] - b.m[i])
			for k := 0; k < s.Steps(); k++ {
				sg, sn := float64(s.Sigmas[k]), float64(s.Sigmas[k+1])
				tau := 1 - sg
				c := 5.0
				if tau > 0 {
					c = math.Min(5, (tau*tau+sg*sg)/(tau*sg)) // (1-tau)/(tau r^2), simplified
				}
				e = e*sn/sg + c*float64(wr)*(sg-sn)*float64(y[i]-b.m[i])
			}
			if want := float64(b.m[i]) + e; math.Abs(float64(gui[i])-want) > 1e-5 {
				t.Errorf("guided x[%d] = %v, closed form %v", i, gui[i], want)
			}
		}
	}
}

// TestRTCOffIsPlain: a nil guide and an RTCOff guide (whatever it holds)
// give Integrate's result bit for bit, and IntegrateGuided allocates nothing
// with either mode on.
func TestRTCOffIsPlain(t *testing.T) {
	b, s, y, eps, w := rtcFixture()
	plain := slices.Clone(eps)
	if err := Integrate(context.Background(), b, s, plain, make([]float32, len(plain)), nil, nil); err != nil {
		t.Fatal(err)
	}
	for _, g := range []*Guide{nil, {Mode: RTCOff, Target: []float32{float32(math.NaN())}, MaxGuidance: -1}} {
		if got := run(t, b, s, eps, g); !slices.Equal(got, plain) {
			t.Errorf("guide %+v changed the plain loop", g)
		}
	}
	x, pred := make([]float32, len(eps)), make([]float32, len(eps))
	var bk Backend = b
	ctx := context.Background()
	for _, g := range []*Guide{
		{Mode: RTCReplace, Target: y, Weights: w, Noise: eps},
		{Mode: RTCGuided, Target: y, Weights: w, MaxGuidance: 5},
	} {
		if a := testing.AllocsPerRun(10, func() {
			copy(x, eps)
			if err := IntegrateGuided(ctx, bk, s, x, pred, nil, g, nil); err != nil {
				t.Fatal(err)
			}
		}); a != 0 {
			t.Errorf("%v: %v allocations per loop", g.Mode, a)
		}
	}
}

// TestGuideCheck: every malformed guide is refused, by Check and by
// IntegrateGuided before the latents are touched.
func TestGuideCheck(t *testing.T) {
	b, s, y, eps, w := rtcFixture()
	d := b.d
	nan := float32(math.NaN())
	with := func(v []float32, i int, x float32) []float32 { v = slices.Clone(v); v[i] = x; return v }
	for _, tc := range []struct {
		name string
		g    Guide
		want string // "" = valid
	}{
		{"replace ok", Guide{Mode: RTCReplace, Target: y, Weights: w, Noise: eps}, ""},
		{"guided ok without noise", Guide{Mode: RTCGuided, Target: y, Weights: w, MaxGuidance: 5}, ""},
		{"guided, beta 0", Guide{Mode: RTCGuided, Target: y, Weights: w}, "rtc max guidance 0: want a finite number > 0"},
		{"replace ignores beta", Guide{Mode: RTCReplace, Target: y, Weights: w, Noise: eps, MaxGuidance: -1}, ""},
		{"unknown mode", Guide{Mode: 7, Target: y, Weights: w, Noise: eps}, "rtc mode RTCMode(7): want off, replace or guided"},
		{"weights short", Guide{Mode: RTCGuided, Target: y, Weights: w[:3], MaxGuidance: 5}, "rtc weights have 3 rows, want 4 (action_tokens)"},
		{"weights nil", Guide{Mode: RTCReplace, Target: y, Noise: eps}, "rtc weights have 0 rows, want 4"},
		{"weight negative", Guide{Mode: RTCGuided, Target: y, Weights: with(w, 1, -0.1), MaxGuidance: 5}, "rtc weight of row 1 is -0.1, want a value in [0, 1]"},
		{"weight above 1", Guide{Mode: RTCReplace, Target: y, Weights: with(w, 3, 1.5), Noise: eps}, "rtc weight of row 3 is 1.5, want a value in [0, 1]"},
		{"weight NaN", Guide{Mode: RTCGuided, Target: y, Weights: with(w, 0, nan), MaxGuidance: 5}, "rtc weight of row 0 is NaN"},
		{"target short", Guide{Mode: RTCGuided, Target: y[:7], Weights: w, MaxGuidance: 5}, "rtc target has 7 elements, want 8"},
		{"target NaN", Guide{Mode: RTCReplace, Target: with(y, 5, nan), Weights: w, Noise: eps}, "rtc target[5] is NaN"},
		{"target Inf in a row of weight 0", Guide{Mode: RTCGuided, Target: with(y, 7, float32(math.Inf(1))), Weights: w, MaxGuidance: 5}, "rtc target[7] is +Inf"},
		{"replace without noise", Guide{Mode: RTCReplace, Target: y, Weights: w}, "rtc noise has 0 elements, want 8"},
		{"noise NaN", Guide{Mode: RTCReplace, Target: y, Weights: w, Noise: with(eps, 2, nan)}, "rtc noise[2] is NaN"},
		{"beta negative", Guide{Mode: RTCGuided, Target: y, Weights: w, MaxGuidance: -1}, "rtc max guidance -1: want a finite number > 0"},
		{"beta NaN", Guide{Mode: RTCGuided, Target: y, Weights: w, MaxGuidance: nan}, "rtc max guidance NaN"},
		{"beta Inf", Guide{Mode: RTCGuided, Target: y, Weights: w, MaxGuidance: float32(math.Inf(1))}, "rtc max guidance +Inf"},
	} {
		err := tc.g.Check(d)
		x := slices.Clone(eps)
		ierr := IntegrateGuided(context.Background(), b, s, x, make([]float32, len(x)), nil, &tc.g, nil)
		if tc.want == "" {
			if err != nil || ierr != nil {
				t.Errorf("%s: Check %v, IntegrateGuided %v", tc.name, err, ierr)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Check = %v, want an error containing %q", tc.name, err, tc.want)
		}
		if ierr == nil || ierr.Error() != err.Error() || !slices.Equal(x, eps) {
			t.Errorf("%s: IntegrateGuided = %v (latents kept: %v), want Check's error before any step", tc.name, ierr, slices.Equal(x, eps))
		}
	}
	var nilGuide *Guide
	if err := nilGuide.Check(d); err != nil {
		t.Errorf("nil guide: %v", err)
	}
}

// TestPrefixWeights checks RTC's soft mask on hand-computed rows (ramp
// c = (e-i)/(e-d+1), e = min(H, avail): the paper's and LeRobot's rule)
// and its argument errors; the NumPy transcription of the sources is
// compared in node's TestRTCHorizonGolden.
func TestPrefixWeights(t *testing.T) {
	ex := func(c float64) float32 { return float32(c * (math.Exp(c) - 1) / (math.E - 1)) }
	for _, tc := range []struct {
		d, h, avail int
		sched       MaskSchedule
		want        []float32
	}{
		{2, 6, 8, MaskLinear, []float32{1, 1, 0.8, 0.6, 0.4, 0.2, 0, 0}},
		{2, 6, 8, MaskExp, []float32{1, 1, ex(0.8), ex(0.6), ex(0.4), ex(0.2), 0, 0}},
		{2, 6, 8, MaskOnes, []float32{1, 1, 1, 1, 1, 1, 0, 0}},
		{2, 6, 8, MaskZeros, []float32{1, 1, 0, 0, 0, 0, 0, 0}},
		{2, 6, 4, MaskLinear, []float32{1, 1, 2.0 / 3, 1.0 / 3, 0, 0, 0, 0}}, // the ramp ends with the target at row 4
		{9, 3, 8, MaskLinear, []float32{1, 1, 1, 0, 0, 0, 0, 0}},             // delay clamped to the horizon
		{0, 3, 8, MaskLinear, []float32{0.75, 0.5, 0.25, 0, 0, 0, 0, 0}},     // no delay: the ramp starts at row 0
		{0, 0, 8, MaskOnes, make([]float32, 8)},
		{3, 6, 0, MaskOnes, make([]float32, 8)},
		{1, 12, 8, MaskLinear, []float32{1, 7.0 / 8, 6.0 / 8, 5.0 / 8, 4.0 / 8, 3.0 / 8, 2.0 / 8, 1.0 / 8}}, // horizon past the chunk: cut to it
		{6, 12, 4, MaskLinear, []float32{1, 1, 1, 1, 0, 0, 0, 0}},                                           // delay past the target: clamped to it
	} {
		w := slices.Repeat([]float32{-1}, 8)
		if err := PrefixWeights(w, tc.d, tc.h, tc.avail, tc.sched); err != nil {
			t.Fatal(err)
		}
		for i := range w {
			if math.Abs(float64(w[i]-tc.want[i])) > 1e-7 {
				t.Errorf("d %d H %d avail %d %v: w = %v, want %v", tc.d, tc.h, tc.avail, tc.sched, w, tc.want)
				break
			}
		}
	}
	w := make([]float32, 4)
	for _, tc := range []struct {
		d, h, avail int
		sched       MaskSchedule
		want        string
	}{
		{-1, 4, 4, MaskExp, "inference delay -1: want >= 0"},
		{1, -4, 4, MaskExp, "execution horizon -4: want >= 0"},
		{1, 4, -2, MaskExp, "target rows -2: want >= 0"},
		{1, 4, 4, 9, "mask schedule MaskSchedule(9)"},
	} {
		if err := PrefixWeights(w, tc.d, tc.h, tc.avail, tc.sched); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc, err, tc.want)
		}
	}
}

// TestGuidanceWeight checks c = min(beta, (1-tau)/(tau r^2)) at hand-worked
// levels: at sigma 0.5, r^2 = 1/2 and c = 2; at sigma 0.8, tau 0.2,
// r^2 = 0.64/0.68 and c = 0.68/0.16 = 4.25; at the noise end c = beta; at
// the clean end and outside [0, 1] (or NaN) c = 0.
func TestGuidanceWeight(t *testing.T) {
	for _, tc := range []struct{ sigma, beta, want float32 }{
		{0.5, 10, 2}, {0.5, 1, 1}, {0.5, 0, 0},
		{0.8, 10, 4.25}, {0.8, 4, 4},
		{0.2, 100, 4.25}, // the weight is symmetric in sigma and tau
		{1, 7, 7}, {1.5, 7, 7},
		{0, 7, 0}, {-0.5, 7, 0}, {float32(math.NaN()), 7, 0},
	} {
		if got := GuidanceWeight(tc.sigma, tc.beta); math.Abs(float64(got-tc.want)) > 2e-6*float64(max(1, tc.want)) {
			t.Errorf("GuidanceWeight(%v, %v) = %v, want %v", tc.sigma, tc.beta, got, tc.want)
		}
	}
}

func TestParseRTCNames(t *testing.T) {
	for _, m := range []RTCMode{RTCOff, RTCReplace, RTCGuided} {
		if got, err := ParseRTCMode(m.String()); err != nil || got != m {
			t.Errorf("ParseRTCMode(%q) = %v, %v", m.String(), got, err)
		}
	}
	for _, m := range []MaskSchedule{MaskExp, MaskLinear, MaskOnes, MaskZeros} {
		if got, err := ParseMaskSchedule(m.String()); err != nil || got != m {
			t.Errorf("ParseMaskSchedule(%q) = %v, %v", m.String(), got, err)
		}
	}
	if _, err := ParseRTCMode("Guided"); err == nil || !strings.Contains(err.Error(), `rtc mode "Guided": want off, replace or guided`) {
		t.Errorf("ParseRTCMode(Guided): %v", err)
	}
	if _, err := ParseMaskSchedule(""); err == nil || !strings.Contains(err.Error(), "want exp, linear, ones or zeros") {
		t.Errorf("ParseMaskSchedule(empty): %v", err)
	}
}
