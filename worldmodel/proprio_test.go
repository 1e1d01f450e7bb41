package worldmodel

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// proprioGolden is golden/worldmodel/proprio.json (see
// golden/make_worldmodel_golden.py).
type proprioGolden struct {
	Quat         [][4]float64    `json:"quat_xyzw"`
	AxisAngle    [][3]float64    `json:"axis_angle"`
	State        [][]float64     `json:"state"`
	EefPos       [][3]float64    `json:"eef_pos"`
	Gripper      [][2]float64    `json:"gripper_qpos"`
	Stats        json.RawMessage `json:"dataset_stats"`
	Normalised   [][]float64     `json:"normalised"`
	TextDim      int             `json:"text_dim"`
	W            []float64       `json:"W"`
	B            []float64       `json:"b"`
	Token        [][]float64     `json:"token"`
	TextRows     int             `json:"text_rows"`
	TextRealRows int             `json:"text_real_rows"`
	Text         []float64       `json:"text"`
	Context      []float64       `json:"context"`
	ContextMask  []bool          `json:"context_mask"`
}

func loadProprioGolden(t *testing.T, dir string) *proprioGolden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "proprio.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g proprioGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return &g
}

// f32s converts the reference's float32 values (written exactly as
// float64) back to float32, checking that they are float32 values.
func f32s(t *testing.T, v []float64) []float32 {
	t.Helper()
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
		if float64(out[i]) != x {
			t.Fatalf("value %d (%v) is not a float32", i, x)
		}
	}
	return out
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s[%d] = %v (%#08x), the reference's %v (%#08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestProprioMatchesReference checks spec §2 against the independent
// reference, bit for bit: quat2axisangle (float64; identity, a clipped w,
// 180°, a negative w, random), the raw state, the float32 normalisation
// (a degenerate range, values clamped at both ends) and the token.
func TestProprioMatchesReference(t *testing.T) {
	g := loadProprioGolden(t, goldenDir)
	norm, err := ParseStateNormalizer(g.Stats, "default", ProprioDim)
	if err != nil {
		t.Fatal(err)
	}
	for k, q := range g.Quat {
		aa := Quat2AxisAngle(q)
		for i := range aa {
			// Go's math.Acos is not correctly rounded; C's (glibc's,
			// which Python calls) is nearly: for w = -0.91 they differ by one
			// ulp, three after the division by den = 0.41.
			if ulps(aa[i], g.AxisAngle[k][i]) > 4 {
				t.Errorf("case %d: axis-angle[%d] = %v, the reference's %v: more than 4 ulps apart", k, i, aa[i], g.AxisAngle[k][i])
			}
		}
		s := State(g.EefPos[k], q, g.Gripper[k])
		sameBits(t, "state", s[:], f32s(t, g.State[k]))
		p := make([]float32, ProprioDim)
		if err := norm.Normalize(p, s[:]); err != nil {
			t.Fatal(err)
		}
		sameBits(t, "normalised", p, f32s(t, g.Normalised[k]))
		tok := make([]float32, g.TextDim)
		if err := ProprioToken(tok, f32s(t, g.W), f32s(t, g.B), p); err != nil {
			t.Fatal(err)
		}
		sameBits(t, "token", tok, f32s(t, g.Token[k]))
	}
	// The cases the reference was built to reach.
	if p := g.Normalised[1]; p[0] != 5 || p[1] != -5 {
		t.Errorf("case 1 normalises to %v, want clamped at 5 and -5 in dimensions 0 and 1", p)
	}
	if norm.Scale[6] != 1 {
		t.Errorf("dimension 6 (range 5e-5) has scale %v, want 1 (degenerate)", norm.Scale[6])
	}
}

// ulps is the distance of two float64 of the same sign in units in the
// last place (a large number when the signs differ).
func ulps(a, b float64) uint64 {
	if a == b {
		return 0
	}
	if math.Signbit(a) != math.Signbit(b) {
		return math.MaxUint64
	}
	x, y := math.Float64bits(a), math.Float64bits(b)
	return max(x, y) - min(x, y)
}

// TestContextMatchesReference assembles the reference's text rows and
// the first case's token into the context, bit for bit, mask all true.
func TestContextMatchesReference(t *testing.T) {
	g := loadProprioGolden(t, goldenDir)
	text := f32s(t, g.Text)
	if len(text) != g.TextRows*g.TextDim {
		t.Fatalf("text has %d values, want %d × %d", len(text), g.TextRows, g.TextDim)
	}
	ctx := make([]float32, (g.TextRows+1)*g.TextDim)
	if err := AssembleContext(ctx, text, f32s(t, g.Token[0])); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "context", ctx, f32s(t, g.Context))
	mask := make([]bool, g.TextRows+1)
	ContextMask(mask)
	for i, m := range mask {
		if m != g.ContextMask[i] {
			t.Fatalf("mask[%d] = %v, the reference's %v", i, m, g.ContextMask[i])
		}
	}
	if err := AssembleContext(ctx[1:], text, f32s(t, g.Token[0])); err == nil || !strings.Contains(err.Error(), "context buffer of 8255 values: want (128 + 1) × 64 = 8256") {
		t.Errorf("short context buffer: got %v", err)
	}
}

// TestStateNormalizerRefusesBadStats checks each refusal names the problem.
func TestStateNormalizerRefusesBadStats(t *testing.T) {
	const good = `[0,0,0,0,0,0,0,0]`
	const one = `[1,1,1,1,1,1,1,1]`
	stats := func(lo, hi string) string {
		return `{"state": {"default": {"global_min": ` + lo + `, "global_max": ` + hi + `}}}`
	}
	for _, c := range []struct{ name, json, want string }{
		{"duplicate key", `{"state": {"default": {"global_min": ` + good + `, "global_min": ` + good + `, "global_max": ` + one + `}}}`, `the key "global_min" appears twice`},
		{"no state", `{"action": {}}`, `the file has no "state" (it has "action")`},
		{"no key", `{"state": {"other": {}}}`, `"state" has no "default" (it has "other")`},
		{"no max", `{"state": {"default": {"global_min": ` + good + `}}}`, `state key "default" has no "global_max"`},
		{"null", stats(`[0,0,null,0,0,0,0,0]`, one), "global_min[2] is a JSON null: want a finite number"},
		{"string", stats(good, `[1,1,1,"1",1,1,1,1]`), "global_max[3] is a JSON string"},
		{"NaN", stats(`[0,0,0,0,0,NaN,0,0]`, one), "NaN and Infinity"},
		{"overflow", stats(good, `[1,1,1,1,1,1,1,1e39]`), "global_max[7] is 1e39: want a finite number within float32's range"},
		{"short", stats(`[0,0,0]`, one), "global_min has 3 values: want 8"},
		{"not a list", stats(`{}`, one), "global_min is a JSON object: want a list of 8 numbers"},
		{"max below min", stats(good, `[1,1,1,1,-1,1,1,1]`), "global_min[4] = 0, global_max[4] = -1: want min ≤ max"},
		{"infinite range", stats(`[0,0,0,0,0,0,0,-3e38]`, `[1,1,1,1,1,1,1,3e38]`), "finite float32 range"},
		{"not JSON", `{"state": `, "unexpected end of JSON input"},
	} {
		_, err := ParseStateNormalizer([]byte(c.json), "default", ProprioDim)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestNormalizeRefusesBadState: a state of the wrong length or with a
// non-finite value is refused, and nothing is written.
func TestNormalizeRefusesBadState(t *testing.T) {
	n, err := ParseStateNormalizer([]byte(`{"state": {"default": {"global_min": [0,0], "global_max": [1,1]}}}`), "default", 2)
	if err != nil {
		t.Fatal(err)
	}
	dst := []float32{7, 7}
	for _, c := range []struct {
		state []float32
		want  string
	}{
		{[]float32{0.5}, "state of 1 values: want 2"},
		{[]float32{0.5, float32(math.NaN())}, "state value 1 is NaN: want a finite number"},
		{[]float32{float32(math.Inf(-1)), 0}, "state value 0 is -Inf"},
	} {
		if err := n.Normalize(dst, c.state); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error containing %q", c.state, err, c.want)
		}
		if dst[0] != 7 || dst[1] != 7 {
			t.Fatalf("%v: dst written (%v) despite the error", c.state, dst)
		}
	}
	if err := ProprioToken(make([]float32, 4), make([]float32, 7), make([]float32, 4), make([]float32, 2)); err == nil || !strings.Contains(err.Error(), "want W [4, 2] (8 values) and b [4]") {
		t.Errorf("short W: got %v", err)
	}
}

// FuzzParseStateNormalizer: any bytes give a normaliser with finite,
// nonzero scales and finite offsets, or an error; never a panic.
func FuzzParseStateNormalizer(f *testing.F) {
	f.Add([]byte(`{"state": {"default": {"global_min": [0, -1], "global_max": [1, 1]}}}`))
	f.Add([]byte(`{"state": {"default": {"global_min": [0, 1e-5], "global_max": [0, 2e-5]}}}`))
	f.Add([]byte(`{"state": {"default": {"global_min": [NaN, 0], "global_max": [1, null]}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseStateNormalizer(b, "default", 2)
		if err != nil {
			return
		}
		for i := range n.Scale {
			s, o := float64(n.Scale[i]), float64(n.Offset[i])
			if s == 0 || math.IsNaN(s) || math.IsInf(s, 0) || math.IsNaN(o) || math.IsInf(o, 0) {
				t.Fatalf("%q: scale %v, offset %v", b, s, o)
			}
		}
	})
}
