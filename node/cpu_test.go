package node

import (
	"context"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/msgs"
)

// tinyCPU is the CPU reference backend on the tiny golden weights, sized
// for the inputs of case c.
func tinyCPU(t *testing.T, c *golden.Case) *cpu.Backend {
	t.Helper()
	w, err := cpu.TinyWeights()
	if err != nil {
		t.Fatal(err)
	}
	if w, err = w.ForInputs(c.VideoTokens, c.ContextTokens); err != nil {
		t.Fatal(err)
	}
	be, err := cpu.New(w, cpu.Options{BLAS: "gonum"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// caseInputs turns a golden case's chunk into the two messages.
func caseInputs(c *golden.Case, seq uint64, stamp time.Time) inputs {
	h := msgs.Header{Stamp: toMsgTime(stamp), FrameID: "cameras"}
	kv := []uint32{uint32(c.Layers), 1, uint32(c.VideoTokens), uint32(c.AttnWidth)}
	visible := c.Chunk.VisibleVideo
	return inputs{
		kv: msgs.VideoKVCache{Header: h, Seq: seq, VisibleVideoTokens: uint32(visible),
			Keys: msgs.NewTensorF32(kv, c.Chunk.VideoKeys), Values: msgs.NewTensorF32(kv, c.Chunk.VideoValues)},
		ctx: msgs.TextContext{Header: h, Seq: seq,
			Context:       msgs.NewTensorF32([]uint32{1, uint32(c.ContextTokens), uint32(c.TextDim)}, c.Chunk.Context),
			AttentionMask: c.Chunk.ContextMask},
	}
}

// TestEndToEndCPUBackend runs the node on the CPU reference backend: the
// self-test against the independent PyTorch golden passes, and the chunks
// published for both tiny cases are the ones the loop gives on the same
// inputs and seeds.
func TestEndToEndCPUBackend(t *testing.T) {
	for _, name := range golden.TinyCases() {
		t.Run(name, func(t *testing.T) {
			c, err := golden.LoadTiny(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			p := testParams()
			p.Steps, p.NoiseSeed = 10, 7
			h := newHarness(t, p, tinyCPU(t, c), withGolden(c))
			h.waitState(StateActive)
			st := h.node.SelfTest()
			if st.Status != "passed" || st.Cosine < 0.9999 {
				t.Fatalf("self-test against the PyTorch golden: %s", st)
			}
			t.Logf("self-test %s", st)

			in := caseInputs(c, 5, time.Now())
			h.send(in)
			m := h.waitChunk()
			sched, err := expert.NewSchedule(10, 5)
			if err != nil {
				t.Fatal(err)
			}
			want, err := expert.Denoise(context.Background(), tinyCPU(t, c), &c.Chunk, sched, expert.Noise(7+5, len(c.Latents)), nil) // base + kv seq
			if err != nil {
				t.Fatal(err)
			}
			got := flatten(m)
			if cos := expert.Cosine(got, want.Actions); !(cos >= 1-1e-6) || !(expert.MaxAbsDiff(got, want.Actions) <= 1e-5) {
				t.Errorf("published actions against the loop: cosine %v, max |diff| %v", cos, expert.MaxAbsDiff(got, want.Actions))
			}
			if m.NoiseSeed != 7+5 || m.Steps != 10 || m.KVSeq != 5 || m.DenoiseMs <= 0 {
				t.Errorf("noise_seed %d steps %d kv_seq %d denoise_ms %v", m.NoiseSeed, m.Steps, m.KVSeq, m.DenoiseMs)
			}
		})
	}
}
