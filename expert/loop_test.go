package expert

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
)

// TestScheduleReferenceValues checks the shift-5 schedules against the
// values of spec §8.
func TestScheduleReferenceValues(t *testing.T) {
	for _, tc := range []struct {
		steps     int
		timesteps []float64
		deltas    []float64
	}{
		{10,
			[]float64{1000, 978.261, 952.381, 921.053, 882.353, 833.333, 769.231, 681.818, 555.556, 357.143},
			[]float64{-0.0217391, -0.0258799, -0.0313284, -0.0386997, -0.0490196, -0.0641025, -0.0874126, -0.126263, -0.198413, -0.357143}},
		{20,
			[]float64{1000, 989.583, 978.261, 965.909, 952.381, 937.5, 921.053, 902.778, 882.353, 859.375, 833.333,
				803.571, 769.231, 729.167, 681.818, 625, 555.556, 468.75, 357.143, 208.333}, nil},
	} {
		s, err := NewSchedule(tc.steps, DefaultShift)
		if err != nil {
			t.Fatal(err)
		}
		if s.Steps() != tc.steps || s.Sigmas[0] != 1 || s.Sigmas[tc.steps] != 0 {
			t.Fatalf("N=%d: steps %d, sigma ends %v..%v, want 1..0 exactly", tc.steps, s.Steps(), s.Sigmas[0], s.Sigmas[tc.steps])
		}
		for k, want := range tc.timesteps {
			if got := float64(s.Timestep(k)); math.Abs(got-want) > 5e-4 {
				t.Errorf("N=%d: timestep[%d] = %v, spec %v", tc.steps, k, got, want)
			}
		}
		var sum float64
		for k := 0; k < s.Steps(); k++ {
			sum += float64(s.Delta(k))
			if k < len(tc.deltas) && math.Abs(float64(s.Delta(k))-tc.deltas[k]) > 5e-7 {
				t.Errorf("N=%d: delta[%d] = %v, spec %v", tc.steps, k, s.Delta(k), tc.deltas[k])
			}
		}
		if math.Abs(sum+1) > 1e-6 {
			t.Errorf("N=%d: deltas sum to %v, want -1", tc.steps, sum)
		}
	}
}

func TestScheduleRejects(t *testing.T) {
	for _, tc := range []struct {
		steps int
		shift float32
	}{{0, 5}, {-1, 5}, {1001, 5}, {10, 0}, {10, -1}, {10, float32(math.NaN())}, {10, float32(math.Inf(1))}} {
		if _, err := NewSchedule(tc.steps, tc.shift); err == nil {
			t.Errorf("NewSchedule(%d, %v) accepted", tc.steps, tc.shift)
		}
	}
}

func TestNoiseReproducible(t *testing.T) {
	a, b, c := Noise(42, 224), Noise(42, 224), Noise(43, 224)
	var mean, sq float64
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed differs at %d", i)
		}
		mean += float64(a[i])
		sq += float64(a[i]) * float64(a[i])
	}
	if Cosine(a, c) > 0.5 {
		t.Error("different seeds give correlated noise")
	}
	big := Noise(7, 100001)
	mean, sq = 0, 0
	for _, v := range big {
		mean += float64(v)
		sq += float64(v) * float64(v)
	}
	mean /= float64(len(big))
	sd := math.Sqrt(sq/float64(len(big)) - mean*mean)
	if math.Abs(mean) > 0.02 || math.Abs(sd-1) > 0.02 {
		t.Errorf("noise mean %.4f sd %.4f, want about 0 and 1", mean, sd)
	}
	// A chunk's noise must not depend on how much is drawn: a shorter draw
	// is a prefix of a longer one.
	if got := Noise(42, 3); got[0] != a[0] || got[1] != a[1] || got[2] != a[2] {
		t.Errorf("Noise(42, 3) = %v is not a prefix of Noise(42, 224)", got)
	}
}

// affine is a test backend whose prediction is a fixed linear function of
// the latents, so the Euler loop has a closed form.
type affine struct {
	d      Dims
	binds  int
	taus   []float32
	fail   int // step index that fails, -1 never
	nanAt  int // step index that returns NaN, -1 never
	closed bool
}

func (a *affine) Dims() Dims { return a.d }
func (a *affine) BindChunk(ctx context.Context, c *Chunk) error {
	a.binds++
	return a.d.ValidateChunk(c)
}
func (a *affine) Step(ctx context.Context, x []float32, tau float32, pred []float32) error {
	k := len(a.taus)
	a.taus = append(a.taus, tau)
	if k == a.fail {
		return errors.New("injected failure")
	}
	for i := range pred {
		pred[i] = 2 * x[i]
	}
	if k == a.nanAt {
		pred[3] = float32(math.NaN())
	}
	return nil
}
func (a *affine) Close() error { a.closed = true; return nil }

func tinyDims() Dims {
	return Dims{Layers: 2, Heads: 2, HeadDim: 4, VideoTokens: 3, ContextTokens: 2, TextDim: 5, ActionTokens: 4, ActionDim: 2}
}

func tinyChunk(d Dims) *Chunk {
	return &Chunk{VideoKeys: make([]float32, d.KVLen()), VideoValues: make([]float32, d.KVLen()),
		Context: make([]float32, d.ContextLen()), ContextMask: []bool{true, false}}
}

func TestDenoiseEuler(t *testing.T) {
	d := tinyDims()
	b := &affine{d: d, fail: -1, nanAt: -1}
	s, _ := NewSchedule(10, 5)
	x0 := Noise(1, d.LatentLen())
	orig := append([]float32(nil), x0...)
	var seen int
	res, err := Denoise(context.Background(), b, tinyChunk(d), s, x0, func(StepInfo) { seen++ })
	if err != nil {
		t.Fatal(err)
	}
	if b.binds != 1 || seen != 10 || len(res.StepTimes) != 10 {
		t.Fatalf("binds %d, observed steps %d, step times %d", b.binds, seen, len(res.StepTimes))
	}
	for k, tau := range b.taus {
		if tau != s.Timestep(k) {
			t.Errorf("step %d fed timestep %v, want %v", k, tau, s.Timestep(k))
		}
	}
	// x_{k+1} = x_k (1 + 2 delta_k)
	f := 1.0
	for k := 0; k < s.Steps(); k++ {
		f *= 1 + 2*float64(s.Delta(k))
	}
	for i := range res.Actions {
		if want := float64(orig[i]) * f; math.Abs(float64(res.Actions[i])-want) > 1e-5 {
			t.Fatalf("actions[%d] = %v, want %v", i, res.Actions[i], want)
		}
		if x0[i] != orig[i] {
			t.Fatal("Denoise modified the initial noise")
		}
	}
}

func TestDenoiseErrors(t *testing.T) {
	d := tinyDims()
	s, _ := NewSchedule(4, 5)
	ctx := context.Background()
	x0 := Noise(1, d.LatentLen())

	if _, err := Denoise(ctx, &affine{d: d, fail: 2, nanAt: -1}, tinyChunk(d), s, x0, nil); err == nil || !strings.Contains(err.Error(), "step 2") {
		t.Errorf("failing step: %v", err)
	}
	if _, err := Denoise(ctx, &affine{d: d, fail: -1, nanAt: 1}, tinyChunk(d), s, x0, nil); err == nil || !strings.Contains(err.Error(), "NaN") {
		t.Errorf("NaN prediction: %v", err)
	}
	if _, err := Denoise(ctx, &affine{d: d, fail: -1, nanAt: -1}, tinyChunk(d), s, x0[1:], nil); err == nil || !strings.Contains(err.Error(), "initial noise") {
		t.Errorf("short noise: %v", err)
	}
	bad := tinyChunk(d)
	bad.Context[3] = float32(math.Inf(-1))
	if _, err := Denoise(ctx, &affine{d: d, fail: -1, nanAt: -1}, bad, s, x0, nil); err == nil || !strings.Contains(err.Error(), "context[3]") {
		t.Errorf("Inf context: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Denoise(cctx, &affine{d: d, fail: -1, nanAt: -1}, tinyChunk(d), s, x0, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
}

func TestValidateChunk(t *testing.T) {
	d := tinyDims()
	for name, mutate := range map[string]func(c *Chunk){
		"video_keys":    func(c *Chunk) { c.VideoKeys = c.VideoKeys[1:] },
		"video_values":  func(c *Chunk) { c.VideoValues = append(c.VideoValues, 0) },
		"context has":   func(c *Chunk) { c.Context = nil },
		"context_mask":  func(c *Chunk) { c.ContextMask = []bool{true} },
		"every context": func(c *Chunk) { c.ContextMask = []bool{false, false} },
		"visible":       func(c *Chunk) { c.VisibleVideo = 4 },
		"NaN":           func(c *Chunk) { c.VideoValues[5] = float32(math.NaN()) },
	} {
		c := tinyChunk(d)
		mutate(c)
		err := d.ValidateChunk(c)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v", name, err)
		}
		var ie *InputError
		if !errors.As(err, &ie) || ie.NonFinite() != (name == "NaN") {
			t.Errorf("%s: %v is not an *InputError of the right kind", name, err)
		}
	}
	if err := d.ValidateChunk(tinyChunk(d)); err != nil {
		t.Errorf("valid chunk rejected: %v", err)
	}
	if err := d.ValidateChunk(nil); err == nil {
		t.Error("nil chunk accepted")
	}
}

// TestFirstNonFinite puts each special value at every position of slices of
// odd and even length, among finite edge cases that must not trip the
// two-at-a-time scan.
func TestFirstNonFinite(t *testing.T) {
	finite := []float32{0, float32(math.Copysign(0, -1)), math.MaxFloat32, -math.MaxFloat32,
		math.SmallestNonzeroFloat32, 1, -2.5, 1e-40, 3.4e38}
	for n := 0; n <= 17; n++ {
		x := make([]float32, n)
		for i := range x {
			x[i] = finite[i%len(finite)]
		}
		if got := FirstNonFinite(x); got != -1 {
			t.Fatalf("len %d all finite: got %d", n, got)
		}
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
			math.Float32frombits(0x7fc00001), math.Float32frombits(0xff800001)} {
			for at := 0; at < n; at++ {
				y := append([]float32(nil), x...)
				y[at] = bad
				if got := FirstNonFinite(y); got != at {
					t.Fatalf("len %d, %v at %d: got %d", n, bad, at, got)
				}
				if at+1 < n {
					y[n-1] = bad // a later one must not hide the first
					if got := FirstNonFinite(y); got != at {
						t.Fatalf("len %d, %v at %d and %d: got %d", n, bad, at, n-1, got)
					}
				}
			}
		}
	}
}

// BenchmarkFirstNonFiniteKV scans a full-size video key and value cache
// (2 × 30×98×3072 float32), against a plain copy of the same bytes.
func BenchmarkFirstNonFiniteKV(b *testing.B) {
	x := make([]float32, 2*FullDims().KVLen())
	b.SetBytes(int64(4 * len(x)))
	b.Run("scan", func(b *testing.B) {
		for b.Loop() {
			if FirstNonFinite(x) >= 0 {
				b.Fatal("finite input reported")
			}
		}
	})
	b.Run("copy-baseline", func(b *testing.B) {
		y := make([]float32, len(x))
		for b.Loop() {
			copy(y, x)
		}
	})
}
