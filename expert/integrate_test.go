package expert

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"
)

// doubler predicts 2*x, allocating nothing.
type doubler struct{ d Dims }

func (b doubler) Dims() Dims                              { return b.d }
func (b doubler) BindChunk(context.Context, *Chunk) error { return nil }
func (b doubler) Close() error                            { return nil }
func (b doubler) Step(_ context.Context, x []float32, _ float32, pred []float32) error {
	for i := range pred {
		pred[i] = 2 * x[i]
	}
	return nil
}

// TestIntegrateInPlace: Integrate follows the closed form of the Euler
// loop for a linear prediction, writes every step's time, and allocates
// nothing, nor does NoiseInto, which draws Noise's stream.
func TestIntegrateInPlace(t *testing.T) {
	d := tinyDims()
	s, _ := NewSchedule(10, 5)
	x := make([]float32, d.LatentLen())
	pred := make([]float32, len(x))
	times := make([]time.Duration, s.Steps())
	ctx := context.Background()
	var b Backend = doubler{d} // converted once, outside the measured function
	if a := testing.AllocsPerRun(20, func() {
		NoiseInto(9, x)
		if err := Integrate(ctx, b, s, x, pred, times, nil); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("%v allocations per NoiseInto and Integrate", a)
	}
	x0 := Noise(9, len(x))
	f := 1.0
	for k := 0; k < s.Steps(); k++ {
		f *= 1 + 2*float64(s.Delta(k))
	}
	for i := range x {
		if want := float64(x0[i]) * f; math.Abs(float64(x[i])-want) > 1e-5 {
			t.Fatalf("x[%d] = %v, want %v", i, x[i], want)
		}
	}
	for k, st := range times {
		if st <= 0 {
			t.Errorf("step %d time %v", k, st)
		}
	}
	NoiseInto(9, pred)
	for i := range pred {
		if pred[i] != x0[i] {
			t.Fatalf("NoiseInto differs from Noise at %d", i)
		}
	}
	if err := Integrate(ctx, b, s, x, pred[1:], nil, nil); err == nil || !strings.Contains(err.Error(), "must match") {
		t.Errorf("short pred: %v", err)
	}
	if err := Integrate(ctx, b, s, x, pred, times[1:], nil); err == nil || !strings.Contains(err.Error(), "step times") {
		t.Errorf("short step times: %v", err)
	}
}

// TestValidateMask is ValidateChunk's check of the small inputs on its
// own, with the same errors.
func TestValidateMask(t *testing.T) {
	d := tinyDims()
	for _, tc := range []struct {
		mask    []bool
		visible int
		input   string
	}{
		{[]bool{true}, 0, "context_mask"},
		{[]bool{false, false}, 0, "context_mask"},
		{[]bool{false, true}, -1, "visible_video"},
		{[]bool{false, true}, 4, "visible_video"},
		{[]bool{false, true}, 3, ""},
	} {
		err := d.ValidateMask(tc.mask, tc.visible)
		c := tinyChunk(d)
		c.ContextMask, c.VisibleVideo = tc.mask, tc.visible
		cerr := d.ValidateChunk(c)
		if tc.input == "" {
			if err != nil || cerr != nil {
				t.Errorf("%v %d: %v / %v", tc.mask, tc.visible, err, cerr)
			}
			continue
		}
		ie, ok := err.(*InputError)
		if !ok || ie.Input != tc.input || cerr == nil || err.Error() != cerr.Error() {
			t.Errorf("%v %d: %v, ValidateChunk %v", tc.mask, tc.visible, err, cerr)
		}
	}
	if err := NonFiniteInput("context", 7, float32(math.Inf(-1))); err.Error() != "expert: context[7] is -Inf; inputs must be finite" || !err.(*InputError).NonFinite() {
		t.Errorf("NonFiniteInput: %v", err)
	}
}
