package wmnode

import (
	"context"
	"fmt"
	"math"
	"os"
	"time"
	"unicode/utf8"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/worldmodel"
)

// The self-test at configure runs the world model on the observation of a
// golden .npz and compares its K, V and context with the golden's. The
// golden is written by an independent reference (wmnode/testdata/
// make_selftest_golden.py: the repository's Python references of the
// world model, composed), never by this code. Its arrays: cam0 [, cam1]
// u8 [h, w, 3] (the cameras in the model's order), state f32 [P],
// instruction u8 (UTF-8), context f32 [rows, T], keys and values f32
// [layers, 1, tokens, width].

// Bounds of a self-test golden, checked before it is trusted.
const (
	maxSelfTestFile        = 64 << 20
	maxSelfTestInstruction = 4096
	maxSelfTestState       = 1 << 10
)

// DefaultSelfTestMinCosine is the cosine each of K, V and the context
// must reach (self_test.min_cosine): the action expert's default.
const DefaultSelfTestMinCosine = 0.9999

// SelfTestCase is a loaded self-test golden.
type SelfTestCase struct {
	Obs                   worldmodel.Observation
	Keys, Values, Context golden.Array
}

// LoadSelfTest reads a self-test golden. The file is hostile: its size is
// bounded, the arrays are read by golden.ParseArrays (bounded, finite), the
// images must be u8 values of at most worldmodel.MaxImageSide a side and
// the instruction UTF-8. Loading stops when ctx is cancelled.
func LoadSelfTest(ctx context.Context, path string) (*SelfTestCase, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("self_test.golden: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxSelfTestFile {
		return nil, fmt.Errorf("self_test.golden %s: %d bytes, not a regular file of at most %d", path, fi.Size(), maxSelfTestFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("self_test.golden: %w", err)
	}
	a, err := golden.ParseArrays(ctx, path, b, "cam0", "state", "instruction", "context", "keys", "values")
	if err != nil {
		return nil, fmt.Errorf("self_test.golden: %w", err)
	}
	c := &SelfTestCase{Keys: a["keys"], Values: a["values"], Context: a["context"]}
	img, err := selfTestImage(path, "cam0", a["cam0"])
	if err != nil {
		return nil, err
	}
	c.Obs.Images = []worldmodel.Image{img}
	if cam1, err := golden.ParseArrays(ctx, path, b, "cam1"); err == nil {
		img, err := selfTestImage(path, "cam1", cam1["cam1"])
		if err != nil {
			return nil, err
		}
		c.Obs.Images = append(c.Obs.Images, img)
	}
	st := a["state"]
	if len(st.Shape) != 1 || st.Shape[0] < 1 || st.Shape[0] > maxSelfTestState {
		return nil, fmt.Errorf("self_test.golden %s: state of shape %v: want [P], P in 1..%d", path, st.Shape, maxSelfTestState)
	}
	c.Obs.State = st.Data
	in := a["instruction"]
	if len(in.Shape) != 1 || in.Shape[0] < 1 || in.Shape[0] > maxSelfTestInstruction {
		return nil, fmt.Errorf("self_test.golden %s: instruction of shape %v: want 1..%d UTF-8 bytes", path, in.Shape, maxSelfTestInstruction)
	}
	text := make([]byte, len(in.Data))
	for i, v := range in.Data {
		if v != float32(math.Trunc(float64(v))) || v < 0 || v > 255 {
			return nil, fmt.Errorf("self_test.golden %s: instruction byte %d is %v: want 0..255", path, i, v)
		}
		text[i] = byte(v)
	}
	if !utf8.Valid(text) {
		return nil, fmt.Errorf("self_test.golden %s: instruction is not UTF-8", path)
	}
	c.Obs.Instruction = string(text)
	return c, nil
}

func selfTestImage(path, name string, a golden.Array) (worldmodel.Image, error) {
	s := a.Shape
	if len(s) != 3 || s[2] != 3 || s[0] < 1 || s[1] < 1 || s[0] > worldmodel.MaxImageSide || s[1] > worldmodel.MaxImageSide {
		return worldmodel.Image{}, fmt.Errorf("self_test.golden %s: %s of shape %v: want [h, w, 3], sides in 1..%d", path, name, s, worldmodel.MaxImageSide)
	}
	pix := make([]byte, len(a.Data))
	for i, v := range a.Data {
		if v != float32(math.Trunc(float64(v))) || v < 0 || v > 255 {
			return worldmodel.Image{}, fmt.Errorf("self_test.golden %s: %s value %d is %v: want u8", path, name, i, v)
		}
		pix[i] = byte(v)
	}
	return worldmodel.Image{Width: s[1], Height: s[0], Pix: pix}, nil
}

// RunSelfTest runs m on c's observation and compares K, V and the context
// with c's by cosine similarity; below minCosine for any of them, a
// shape that does not fit m, or any error, it fails. Cosine and
// MaxAbsDiff are the worst of the three.
func RunSelfTest(ctx context.Context, m Model, c *SelfTestCase, minCosine float64) node.SelfTestResult {
	start := time.Now()
	fail := func(err error) node.SelfTestResult {
		return node.SelfTestResult{Status: "failed", Err: err, Elapsed: time.Since(start)}
	}
	d := m.Dims()
	kv := []int{d.Layers, 1, d.VideoTokens, d.Width}
	for _, x := range []struct {
		name string
		a    golden.Array
		want []int
	}{{"keys", c.Keys, kv}, {"values", c.Values, kv}, {"context", c.Context, []int{d.ContextRows, d.TextDim}}} {
		if fmt.Sprint(x.a.Shape) != fmt.Sprint(x.want) {
			return fail(fmt.Errorf("golden %s of shape %v: the world model's is %v (a golden of another model)", x.name, x.a.Shape, x.want))
		}
	}
	n := d.Layers * d.VideoTokens * d.Width
	out := &worldmodel.Output{
		Keys: expert.TensorView{F32: make([]float32, n)}, Values: expert.TensorView{F32: make([]float32, n)},
		Context: make([]float32, d.ContextRows*d.TextDim), Mask: make([]bool, d.ContextRows),
	}
	if err := m.Run(ctx, c.Obs, out); err != nil {
		return fail(fmt.Errorf("world model on the golden observation: %w", err))
	}
	res := node.SelfTestResult{Status: "passed", Cosine: 1}
	for _, x := range []struct {
		name      string
		got, want []float32
	}{{"keys", out.Keys.F32, c.Keys.Data}, {"values", out.Values.F32, c.Values.Data}, {"context", out.Context, c.Context.Data}} {
		if i := expert.FirstNonFinite(x.got); i >= 0 {
			return fail(fmt.Errorf("%s[%d] is %v", x.name, i, x.got[i]))
		}
		cos, diff := expert.Cosine(x.got, x.want), expert.MaxAbsDiff(x.got, x.want)
		res.Cosine, res.MaxAbsDiff = min(res.Cosine, cos), max(res.MaxAbsDiff, diff)
		if !(cos >= minCosine) {
			res.Status = "failed"
			res.Err = fmt.Errorf("%s: cosine %.7f to the golden is below %.7f (max |diff| %.3g)", x.name, cos, minCosine, diff)
			break
		}
	}
	res.Elapsed = time.Since(start)
	return res
}
