package htp

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/internal/qnnfake"
)

// writeViews fills the views from c as a caller of Inputs does: float32
// as is, float16 rounded (the test double's graph function sees the same
// rounding either way, as BindChunk's conversion rounds to nearest even
// too, so only values exact in float16 are used).
func writeViews(t *testing.T, v expert.InputViews, c *expert.Chunk) {
	t.Helper()
	for _, p := range []struct {
		dst expert.TensorView
		src []float32
	}{{v.VideoKeys, c.VideoKeys}, {v.VideoValues, c.VideoValues}, {v.Context, c.Context}} {
		if p.dst.Len() != len(p.src) {
			t.Fatalf("view has %d elements, want %d", p.dst.Len(), len(p.src))
		}
		if p.dst.F32 != nil {
			copy(p.dst.F32, p.src)
			continue
		}
		for i, x := range p.src {
			p.dst.F16[i] = halfOf(t, x)
		}
	}
}

// halfOf is x as binary16, for values exact in it (checked).
func halfOf(t *testing.T, x float32) uint16 {
	b := math.Float32bits(x)
	if x == 0 {
		return uint16(b >> 16)
	}
	e := int(b>>23&0xff) - 127 + 15
	if e <= 0 || e >= 31 || b&0x1fff != 0 {
		t.Fatalf("%v is not a normal binary16 value", x)
	}
	return uint16(b>>16)&0x8000 | uint16(e)<<10 | uint16(b>>13&0x3ff)
}

// halfChunk is randomChunk with every value rounded to 8 significant bits,
// exact in float16.
func halfChunk(d expert.Dims, seed uint64) *expert.Chunk {
	c := randomChunk(d, seed)
	for _, x := range [][]float32{c.VideoKeys, c.VideoValues, c.Context} {
		for i, v := range x {
			x[i] = float32(math.Round(float64(v)*256) / 256)
		}
	}
	return c
}

// TestInputsBindInPlace writes a chunk through the views of Inputs, for
// graphs whose inputs are float32 and float16 (in place, shared and RAW)
// and bfloat16 (staged), and checks every step against the test double's
// graph function of that chunk, and the bytes the inputs were written with.
func TestInputsBindInPlace(t *testing.T) {
	d := smallDims()
	for _, tc := range []struct {
		name   string
		dt     uint32
		shared bool
		staged bool
	}{
		{"f32 shared", qnnfake.DataTypeFloat32, true, false},
		{"f32 raw", qnnfake.DataTypeFloat32, false, false},
		{"f16 shared", qnnfake.DataTypeFloat16, true, false},
		{"bf16 staged", qnnfake.DataTypeBF16, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fk := qnnfake.New(t, qnnfake.Variant{})
			g := qnnfake.ActionStepGraph(tc.dt, d)
			o := options(fk, writeBinary(t, g))
			o.SharedBuffers, o.Dims = tc.shared, &d
			b := newBackend(t, o)
			lat := expert.Noise(5, d.LatentLen())
			pred := make([]float32, len(lat))
			for round, seed := range []uint64{7, 8} {
				c := halfChunk(d, seed)
				v, err := b.Inputs()
				if err != nil {
					t.Fatal(err)
				}
				if staged := v.VideoKeys.F32 != nil && tc.dt != qnnfake.DataTypeFloat32; staged != tc.staged {
					t.Fatalf("staged %v, want %v", staged, tc.staged)
				}
				if (v.VideoKeys.F16 != nil) != (tc.dt == qnnfake.DataTypeFloat16) {
					t.Fatal("a float16 graph input is not exposed as float16")
				}
				if err := b.Step(t.Context(), lat, 500, pred); err == nil || !strings.Contains(err.Error(), "no chunk is bound") {
					t.Fatalf("round %d: step while the views are open: %v", round, err)
				}
				writeViews(t, v, c)
				written := b.Stats().BytesWritten
				if err := b.BindInputs(t.Context(), c.ContextMask, 0); err != nil {
					t.Fatal(err)
				}
				written = b.Stats().BytesWritten - written
				if err := b.Step(t.Context(), lat, 500, pred); err != nil {
					t.Fatal(err)
				}
				if want := qnnfake.Expected(g, graphInputs(g, c, lat, 500))[0]; !slices.Equal(pred, want) {
					t.Fatalf("round %d: pred %v, want %v", round, pred[:3], want[:3])
				}
				el := 2*d.KVLen() + d.ContextLen() + d.ContextTokens
				size := 4
				if tc.dt != qnnfake.DataTypeFloat32 {
					size = 2
				}
				if got := written; got != uint64(size*el) {
					t.Errorf("round %d: %d bytes counted as written, want %d", round, got, size*el)
				}
			}
			if err := b.BindInputs(t.Context(), randomChunk(d, 1).ContextMask, 0); err == nil || !strings.Contains(err.Error(), "without Inputs") {
				t.Errorf("second BindInputs: %v", err)
			}
		})
	}
}

// TestBindInputsRejects: the mask and the visibility are checked as
// BindChunk checks them, as input errors, and a rejected bind leaves no
// chunk bound; after a Reload the views must be taken again and nothing
// is bound.
func TestBindInputsRejects(t *testing.T) {
	d := smallDims()
	fk := qnnfake.New(t, qnnfake.Variant{})
	o := options(fk, writeBinary(t, qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, d)))
	o.SharedBuffers, o.Dims = true, &d
	b := newBackend(t, o)
	c := randomChunk(d, 2)
	lat := expert.Noise(5, d.LatentLen())
	pred := make([]float32, len(lat))
	for _, tc := range []struct {
		name    string
		mask    []bool
		visible int
		input   string
		text    string
	}{
		{"short mask", c.ContextMask[1:], 0, "context_mask", "elements, want"},
		{"all masked", make([]bool, d.ContextTokens), 0, "context_mask", "masks every context token"},
		{"visible beyond", c.ContextMask, d.VideoTokens + 1, "visible_video", "out of range"},
		{"partial visibility", c.ContextMask, 2, "visible_video", "no visibility input"},
	} {
		v, err := b.Inputs()
		if err != nil {
			t.Fatal(err)
		}
		writeViews(t, v, c)
		err = b.BindInputs(t.Context(), tc.mask, tc.visible)
		var bad *expert.InputError
		if !errors.As(err, &bad) || bad.Input != tc.input || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err := b.Step(t.Context(), lat, 500, pred); err == nil {
			t.Errorf("%s: step after a rejected bind succeeded", tc.name)
		}
	}
	v, err := b.Inputs()
	if err != nil {
		t.Fatal(err)
	}
	writeViews(t, v, c)
	if err := b.BindInputs(t.Context(), c.ContextMask, d.VideoTokens); err != nil {
		t.Fatal(err)
	}
	if err := b.Reload(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := b.Step(t.Context(), lat, 500, pred); err == nil || !strings.Contains(err.Error(), "no chunk is bound") {
		t.Errorf("step after Reload of a view-bound chunk: %v", err)
	}
	if err := b.BindInputs(t.Context(), c.ContextMask, 0); err == nil {
		t.Error("BindInputs after Reload without new views succeeded")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Inputs(); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Inputs after Close: %v", err)
	}
	checkClean(t, fk)
}
