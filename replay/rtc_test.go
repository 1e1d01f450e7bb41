package replay_test

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/expert"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/replay"
)

// makeBag writes a bag of chunks observations made by the node on the
// bus with the CPU backend and the tiny weights, with edit applied to the
// node's parameters.
func makeBag(t *testing.T, chunks int, edit func(*params.Params)) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "bag")
	p := cpuParams(t)
	edit(&p)
	if _, err := replay.MakeBag(context.Background(), replay.MakeOptions{
		Dir: dir, Chunks: chunks, Cases: tinyCases(t), Backend: tinyBackend(t), Params: p,
	}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func guided(p *params.Params) { p.RTC.Mode = expert.RTCGuided }

// TestReplayGuidedBag: a bag recorded with rtc.mode guided replays bit
// for bit, each tied chunk rebuilt from its recorded fields and the
// recorded previous chunk, whatever the replaying node's own rtc.mode.
func TestReplayGuidedBag(t *testing.T) {
	dir := makeBag(t, regressionChunks, guided)
	rec := readChunks(t, dir, "/action_chunk")
	if len(rec) != regressionChunks {
		t.Fatalf("%d chunks recorded", len(rec))
	}
	for i, r := range rec {
		c := r.Chunk
		if c.Dt != 0.05 {
			t.Errorf("chunk %d: dt %v, want the default control period 0.05", i, c.Dt)
		}
		if i == 0 {
			if c.RTCMode != "off" {
				t.Errorf("chunk 0: rtc_mode %q, want off (no previous chunk)", c.RTCMode)
			}
			continue
		}
		// Stamps 100 ms apart at dt 50 ms: s = 2.
		if c.RTCMode != "guided" || c.RTCPrevSeq != c.Seq-1 || c.RTCShift != 2 || c.RTCHorizon != 24 ||
			c.RTCSchedule != "exp" || c.RTCMaxGuidance != 5 {
			t.Errorf("chunk %d: rtc fields %q prev %d s %d d %d h %d %q beta %v", i, c.RTCMode, c.RTCPrevSeq, c.RTCShift,
				c.RTCDelay, c.RTCHorizon, c.RTCSchedule, c.RTCMaxGuidance)
		}
	}
	// The guidance changes the chunks: an untied chunk of the same inputs
	// differs from the tied one.
	off := readChunks(t, makeBag(t, 2, func(*params.Params) {}), "/action_chunk")
	if d := expert.MaxAbsDiff(flat(off[1].Chunk), flat(rec[1].Chunk)); d < 1e-3 {
		t.Fatalf("the guided chunk 1 is the untied one (max |diff| %v): the test would not see RTC missing", d)
	}

	rep, err := run(t, context.Background(), dir, tinyBackend(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatalf("gate: %v", err)
	}
	if rep.Compared() != regressionChunks {
		t.Fatalf("%d chunks compared, want %d", rep.Compared(), regressionChunks)
	}
	var table strings.Builder
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "rtc      7 recorded chunks tied to their predecessor") {
		t.Errorf("the table does not say the chunks were tied:\n%s", table.String())
	}
	for i, r := range rep.Rows {
		if r.Status != replay.StatusOK || r.MaxAbsErr != 0 {
			t.Errorf("row %d: %s (%s), max |err| %v; want bit for bit", i, r.Status, r.Note, r.MaxAbsErr)
		}
		if r.Produced.RTCMode != r.Recorded.Chunk.RTCMode || r.Produced.RTCPrevSeq != r.Recorded.Chunk.RTCPrevSeq ||
			r.Produced.RTCDelay != r.Recorded.Chunk.RTCDelay {
			t.Errorf("row %d: replayed rtc %q prev %d d %d, recorded %q %d %d", i, r.Produced.RTCMode, r.Produced.RTCPrevSeq,
				r.Produced.RTCDelay, r.Recorded.Chunk.RTCMode, r.Recorded.Chunk.RTCPrevSeq, r.Recorded.Chunk.RTCDelay)
		}
	}

	// The previous chunk is the RECORDED one: changing recorded chunk 3
	// fails its own row and the row of chunk 4 tied to it, no other.
	tampered := filepath.Join(t.TempDir(), "tampered")
	rewriteBag(t, dir, tampered, tamperAction(t, 3, 0.5))
	rep, err = run(t, context.Background(), tampered, tinyBackend(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Rows {
		if failed := r.Status.Failed(); failed != (r.KVSeq == 3 || r.KVSeq == 4) {
			t.Errorf("tampered chunk 3: row kv_seq %d is %s (%s)", r.KVSeq, r.Status, r.Note)
		}
	}
}

// TestReplayBadRTCFields: the rtc_ fields of a recorded chunk are hostile
// input; each bad one fails that chunk's row with an error naming the
// field, and the other rows still pass.
func TestReplayBadRTCFields(t *testing.T) {
	dir := makeBag(t, 6, guided)
	for _, c := range []struct {
		name string
		edit func(c *msgs.ActionChunk)
		want string
	}{
		{"unknown mode", func(c *msgs.ActionChunk) { c.RTCMode = "sideways" }, `recorded rtc_mode "sideways": want off, replace or guided`},
		{"missing previous chunk", func(c *msgs.ActionChunk) { c.RTCPrevSeq = 99 }, "rtc_prev_seq 99: the bag records no chunk with that seq"},
		{"shift past the chunk", func(c *msgs.ActionChunk) { c.RTCShift = 32 }, "recorded rtc_shift 32: want less than 32 (action_tokens)"},
		{"zero guidance", func(c *msgs.ActionChunk) { c.RTCMaxGuidance = 0 }, "recorded rtc_max_guidance 0: want a finite number > 0 in guided mode"},
		{"horizon past the chunk", func(c *msgs.ActionChunk) { c.RTCHorizon = 33 }, "recorded rtc_horizon 33: want 1 to 32 (action_tokens)"},
		{"delay past the horizon", func(c *msgs.ActionChunk) { c.RTCDelay = 25 }, "recorded rtc_delay 25: want at most rtc_horizon 24"},
		{"unknown schedule", func(c *msgs.ActionChunk) { c.RTCSchedule = "cosine" }, `recorded rtc_schedule "cosine"`},
		{"NaN guidance", func(c *msgs.ActionChunk) { c.RTCMaxGuidance = float32(math.NaN()) }, "recorded rtc_max_guidance NaN"},
	} {
		t.Run(c.name, func(t *testing.T) {
			bad := filepath.Join(t.TempDir(), "bad")
			rewriteBag(t, dir, bad, editChunk(t, 4, c.edit))
			rep, err := run(t, context.Background(), bad, tinyBackend(t))
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rep.Rows {
				switch {
				case r.KVSeq == 4:
					if r.Status != replay.StatusMismatch || !strings.Contains(r.Note, c.want) {
						t.Errorf("row 4: %s (%s), want FAIL naming %q", r.Status, r.Note, c.want)
					}
				case r.Status != replay.StatusOK:
					t.Errorf("row %d: %s (%s), want ok", r.KVSeq, r.Status, r.Note)
				}
			}
			if err := rep.Err(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("gate: %v, want it to name %q", err, c.want)
			}
		})
	}
	// A previous chunk with a non-finite action cannot be a target.
	bad := filepath.Join(t.TempDir(), "nan")
	rewriteBag(t, dir, bad, editChunk(t, 2, func(c *msgs.ActionChunk) { c.Actions[1].Values[0] = float32(math.NaN()) }))
	rep, err := run(t, context.Background(), bad, tinyBackend(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Rows {
		if r.KVSeq == 3 && !strings.Contains(r.Note, "rtc_prev_seq 2: the previous chunk's action value 7 is NaN") {
			t.Errorf("row 3 (tied to the NaN chunk): %s (%s)", r.Status, r.Note)
		}
	}
}

// editChunk returns a bag edit that applies edit to the recorded chunk
// with kv_seq kvSeq.
func editChunk(t *testing.T, kvSeq uint64, edit func(*msgs.ActionChunk)) func(m *bag.Message) bool {
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
		edit(&c)
		data, err := c.MarshalCDR()
		if err != nil {
			t.Fatal(err)
		}
		m.Data = data
		return true
	}
}
