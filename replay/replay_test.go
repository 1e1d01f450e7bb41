package replay_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/replay"
)

const regressionChunks = 8

// TestReplayRegressionBagPasses replays the committed bag on the CPU
// reference: every recorded chunk is produced again and matches.
func TestReplayRegressionBagPasses(t *testing.T) {
	rep, err := run(t, context.Background(), regressionBag(t), tinyBackend(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatalf("gate: %v", err)
	}
	if len(rep.Rows) != regressionChunks || rep.Compared() != regressionChunks || rep.Inputs != regressionChunks {
		t.Fatalf("%d rows, %d compared, %d inputs; want %d of each", len(rep.Rows), rep.Compared(), rep.Inputs, regressionChunks)
	}
	for i, r := range rep.Rows {
		if r.Status != replay.StatusOK || r.KVSeq != uint64(i) || r.Cosine < 1-1e-9 || r.MaxAbsErr > 1e-5 {
			t.Errorf("row %d: %s (%s), kv_seq %d, cosine %v, max|err| %v", i, r.Status, r.Note, r.KVSeq, r.Cosine, r.MaxAbsErr)
		}
		if r.Produced.NoiseSeed != r.KVSeq || r.Produced.Steps != 10 {
			t.Errorf("row %d: noise seed %d steps %d, want %d 10", i, r.Produced.NoiseSeed, r.Produced.Steps, r.KVSeq)
		}
		if r.Produced.InputAgeMs <= 0 || r.Produced.InputAgeMs > 10_000 {
			t.Errorf("row %d: input age %v ms: the node's clock is not the bag's", i, r.Produced.InputAgeMs)
		}
		// The committed chunks carry the timing contract and are untied.
		if c := r.Recorded.Chunk; c.Dt != 0.05 || c.RTCMode != "off" || c.InferenceDelay < 1 || c.InferenceDelay > 32 {
			t.Errorf("row %d: recorded dt %v, rtc_mode %q, inference_delay %d; want 0.05, off, 1..32 (logged 20 ms after the stamp)",
				i, c.Dt, c.RTCMode, c.InferenceDelay)
		}
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1700000000.700000000", "kv_seq", "denoise ms", "PASS: 8 chunks compared"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	t.Log("\n" + table.String())

	// The chunks differ from each other: the bag exercises more than one
	// input.
	a, b := rep.Rows[0].Recorded.Chunk, rep.Rows[2].Recorded.Chunk
	if expert.Cosine(flat(a), flat(b)) > 0.999 {
		t.Error("chunks 0 and 2 (same golden case) are nearly identical: the perturbation is missing")
	}
}

func flat(c msgs.ActionChunk) []float32 {
	var x []float32
	for _, r := range c.Actions {
		x = append(x, r.Values...)
	}
	return x
}

// TestRegressionBagIsCurrent rebuilds the regression bag as `fastwam bag
// make -o golden/regression -chunks 8` does and compares it with the
// committed one, message by message and decoded, so that the bag cannot
// silently go stale when the node, the codec or the CPU backend changes.
func TestRegressionBagIsCurrent(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "regression")
	res, err := replay.MakeBag(context.Background(), replay.MakeOptions{
		Dir: dir, Chunks: regressionChunks, Cases: tinyCases(t), Backend: tinyBackend(t), Params: cpuParams(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Messages != 3*regressionChunks {
		t.Errorf("%d messages, want %d", res.Messages, 3*regressionChunks)
	}
	const regen = "regenerate it: go run ./cmd/fastwam bag make -force -o golden/regression -chunks 8"
	got, want := readAll(t, dir), readAll(t, regressionBag(t))
	if len(got.topics) != len(want.topics) {
		t.Fatalf("%d topics, committed %d; %s", len(got.topics), len(want.topics), regen)
	}
	for i := range got.topics {
		g, w := got.topics[i], want.topics[i]
		if g.Name != w.Name || g.Type != w.Type || g.MessageCount != w.MessageCount || len(g.OfferedQoSProfiles) != 1 ||
			len(w.OfferedQoSProfiles) != 1 || g.OfferedQoSProfiles[0] != w.OfferedQoSProfiles[0] {
			t.Errorf("topic %d: %+v, committed %+v; %s", i, g, w, regen)
		}
	}
	// The schemas stored in the committed bag must be today's message
	// definitions, so `ros2 bag play` and our readers agree on them.
	committed, err := bag.Open(regressionBag(t))
	if err != nil {
		t.Fatal(err)
	}
	defer committed.Close()
	for _, tp := range committed.Topics() {
		def, err := msgs.Definition(tp.Type)
		if err != nil {
			t.Fatal(err)
		}
		if tp.Definition != def {
			t.Errorf("topic %s: the committed bag's schema of %s is not the current definition; %s", tp.Name, tp.Type, regen)
		}
	}
	for topic, gm := range got.msgs {
		wm := want.msgs[topic]
		if len(gm) > 0 && gm[0].Type == msgs.TypeActionChunk {
			// A chunk's log time is when it was published, a measured time
			// like its denoise_ms: on a loaded machine a chunk can be
			// logged after the next inputs, so compare chunks in seq order.
			sortBySeq(t, gm)
			sortBySeq(t, wm)
		}
		if len(gm) != len(wm) {
			t.Fatalf("%s: %d messages, committed %d; %s", topic, len(gm), len(wm), regen)
		}
		for i := range gm {
			if gm[i].Type != msgs.TypeActionChunk {
				if !gm[i].LogTime.Equal(wm[i].LogTime) || !bytes.Equal(gm[i].Data, wm[i].Data) {
					t.Errorf("%s message %d differs from the committed one; %s", topic, i, regen)
				}
				continue
			}
			compareChunks(t, i, gm[i].Data, wm[i].Data, regen)
		}
	}
}

// compareChunks compares two recorded ActionChunks, all fields but the
// measured times, and the actions within the CPU backend's run-to-run
// tolerance (OpenBLAS or gonum, thread counts).
func compareChunks(t *testing.T, i int, got, want []byte, regen string) {
	t.Helper()
	var g, w msgs.ActionChunk
	if err := g.UnmarshalCDR(got); err != nil {
		t.Fatal(err)
	}
	if err := w.UnmarshalCDR(want); err != nil {
		t.Fatal(err)
	}
	ga, wa := flat(g), flat(w)
	if len(ga) != len(wa) || !(expert.MaxAbsDiff(ga, wa) <= 1e-4) || !(expert.Cosine(ga, wa) >= 1-1e-9) {
		t.Errorf("chunk %d: actions differ from the committed ones (max |diff| %v); %s", i, expert.MaxAbsDiff(ga, wa), regen)
	}
	g.Actions, w.Actions = nil, nil
	// inference_delay (and rtc_delay, with auto) follow the measured times.
	g.DenoiseMs, g.ReceiveToPublishMs, g.InputAgeMs, g.InferenceDelay, g.RTCDelay = 0, 0, 0, 0, 0
	w.DenoiseMs, w.ReceiveToPublishMs, w.InputAgeMs, w.InferenceDelay, w.RTCDelay = 0, 0, 0, 0, 0
	if g.Header != w.Header || g.Seq != w.Seq || g.KVSeq != w.KVSeq || g.ContextSeq != w.ContextSeq || g.Steps != w.Steps ||
		g.Shift != w.Shift || g.NoiseSeed != w.NoiseSeed || g.Backend != w.Backend || g.DryRun != w.DryRun ||
		g.Clipped != w.Clipped || g.StaleInput != w.StaleInput || g.Dt != w.Dt || g.RTCMode != w.RTCMode ||
		g.RTCPrevSeq != w.RTCPrevSeq || g.RTCShift != w.RTCShift || g.RTCHorizon != w.RTCHorizon || g.RTCSchedule != w.RTCSchedule {
		t.Errorf("chunk %d: %+v, committed %+v; %s", i, g, w, regen)
	}
}

type bagContents struct {
	topics []bag.Topic
	msgs   map[string][]bag.Message
}

// sortBySeq orders recorded ActionChunk messages by their seq field.
func sortBySeq(t *testing.T, ms []bag.Message) {
	t.Helper()
	seq := func(m bag.Message) uint64 {
		var c msgs.ActionChunk
		if err := c.UnmarshalCDR(m.Data); err != nil {
			t.Fatalf("recorded action chunk: %v", err)
		}
		return c.Seq
	}
	slices.SortStableFunc(ms, func(a, b bag.Message) int { return cmp.Compare(seq(a), seq(b)) })
}

func readAll(t *testing.T, path string) bagContents {
	t.Helper()
	r, err := bag.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c := bagContents{topics: r.Topics(), msgs: map[string][]bag.Message{}}
	for m, err := range r.Messages(t.Context()) {
		if err != nil {
			t.Fatal(err)
		}
		c.msgs[m.Topic] = append(c.msgs[m.Topic], m)
	}
	return c
}

// TestReplayTamperedBagFails changes one recorded action value: the gate
// fails and names that chunk alone.
func TestReplayTamperedBagFails(t *testing.T) {
	tampered := filepath.Join(t.TempDir(), "tampered")
	rewriteBag(t, regressionBag(t), tampered, tamperAction(t, 5, 1))
	rep, err := run(t, context.Background(), tampered, tinyBackend(t))
	if err != nil {
		t.Fatal(err)
	}
	gate := rep.Err()
	if gate == nil {
		t.Fatal("a tampered bag passed")
	}
	if msg := gate.Error(); !strings.Contains(msg, "kv_seq 5 stamp 1700000000.500000000") || !strings.Contains(msg, "1 of 8") {
		t.Errorf("gate error does not name chunk 5 alone: %v", gate)
	}
	for _, r := range rep.Rows {
		want := replay.StatusOK
		if r.KVSeq == 5 {
			want = replay.StatusMismatch
		}
		if r.Status != want {
			t.Errorf("kv_seq %d: %s, want %s", r.KVSeq, r.Status, want)
		}
	}
	if f := rep.Failures(); len(f) != 1 || f[0].Cosine >= 0.9999 || f[0].MaxAbsErr < 0.99 || f[0].MaxAbsErr > 1.01 {
		t.Errorf("failures %+v", f)
	}

	// A max |err| gate catches a change too small for the cosine gate.
	small := filepath.Join(t.TempDir(), "small")
	rewriteBag(t, regressionBag(t), small, tamperAction(t, 2, 0.01))
	rep, err = run(t, context.Background(), small, tinyBackend(t))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Err() != nil {
		t.Fatalf("a 0.01 change failed the cosine gate alone: %v", rep.Err())
	}
	rep, err = run(t, context.Background(), small, tinyBackend(t), func(o *replay.Options) { o.MaxAbsErr = 1e-3 })
	if err != nil {
		t.Fatal(err)
	}
	if gate := rep.Err(); gate == nil || !strings.Contains(gate.Error(), "kv_seq 2") || !strings.Contains(gate.Error(), "max |err|") {
		t.Errorf("max |err| gate: %v", gate)
	}
}

// TestReplayPartOfBag replays the second half of the bag only: the seeds
// follow the caches' seq, so the chunks are reproduced all the same.
func TestReplayPartOfBag(t *testing.T) {
	part := filepath.Join(t.TempDir(), "part")
	rewriteBag(t, regressionBag(t), part, func(m *bag.Message) bool {
		return m.LogTime.After(time.Unix(replay.DefaultStartUnix, 350_000_000))
	})
	rep, err := run(t, context.Background(), part, tinyBackend(t))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Err() != nil || rep.Compared() != 4 {
		t.Fatalf("%d compared, gate %v", rep.Compared(), rep.Err())
	}
	if r := rep.Rows[0]; r.KVSeq != 4 || r.Produced.Seq != 0 || r.Produced.NoiseSeed != 4 {
		t.Errorf("first row: kv_seq %d seq %d noise seed %d, want 4 0 4", r.KVSeq, r.Produced.Seq, r.Produced.NoiseSeed)
	}
}

// TestReplayMissingAndUnrecorded garbles a cache (its recorded chunk
// cannot be produced: a failure naming it; the cache is in the bag, so the
// chunk is comparable) and drops a recorded chunk (its produced chunk is
// reported, not failed).
func TestReplayMissingAndUnrecorded(t *testing.T) {
	edited := filepath.Join(t.TempDir(), "edited")
	rewriteBag(t, regressionBag(t), edited, func(m *bag.Message) bool {
		switch m.Type {
		case msgs.TypeVideoKVCache:
			var kv msgs.VideoKVCache
			if err := kv.UnmarshalCDR(m.Data); err != nil {
				t.Fatal(err)
			}
			if kv.Seq == 3 {
				m.Data = []byte{0, 1, 0, 0, 0xde, 0xad} // CDR encapsulation, then too short
			}
			return true
		case msgs.TypeActionChunk:
			var c msgs.ActionChunk
			if err := c.UnmarshalCDR(m.Data); err != nil {
				t.Fatal(err)
			}
			return c.KVSeq != 6
		}
		return true
	})
	rep, err := run(t, context.Background(), edited, tinyBackend(t))
	if err != nil {
		t.Fatal(err)
	}
	status := map[uint64]replay.Status{}
	for _, r := range rep.Rows {
		status[r.KVSeq] = r.Status
	}
	if status[3] != replay.StatusMissing || status[6] != replay.StatusNew || status[5] != replay.StatusOK {
		t.Errorf("statuses %v; want 3 MISSING, 6 new, others ok", status)
	}
	gate := rep.Err()
	if gate == nil || !strings.Contains(gate.Error(), "kv_seq 3") || !strings.Contains(gate.Error(), "not produced") || strings.Contains(gate.Error(), "kv_seq 6") {
		t.Errorf("gate: %v", gate)
	}
	var table bytes.Buffer
	rep.WriteTable(&table)
	if !strings.Contains(table.String(), "1 produced chunks without a recorded one") {
		t.Errorf("table does not report the unrecorded chunk:\n%s", table.String())
	}
}

// TestReplayOutputAndPlot writes the produced chunks to a bag, at the
// recorded log times, with the diagnostics, and draws the plot.
func TestReplayOutputAndPlot(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	src := regressionBag(t)
	rep, err := run(t, context.Background(), src, tinyBackend(t), func(o *replay.Options) { o.Output = out })
	if err != nil {
		t.Fatal(err)
	}
	got := readChunks(t, out, "/action_chunk")
	want := readChunks(t, src, "/action_chunk")
	if len(got) != regressionChunks {
		t.Fatalf("output bag holds %d chunks, want %d", len(got), regressionChunks)
	}
	for i := range got {
		if !got[i].LogTime.Equal(want[i].LogTime) || got[i].Chunk.KVSeq != uint64(i) {
			t.Errorf("chunk %d: log time %v kv_seq %d, want %v %d", i, got[i].LogTime, got[i].Chunk.KVSeq, want[i].LogTime, i)
		}
	}
	r, err := bag.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	diags := 0
	for _, tp := range r.Topics() {
		if tp.Name == "/diagnostics" && tp.Type == msgs.TypeDiagnosticArray {
			diags = int(tp.MessageCount)
		}
	}
	if diags < 1 {
		t.Errorf("no diagnostics in the output bag: %+v", r.Topics())
	}
	if _, err := run(t, context.Background(), src, tinyBackend(t), func(o *replay.Options) { o.Output = out }); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("second run into the same output: %v, want an error saying it exists", err)
	}

	plotPath := filepath.Join(t.TempDir(), "replay.png")
	if err := replay.WritePlot(rep, plotPath); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(plotPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("plot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 800 {
		t.Errorf("plot is %v", b)
	}
	if err := replay.WritePlot(&replay.Report{}, plotPath); err == nil {
		t.Error("plot of an empty report: no error")
	}
}

// lineWriter collects progress lines and calls hook on each.
type lineWriter struct {
	mu    sync.Mutex
	lines []string
	hook  func()
}

func (w *lineWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	w.lines = append(w.lines, strings.TrimSpace(string(b)))
	hook := w.hook
	w.mu.Unlock()
	if hook != nil {
		hook()
	}
	return len(b), nil
}

func TestReplayProgress(t *testing.T) {
	w := &lineWriter{}
	if _, err := run(t, context.Background(), regressionBag(t), tinyBackend(t), func(o *replay.Options) {
		o.Progress, o.ProgressEvery = w, time.Nanosecond
	}); err != nil {
		t.Fatal(err)
	}
	if len(w.lines) != regressionChunks {
		t.Fatalf("%d progress lines, want one per chunk: %q", len(w.lines), w.lines)
	}
	if !strings.HasPrefix(w.lines[0], "replay: 1/8 chunks (12%)") || !strings.Contains(w.lines[0], "ETA") ||
		!strings.HasPrefix(w.lines[7], "replay: 8/8 chunks (100%)") {
		t.Errorf("progress lines %q", w.lines)
	}
	// A replay shorter than the period prints the final line only. The
	// period is an hour, not the default second, so that a loaded machine
	// cannot make the replay outlast it.
	w = &lineWriter{}
	if _, err := run(t, context.Background(), regressionBag(t), tinyBackend(t), func(o *replay.Options) {
		o.Progress, o.ProgressEvery = w, time.Hour
	}); err != nil {
		t.Fatal(err)
	}
	if len(w.lines) != 1 || !strings.HasPrefix(w.lines[0], "replay: 8/8") {
		t.Errorf("progress lines %q, want the final one only", w.lines)
	}
}

// TestReplayInterrupted cancels the replay after the second chunk: it
// stops, reports what was produced, and still writes the output bag.
func TestReplayInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &lineWriter{}
	w.hook = func() {
		if len(w.lines) == 2 {
			cancel()
		}
	}
	out := filepath.Join(t.TempDir(), "out")
	rep, err := run(t, ctx, regressionBag(t), tinyBackend(t), func(o *replay.Options) {
		o.Progress, o.ProgressEvery, o.Output = w, time.Nanosecond, out
	})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "interrupted after 2 of 8") {
		t.Fatalf("error %v, want an interruption after 2 of 8", err)
	}
	if rep == nil || !rep.Interrupted || rep.Compared() != 2 || rep.NotReached != 6 || rep.Err() != nil {
		t.Fatalf("report %+v", rep)
	}
	if got := readChunks(t, out, "/action_chunk"); len(got) != 2 {
		t.Errorf("output bag holds %d chunks, want 2", len(got))
	}
}

// blockingBackend never finishes a step until its context is done.
type blockingBackend struct{ expert.Backend }

func (b blockingBackend) Step(ctx context.Context, x []float32, tau float32, pred []float32) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestReplayChunkTimeout: a backend that hangs costs the timeout per
// chunk, and the chunks are reported missing, not waited for forever.
func TestReplayChunkTimeout(t *testing.T) {
	part := filepath.Join(t.TempDir(), "part")
	rewriteBag(t, regressionBag(t), part, func(m *bag.Message) bool {
		return m.LogTime.Before(time.Unix(replay.DefaultStartUnix, 150_000_000))
	})
	start := time.Now()
	rep, err := run(t, context.Background(), part, blockingBackend{tinyBackend(t)}, func(o *replay.Options) {
		o.ChunkTimeout = 50 * time.Millisecond
	})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("replay took %v", time.Since(start))
	}
	if rep.Timeouts != 2 || len(rep.Failures()) != 2 {
		t.Fatalf("%d timeouts, %d failures; want 2 and 2", rep.Timeouts, len(rep.Failures()))
	}
	if f := rep.Failures()[0]; f.Status != replay.StatusMissing || !strings.Contains(f.Note, "no outcome within 50ms") {
		t.Errorf("first failure %s: %s", f.Status, f.Note)
	}
}

// TestReplayRejectedInput: a corrupted cache is rejected by the node; its
// recorded chunk is missing and the reason is named.
func TestReplayRejectedInput(t *testing.T) {
	edited := filepath.Join(t.TempDir(), "edited")
	rewriteBag(t, regressionBag(t), edited, func(m *bag.Message) bool {
		if m.Type != msgs.TypeVideoKVCache {
			return true
		}
		var kv msgs.VideoKVCache
		if err := kv.UnmarshalCDR(m.Data); err != nil {
			t.Fatal(err)
		}
		if kv.Seq == 1 {
			kv.Keys.Shape = []uint32{2, 1, 4, 64} // same bytes, wrong shape
			data, err := kv.MarshalCDR()
			if err != nil {
				t.Fatal(err)
			}
			m.Data = data
		}
		return true
	})
	rep, err := run(t, context.Background(), edited, tinyBackend(t))
	if err != nil {
		t.Fatal(err)
	}
	f := rep.Failures()
	if len(f) != 1 || f[0].KVSeq != 1 || f[0].Status != replay.StatusMissing || !strings.Contains(f[0].Note, "rejected: shape") {
		t.Fatalf("failures %+v", f)
	}
	if rep.Stats.Rejected[node.RejectShape] != 1 {
		t.Errorf("rejected %v", rep.Stats.Rejected)
	}
}

// TestScanErrors: malformed bags, missing topics and foreign models give
// clear errors.
func TestScanErrors(t *testing.T) {
	ctx := context.Background()
	topics := cpuParams(t).Topics
	dir := t.TempDir()

	garbage := filepath.Join(dir, "garbage.mcap")
	os.WriteFile(garbage, []byte("this is not an MCAP file, not at all"), 0o644)
	if _, err := replay.Scan(ctx, garbage, topics); err == nil || !strings.Contains(err.Error(), "replay: open bag") {
		t.Errorf("garbage: %v", err)
	}
	src := regressionBag(t)
	mcap := filepath.Join(src, "regression_0.mcap")
	data, err := os.ReadFile(mcap)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.mcap")
	os.WriteFile(truncated, data[:len(data)/2], 0o644)
	if _, err := replay.Scan(ctx, truncated, topics); err == nil {
		t.Error("truncated bag scanned without error")
	} else {
		t.Log(err)
	}
	if _, err := replay.Scan(ctx, filepath.Join(dir, "absent"), topics); err == nil {
		t.Error("absent bag: no error")
	}

	other := topics
	other.KVCache = "/robot/video_kv_cache"
	if _, err := replay.Scan(ctx, src, other); err == nil || !strings.Contains(err.Error(), "no topic /robot/video_kv_cache") ||
		!strings.Contains(err.Error(), "/video_kv_cache (fastwam_action_expert/msg/VideoKVCache)") {
		t.Errorf("missing topic: %v", err)
	}
	other = topics
	other.Context = topics.Actions
	if _, err := replay.Scan(ctx, src, other); err == nil || !strings.Contains(err.Error(), "has type") {
		t.Errorf("wrong type: %v", err)
	}

	// A bag recorded without summary (a recording that was not closed):
	// its topics are listed, not "none", and it scans fully.
	cut := filepath.Join(dir, "summaryless.mcap")
	os.WriteFile(cut, cutSummary(t, data), 0o644)
	other = topics
	other.KVCache = "/robot/video_kv_cache"
	if _, err := replay.Scan(ctx, cut, other); err == nil || !strings.Contains(err.Error(), "no topic /robot/video_kv_cache") ||
		!strings.Contains(err.Error(), "/video_kv_cache (fastwam_action_expert/msg/VideoKVCache)") {
		t.Errorf("missing topic in a summary-less bag: %v", err)
	}
	if rec, err := replay.Scan(ctx, cut, topics); err != nil || rec.KVCount != 8 || rec.ContextCount != 8 || len(rec.Recorded) != 8 {
		t.Errorf("summary-less bag: %+v, %v; want 8 inputs of each kind and 8 recorded chunks", rec, err)
	}

	// A backend of another shape is refused before anything runs.
	rec := scan(t, src)
	d := tinyBackend(t).Dims()
	d.VideoTokens = 16
	if _, err := replay.Run(ctx, rec, replay.Options{Params: cpuParams(t), Backend: dimsBackend{d}}); err == nil ||
		!strings.Contains(err.Error(), "shape [2 1 8 32], the backend takes [2 1 16 32]") {
		t.Errorf("foreign model: %v", err)
	}
}

// cutSummary turns a closed MCAP file into one without summary section
// (data end record, then a footer whose summary start is 0), as a
// recording that was not closed leaves it once its end is repaired.
func cutSummary(t *testing.T, data []byte) []byte {
	t.Helper()
	footer := len(data) - 8 - 9 - 20
	start := binary.LittleEndian.Uint64(data[footer+9:])
	if start == 0 || start > uint64(footer) {
		t.Fatalf("no summary to cut (summary start %d)", start)
	}
	out := bytes.Clone(data[:start])
	out = append(out, 0x02) // footer opcode
	out = binary.LittleEndian.AppendUint64(out, 20)
	out = append(out, make([]byte, 20)...)
	return append(out, data[len(data)-8:]...) // the magic
}

// dimsBackend only has a contract.
type dimsBackend struct{ d expert.Dims }

func (b dimsBackend) Dims() expert.Dims                              { return b.d }
func (b dimsBackend) BindChunk(context.Context, *expert.Chunk) error { return errors.New("unused") }
func (b dimsBackend) Step(context.Context, []float32, float32, []float32) error {
	return errors.New("unused")
}
func (b dimsBackend) Close() error { return nil }

func TestResolveTopics(t *testing.T) {
	p := params.Default()
	if err := replay.ResolveTopics(&p, "/robot/"); err != nil {
		t.Fatal(err)
	}
	if p.Topics.KVCache != "/robot/video_kv_cache" || p.Topics.Actions != "/robot/action_chunk" || p.Topics.Diagnostics != "/diagnostics" {
		t.Errorf("topics %+v", p.Topics)
	}
	for _, ns := range []string{"", "robot", "/a b"} {
		if err := replay.ResolveTopics(&p, ns); err == nil {
			t.Errorf("namespace %q accepted", ns)
		}
	}
	p = params.Default()
	p.Topics.Context = "~/ctx"
	if err := replay.ResolveTopics(&p, "/"); err == nil || !strings.Contains(err.Error(), "topics.context") {
		t.Errorf("private name: %v", err)
	}
}

func TestMakeBagErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	good := replay.MakeOptions{Dir: filepath.Join(dir, "b"), Chunks: 2, Cases: tinyCases(t), Backend: tinyBackend(t), Params: cpuParams(t)}
	for name, edit := range map[string]func(o *replay.MakeOptions){
		"no chunks":  func(o *replay.MakeOptions) { o.Chunks = 0 },
		"no cases":   func(o *replay.MakeOptions) { o.Cases = nil },
		"no dir":     func(o *replay.MakeOptions) { o.Dir = "" },
		"no backend": func(o *replay.MakeOptions) { o.Backend = nil },
		"wrong dims": func(o *replay.MakeOptions) {
			d := o.Backend.Dims()
			d.TextDim = 64
			o.Backend = dimsBackend{d}
		},
	} {
		o := good
		edit(&o)
		if _, err := replay.MakeBag(ctx, o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// The staging folder a killed make left (pid 999999991: above any
	// pid_max, so surely gone) is removed by the next make beside it.
	stale := filepath.Join(dir, ".bagmake-999999991-1")
	if err := os.MkdirAll(filepath.Join(stale, "b"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := replay.MakeBag(ctx, good); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale staging folder of a gone process left: %v", err)
	}
	if _, err := replay.MakeBag(ctx, good); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("existing folder: %v", err)
	}
	o := good
	o.Replace, o.Chunks = true, 3
	if _, err := replay.MakeBag(ctx, o); err != nil {
		t.Fatalf("replace: %v", err)
	}
	if n := len(readChunks(t, good.Dir, "/action_chunk")); n != 3 {
		t.Errorf("replaced bag holds %d chunks, want 3", n)
	}
	// Replace refuses a folder that is not a bag.
	notBag := filepath.Join(dir, "notbag")
	os.Mkdir(notBag, 0o755)
	os.WriteFile(filepath.Join(notBag, "precious.txt"), []byte("keep me"), 0o644)
	o.Dir = notBag
	if _, err := replay.MakeBag(ctx, o); err == nil || !strings.Contains(err.Error(), "precious.txt") {
		t.Errorf("replacing a non-bag folder: %v", err)
	}
	if _, err := os.Stat(filepath.Join(notBag, "precious.txt")); err != nil {
		t.Error("the non-bag folder was touched")
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".bagmake-") {
			t.Errorf("staging folder %s left behind", e.Name())
		}
	}
}

// cancellingBackend cancels the replay when the n-th chunk is bound and
// then never finishes a step until the node stops it.
type cancellingBackend struct {
	expert.Backend
	n      int
	cancel context.CancelFunc
	mu     sync.Mutex
	binds  int
}

func (b *cancellingBackend) BindChunk(ctx context.Context, c *expert.Chunk) error {
	b.mu.Lock()
	b.binds++
	if b.binds == b.n {
		b.cancel()
	}
	b.mu.Unlock()
	return b.Backend.BindChunk(ctx, c)
}

func (b *cancellingBackend) Step(ctx context.Context, x []float32, tau float32, pred []float32) error {
	b.mu.Lock()
	hang := b.binds >= b.n
	b.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	return b.Backend.Step(ctx, x, tau, pred)
}

// TestReplayInterruptedWhileDenoising: the chunk being denoised when the
// replay is cancelled is neither a failure nor silently dropped.
func TestReplayInterruptedWhileDenoising(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := &cancellingBackend{Backend: tinyBackend(t), n: 3, cancel: cancel}
	rep, err := run(t, ctx, regressionBag(t), b)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v, want a cancellation", err)
	}
	if rep.Err() != nil || rep.Compared() != 2 || rep.NotReached != 6 || len(rep.Rows) != 3 {
		t.Fatalf("gate %v, %d compared, %d not reached, %d rows; want nil 2 6 3", rep.Err(), rep.Compared(), rep.NotReached, len(rep.Rows))
	}
	if r := rep.Rows[2]; r.Status != replay.StatusNoOutput || !strings.Contains(r.Note, "interrupted while denoising") {
		t.Errorf("in-flight row: %s %q", r.Status, r.Note)
	}
	if rep.Stats.Dropped[node.DropShutdown] != 1 {
		t.Errorf("dropped %v, want one shutdown drop", rep.Stats.Dropped)
	}
}

// TestReplayRefusesSHM: kv_transport shm is refused before anything runs,
// by Run and MakeBag alike, saying why (the replay feeds the bag's DDS
// messages; the hand-off has no segment). The node used to start, wait
// for descriptors that never came, and leave every chunk "not produced"
// with no reason.
func TestReplayRefusesSHM(t *testing.T) {
	p := cpuParams(t)
	if err := p.Set("kv_transport", params.KVTransportSHM); err != nil {
		t.Fatal(err)
	}
	want := `kv_transport "shm" is not replayable: the replay feeds the node the bag's VideoKVCache messages on /video_kv_cache`
	rec := scan(t, regressionBag(t))
	rec.ApplySchedule(&p)
	rep, err := replay.Run(t.Context(), rec, replay.Options{Params: p, Backend: tinyBackend(t)})
	if rep != nil || err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "no segment to read") {
		t.Errorf("Run: %v, want %q", err, want)
	}
	_, err = replay.MakeBag(t.Context(), replay.MakeOptions{Dir: filepath.Join(t.TempDir(), "b"), Chunks: 1, Cases: tinyCases(t), Backend: tinyBackend(t), Params: p})
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("MakeBag: %v, want %q", err, want)
	}
}

// TestNotProducedSaysWhy: a recorded chunk whose inputs are in the bag but
// never pair (the context's stamp moved by 1 ns, sync exact) is MISSING
// with the reason, not a bare "no chunk produced".
func TestNotProducedSaysWhy(t *testing.T) {
	edited := filepath.Join(t.TempDir(), "edited")
	rewriteBag(t, regressionBag(t), edited, func(m *bag.Message) bool {
		if m.Type != msgs.TypeTextContext {
			return true
		}
		var c msgs.TextContext
		if err := c.UnmarshalCDR(m.Data); err != nil {
			t.Fatal(err)
		}
		if c.Seq == 3 {
			c.Header.Stamp.Nanosec++
			data, err := c.MarshalCDR()
			if err != nil {
				t.Fatal(err)
			}
			m.Data = data
		}
		return true
	})
	rep, err := run(t, t.Context(), edited, tinyBackend(t))
	if err != nil {
		t.Fatal(err)
	}
	f := rep.Failures()
	if len(f) != 1 || f[0].KVSeq != 3 || f[0].Status != replay.StatusMissing ||
		f[0].Note != "no chunk produced: the node paired no TextContext with its VideoKVCache (sync.policy exact); see the node's drop counts below" {
		t.Fatalf("failures %+v, want kv_seq 3 MISSING saying it never paired", f)
	}
}
