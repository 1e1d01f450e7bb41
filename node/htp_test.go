package node

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/htp"
	"github.com/fastwam/actionexpert/internal/qnnfake"
	"github.com/fastwam/actionexpert/qnnrt"
)

// fakeStep is an expert.Backend that computes what the QNN test double's
// action_step graph returns with the test double's own Go model of it
// (qnnfake.Expected): an implementation independent of qnnrt and htp.
type fakeStep struct {
	g     qnnfake.Graph
	d     expert.Dims
	chunk [][]float32 // keys, values, context, mask as 1/0
}

func (f *fakeStep) Dims() expert.Dims { return f.d }
func (f *fakeStep) Close() error      { return nil }

func (f *fakeStep) BindChunk(_ context.Context, c *expert.Chunk) error {
	mask := make([]float32, len(c.ContextMask))
	for i, m := range c.ContextMask {
		if m {
			mask[i] = 1
		}
	}
	f.chunk = [][]float32{c.VideoKeys, c.VideoValues, c.Context, mask}
	return nil
}

func (f *fakeStep) Step(_ context.Context, latents []float32, tau float32, pred []float32) error {
	out := qnnfake.Expected(f.g, append([][]float32{latents, {tau}}, f.chunk...))
	copy(pred, out[0])
	return nil
}

// TestEndToEndHTPTestDouble runs the node on the HTP backend over the QNN
// test double: the published chunks are what the double's graph gives,
// the performance vote is cast while running, and closing the backend
// after Run down-votes and frees every handle.
func TestEndToEndHTPTestDouble(t *testing.T) {
	lib := qnnfake.New(t, qnnfake.Variant{})
	d := tinyDims()
	g := qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, d)
	path := filepath.Join(t.TempDir(), "action_step.bin")
	bin := qnnfake.Binary{SocModel: 60, Arch: 73, BuildID: "node-test", Graphs: []qnnfake.Graph{g}}
	if err := os.WriteFile(path, bin.Marshal(), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := htp.New(context.Background(), htp.Options{
		ContextPath: path, BackendLib: lib.Path, SystemLib: lib.Path, RPCMemLib: lib.Path,
		PerfMode: qnnrt.PerfBurst, SharedBuffers: true, Dims: &d,
	})
	if err != nil {
		t.Fatal(err)
	}
	votes := len(lib.PowerVotes())
	if votes == 0 {
		t.Error("no performance vote while the backend is open")
	}

	p := testParams()
	p.Backend, p.HTP.ContextBinary, p.CPU.Weights = BackendHTP, path, ""
	p.NoiseSeed = 11
	h := newHarness(t, p, b)
	h.waitState(StateActive)
	base := time.Unix(1_700_000_000, 0)
	for k := range 3 {
		in := makeInputs(d, uint64(k), base.Add(time.Duration(k)*time.Second))
		h.send(in)
		m := h.waitChunk()
		s, _ := expert.NewSchedule(3, 5)
		want, err := expert.Denoise(context.Background(), &fakeStep{g: g, d: d}, in.chunk(t, d), s,
			expert.Noise(11+in.kv.Seq, d.LatentLen()), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := flatten(m)
		if diff := expert.MaxAbsDiff(got, want.Actions); diff > 1e-5 {
			t.Errorf("chunk %d: max |diff| %v against the test double's model", k, diff)
		}
		if m.Backend != "htp" {
			t.Errorf("backend %q", m.Backend)
		}
	}
	h.stop()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if v := lib.PowerVotes(); len(v) <= votes {
		t.Errorf("no down-vote on close: %d votes before, %d after", votes, len(v))
	}
	if n := lib.LiveHandles(); n != 0 {
		t.Errorf("%d QNN handles live after Close", n)
	}
	if n := lib.DoubleFrees(); n != 0 {
		t.Errorf("%d double frees", n)
	}
}
