package node

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/htp"
	"github.com/fastwam/actionexpert/internal/qnnfake"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
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
	b, path := openFakeHTP(t, lib, d, qnnfake.DataTypeFloat32)
	votes := len(lib.PowerVotes())
	if votes == 0 {
		t.Error("no performance vote while the backend is open")
	}

	p := testParams()
	p.Backend, p.HTP.ContextBinary, p.CPU.Weights = params.BackendHTP, path, ""
	p.NoiseSeed = 11
	h := newHarness(t, p, b)
	h.waitState(StateActive)
	base := time.Unix(1_700_000_000, 0)
	for k := range 3 {
		in := makeInputs(d, uint64(k), base.Add(time.Duration(k)*time.Second))
		h.send(in)
		m := h.waitChunk()
		s, _ := expert.NewSchedule(3, 5)
		want, err := expert.Denoise(context.Background(), &fakeStep{g: qnnfake.ActionStepGraph(qnnfake.DataTypeFloat32, d), d: d}, in.chunk(t, d), s,
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

// TestHTPInputsRejectAsBefore runs the node on the HTP backend, whose
// inputs the worker writes in place (expert.InputBinder), with float32
// and float16 graphs and float32 and float16 tensors on the wire: a
// non-finite key, value or context element and a visibility the graph
// cannot express are rejected with the reason, topic and message of the
// Chunk path, nothing is run for them, and the next good pair gives what
// the test double's graph function gives.
func TestHTPInputsRejectAsBefore(t *testing.T) {
	d := tinyDims()
	for _, tc := range []struct {
		name  string
		graph uint32
		wire  uint8
	}{
		{"f32 graph f32 wire", qnnfake.DataTypeFloat32, msgs.DTypeFloat32},
		{"f32 graph f16 wire", qnnfake.DataTypeFloat32, msgs.DTypeFloat16},
		{"f16 graph f32 wire", qnnfake.DataTypeFloat16, msgs.DTypeFloat32},
		{"f16 graph f16 wire", qnnfake.DataTypeFloat16, msgs.DTypeFloat16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lib := qnnfake.New(t, qnnfake.Variant{})
			g := qnnfake.ActionStepGraph(tc.graph, d)
			path := filepath.Join(t.TempDir(), "action_step.bin")
			bin := qnnfake.Binary{SocModel: 60, Arch: 73, BuildID: "node-test", Graphs: []qnnfake.Graph{g}}
			if err := os.WriteFile(path, bin.Marshal(), 0o644); err != nil {
				t.Fatal(err)
			}
			b, err := htp.New(context.Background(), htp.Options{
				ContextPath: path, BackendLib: lib.Path, SystemLib: lib.Path, RPCMemLib: lib.Path,
				SharedBuffers: true, Dims: &d,
			})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			p := testParams()
			p.Backend, p.HTP.ContextBinary, p.CPU.Weights = params.BackendHTP, path, ""
			base := time.Unix(1_700_000_000, 0)
			wire := func(in inputs) inputs {
				if tc.wire == msgs.DTypeFloat16 {
					in.kv.Keys, in.kv.Values, in.ctx.Context = toF16(t, in.kv.Keys), toF16(t, in.kv.Values), toF16(t, in.ctx.Context)
				}
				return in
			}
			poison := func(tn msgs.Tensor, i int, v float32) msgs.Tensor {
				x := make([]float32, len(tn.Data)/4)
				if err := tn.DecodeF32Into(x); err != nil {
					t.Fatal(err)
				}
				x[i] = v
				return msgs.NewTensorF32(tn.Shape, x)
			}
			executes := lib.Calls("graphExecute")
			for k, bad := range []struct {
				reason Reason
				topic  string
				text   string
				edit   func(*inputs)
			}{
				{RejectNonFinite, p.Topics.KVCache, "expert: video_keys[5] is NaN; inputs must be finite", func(in *inputs) { in.kv.Keys = poison(in.kv.Keys, 5, float32(math.NaN())) }},
				{RejectNonFinite, p.Topics.KVCache, "expert: video_values[" + fmt.Sprint(d.KVLen()-1) + "] is +Inf", func(in *inputs) {
					in.kv.Values = poison(in.kv.Values, d.KVLen()-1, float32(math.Inf(1)))
				}},
				{RejectNonFinite, p.Topics.Context, "expert: context[0] is -Inf", func(in *inputs) { in.ctx.Context = poison(in.ctx.Context, 0, float32(math.Inf(-1))) }},
				{RejectVisibleVideo, p.Topics.KVCache, "expert: chunk attends to 3 of 8 video tokens", func(in *inputs) { in.kv.VisibleVideoTokens = 3 }},
			} {
				h := newHarness(t, p, b)
				h.waitState(StateActive)
				in := makeInputs(d, uint64(k), base.Add(time.Duration(k)*time.Second))
				bad.edit(&in)
				h.send(wire(in))
				waitFor(t, "the rejection", func() bool { return h.node.Stats().Rejected[bad.reason] == 1 })
				h.stop()
				if n := h.log.count("WARN", bad.topic+" rejected ("+string(bad.reason)+")", bad.text); n != 1 {
					t.Errorf("%d warnings naming %q on %s; log:\n%s", n, bad.text, bad.topic, h.log)
				}
			}
			if got := lib.Calls("graphExecute"); got != executes {
				t.Errorf("%d executes for rejected inputs", got-executes)
			}
			h := newHarness(t, p, b)
			defer h.stop()
			h.waitState(StateActive)
			for k := range 2 {
				in := wire(makeInputs(d, uint64(10+k), base.Add(time.Duration(10+k)*time.Second)))
				h.send(in)
				m := h.waitChunk()
				s, _ := expert.NewSchedule(3, 5)
				// fakeStep's model rounds every input to the graph's type.
				want, err := expert.Denoise(context.Background(), &fakeStep{g: g, d: d}, in.chunk(t, d), s,
					expert.Noise(p.NoiseSeed+in.kv.Seq, d.LatentLen()), nil)
				if err != nil {
					t.Fatal(err)
				}
				if diff := expert.MaxAbsDiff(flatten(m), want.Actions); diff > 1e-5 {
					t.Errorf("chunk %d: max |diff| %v against the test double's model", k, diff)
				}
			}
		})
	}
}
