package replay_test

import (
	"context"
	"testing"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/expert/cpu"
	"github.com/fastwam/actionexpert/golden"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/replay"
)

// tinyCases loads the embedded tiny goldens, the regression bag's inputs.
func tinyCases(t *testing.T) []*golden.Case {
	t.Helper()
	var cases []*golden.Case
	for _, name := range golden.TinyCases() {
		c, err := golden.LoadTiny(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		cases = append(cases, c)
	}
	return cases
}

// tinyBackend is the CPU reference with the embedded tiny weights, sized
// like the tiny goldens.
func tinyBackend(t *testing.T) *cpu.Backend {
	t.Helper()
	w, err := cpu.TinyWeights()
	if err != nil {
		t.Fatal(err)
	}
	c := tinyCases(t)[0]
	if w, err = w.ForInputs(c.VideoTokens, c.ContextTokens); err != nil {
		t.Fatal(err)
	}
	be, err := cpu.New(w, cpu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { be.Close() })
	return be
}

// cpuParams are the node's parameters of a CPU replay at the root namespace.
func cpuParams(t *testing.T) params.Params {
	t.Helper()
	p := replay.BaseParams(params.BackendCPU)
	p.CPU.Weights = "injected by the test"
	if err := replay.ResolveTopics(&p, "/"); err != nil {
		t.Fatal(err)
	}
	return p
}

// regressionBag copies the embedded regression bag to a temporary folder.
func regressionBag(t *testing.T) string {
	t.Helper()
	dir, err := golden.ExtractRegressionBag(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// scan reads a bag for the default topics.
func scan(t *testing.T, path string) *replay.Recording {
	t.Helper()
	rec, err := replay.Scan(context.Background(), path, cpuParams(t).Topics)
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return rec
}

// run replays path on b with the recorded schedule; opts may adjust the
// options.
func run(t *testing.T, ctx context.Context, path string, b expert.Backend, opts ...func(*replay.Options)) (*replay.Report, error) {
	t.Helper()
	rec := scan(t, path)
	p := cpuParams(t)
	rec.ApplySchedule(&p)
	o := replay.Options{Params: p, Backend: b, BackendInfo: "cpu (test)"}
	for _, f := range opts {
		f(&o)
	}
	return replay.Run(ctx, rec, o)
}

// rewriteBag copies the bag src to the new folder dst with bag.Writer,
// passing every message through edit, which may change its data or drop
// it (false).
func rewriteBag(t *testing.T, src, dst string, edit func(m *bag.Message) bool) {
	t.Helper()
	r, err := bag.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	w, err := bag.Create(dst, bag.WriterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range r.Topics() {
		q := bag.DefaultQoS()
		if len(tp.OfferedQoSProfiles) > 0 {
			q = tp.OfferedQoSProfiles[0]
		}
		if err := w.AddTopic(tp.Name, tp.Type, q); err != nil {
			t.Fatal(err)
		}
	}
	for m, err := range r.Messages(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		if !edit(&m) {
			continue
		}
		if err := w.Write(m.Topic, m.LogTime, m.Data); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// tamperAction returns an edit that adds delta to one action value of the
// recorded chunk with kv_seq kvSeq.
func tamperAction(t *testing.T, kvSeq uint64, delta float32) func(m *bag.Message) bool {
	return func(m *bag.Message) bool {
		if m.Type != msgs.TypeActionChunk {
			return true
		}
		var c msgs.ActionChunk
		if err := c.UnmarshalCDR(m.Data); err != nil {
			t.Fatal(err)
		}
		if c.KVSeq != kvSeq {
			return true
		}
		c.Actions[3].Values[2] += delta
		data, err := c.MarshalCDR()
		if err != nil {
			t.Fatal(err)
		}
		m.Data = data
		return true
	}
}

// readChunks returns the ActionChunks of a bag's topic with their log
// times.
func readChunks(t *testing.T, path, topic string) []replay.Recorded {
	t.Helper()
	r, err := bag.OpenWith(t.Context(), path, bag.ReaderOptions{Topics: []string{topic}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []replay.Recorded
	for m, err := range r.Messages(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		var c msgs.ActionChunk
		if err := c.UnmarshalCDR(m.Data); err != nil {
			t.Fatal(err)
		}
		out = append(out, replay.Recorded{LogTime: m.LogTime, Chunk: c})
	}
	return out
}
