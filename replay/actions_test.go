package replay_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/actions"
	"github.com/fastwam/actionexpert/node/params"
	"github.com/fastwam/actionexpert/replay"
)

// withPost sets the actions.* post-processing of the test's stats file.
func withPost(t *testing.T, p *params.Params) {
	t.Helper()
	for name, v := range map[string]string{
		"actions.norm_mode": "min/max", "actions.stats_file": "../actions/testdata/dataset_stats.json",
		"actions.gripper.affine": "true", "actions.gripper.invert": "true",
	} {
		if err := p.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	if err := replay.ResolveTopics(p, "/"); err != nil {
		t.Fatal(err)
	}
}

// TestExecutableChunksInBagAndReplay: bag make with actions.* records the
// executable chunks (un-normalised rows, not the model's), and a replay
// with the same parameters reproduces them bit for bit; the model rows
// are those of a bag made without post-processing.
func TestExecutableChunksInBagAndReplay(t *testing.T) {
	ctx := context.Background()
	p := cpuParams(t)
	withPost(t, &p)
	dir := filepath.Join(t.TempDir(), "bag")
	res, err := replay.MakeBag(ctx, replay.MakeOptions{Dir: dir, Chunks: 3, Cases: tinyCases(t), Backend: tinyBackend(t), Params: p})
	if err != nil {
		t.Fatal(err)
	}
	if res.Messages != 4*3 {
		t.Errorf("%d messages, want 12 (context, cache, chunk, executable chunk per observation)", res.Messages)
	}
	model := readChunks(t, dir, p.Topics.Actions)
	robot := readChunks(t, dir, p.Actions.Topic)
	if len(model) != 3 || len(robot) != 3 {
		t.Fatalf("%d model chunks, %d executable ones; want 3 and 3", len(model), len(robot))
	}
	post, err := actions.New(p.Actions.Post, len(model[0].Chunk.Actions), len(model[0].Chunk.Actions[0].Values))
	if err != nil {
		t.Fatal(err)
	}
	n := post.Normalizer()
	for k := range model {
		for i, row := range model[k].Chunk.Actions {
			for j, y := range row.Values {
				x := robot[k].Chunk.Actions[i].Values[j]
				if j == len(row.Values)-1 {
					continue // the gripper, remapped
				}
				// y = x*scale + offset (forward) within float32 rounding.
				if back := float64(x)*n.Scale[j] + n.Offset[j]; math.Abs(back-float64(y)) > 1e-5*math.Max(1, n.Scale[j]) {
					t.Fatalf("chunk %d row %d dim %d: executable %v maps forward to %v, the model row has %v", k, i, j, x, back, y)
				}
			}
		}
	}
	rec, err := replay.Scan(ctx, dir, p.Topics)
	if err != nil {
		t.Fatal(err)
	}
	rec.ApplySchedule(&p)
	rep, err := replay.Run(ctx, rec, replay.Options{Params: p, Backend: tinyBackend(t), BackendInfo: "cpu (test)"})
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Err(); err != nil {
		t.Fatal(err)
	}
	ex := rep.Executable
	if ex == nil || ex.Recorded != 3 || ex.Compared != 3 || ex.Identical != 3 {
		t.Fatalf("executable comparison %+v; want 3 recorded, compared and identical", ex)
	}
}

// refusingLimits sets actions.limits to refuse, in mode refuse, the
// chunks among recorded whose largest executable value of dimension 0
// exceeds the median of those values: the first half, in that order, is
// kept. It returns the kv_seqs refused.
func refusingLimits(t *testing.T, p *params.Params, recorded []replay.Recorded) map[uint64]bool {
	t.Helper()
	peaks := make([]float64, len(recorded))
	for k, c := range recorded {
		peaks[k] = math.Inf(-1)
		for _, row := range c.Chunk.Actions {
			peaks[k] = math.Max(peaks[k], float64(row.Values[0]))
		}
	}
	sorted := slices.Clone(peaks)
	slices.Sort(sorted)
	half := len(sorted) / 2
	if sorted[half-1] == sorted[half] {
		t.Fatalf("chunk peaks %v: no bound between the halves", peaks)
	}
	bound := (sorted[half-1] + sorted[half]) / 2
	dims := len(recorded[0].Chunk.Actions[0].Values)
	lo, hi := make([]string, dims), make([]string, dims)
	for d := range dims {
		lo[d], hi[d] = "-1e9", "1e9"
	}
	hi[0] = strconv.FormatFloat(bound, 'g', -1, 64)
	for name, v := range map[string]string{
		"actions.limits.mode": "refuse",
		"actions.limits.min":  "[" + strings.Join(lo, ",") + "]",
		"actions.limits.max":  "[" + strings.Join(hi, ",") + "]",
	} {
		if err := p.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	refused := map[uint64]bool{}
	for k, c := range recorded {
		if peaks[k] > bound {
			refused[c.Chunk.KVSeq] = true
		}
	}
	return refused
}

// TestRefusedChunksAreOutcomes: a chunk the actions.* limits refuse (in
// refuse mode) is an outcome, counted and reported at once, in replay and
// in bag make. Replaying a bag made without limits with limits that
// refuse half of its chunks names each refused chunk (REFUSED, with the
// reason) and fails; bag make with those limits writes every input and
// the chunks that were not refused, lists the refused ones, and a replay
// of that bag with the same limits passes. Both used to wait for an
// outcome until the chunk timeout, 2 minutes by default, for each refused
// chunk; the short timeout and deadline here make such a wait fail the
// test within seconds.
func TestRefusedChunksAreOutcomes(t *testing.T) {
	const wait = 3 * time.Second // an outcome's wait, far above a tiny chunk's
	ctx := t.Context()
	p := cpuParams(t)
	withPost(t, &p)
	dir := filepath.Join(t.TempDir(), "bag")
	if _, err := replay.MakeBag(ctx, replay.MakeOptions{Dir: dir, Chunks: 4, Cases: tinyCases(t), Backend: tinyBackend(t), Params: p, Timeout: wait}); err != nil {
		t.Fatal(err)
	}
	limited := p
	want := refusingLimits(t, &limited, readChunks(t, dir, p.Actions.Topic))

	replayed := func(t *testing.T, dir string) *replay.Report {
		t.Helper()
		rec, err := replay.Scan(ctx, dir, p.Topics)
		if err != nil {
			t.Fatal(err)
		}
		q := limited
		rec.ApplySchedule(&q)
		deadline, cancel := context.WithTimeout(ctx, 2*wait)
		defer cancel()
		rep, err := replay.Run(deadline, rec, replay.Options{Params: q, Backend: tinyBackend(t), BackendInfo: "cpu (test)", ChunkTimeout: wait})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Timeouts != 0 {
			t.Fatalf("%d pairs timed out: a refused chunk was not taken as an outcome", rep.Timeouts)
		}
		return rep
	}

	t.Run("replay", func(t *testing.T) {
		rep := replayed(t, dir)
		for _, row := range rep.Rows {
			switch {
			case want[row.KVSeq] && (row.Status != replay.StatusRefused || row.Refused != "bounds" ||
				!strings.Contains(row.Note, "refused by the action limits: bounds")):
				t.Errorf("kv_seq %d: %s %q (refused %q), want REFUSED by bounds", row.KVSeq, row.Status, row.Note, row.Refused)
			case !want[row.KVSeq] && row.Status != replay.StatusOK:
				t.Errorf("kv_seq %d: %s %q, want ok", row.KVSeq, row.Status, row.Note)
			}
		}
		err := rep.Err()
		if err == nil || strings.Count(err.Error(), "refused by the action limits: bounds") != len(want) {
			t.Errorf("Err %v, want each of the %d refused chunks named with its reason", err, len(want))
		}
		var table strings.Builder
		if err := rep.WriteTable(&table); err != nil {
			t.Fatal(err)
		}
		summary := fmt.Sprintf("%d refused by the action limits (bounds %d)", len(want), len(want))
		if !strings.Contains(table.String(), summary) {
			t.Errorf("the table's summary does not say %q:\n%s", summary, table.String())
		}
	})

	t.Run("bag make", func(t *testing.T) {
		made := filepath.Join(t.TempDir(), "limited")
		res, err := replay.MakeBag(ctx, replay.MakeOptions{Dir: made, Chunks: 4, Cases: tinyCases(t), Backend: tinyBackend(t), Params: limited, Timeout: wait})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Refused) != len(want) {
			t.Fatalf("refused %v, want %d chunks", res.Refused, len(want))
		}
		for _, r := range res.Refused {
			if !want[uint64(r.Chunk)] || r.Reason != "bounds" || !strings.Contains(r.String(), "refused by the action limits: bounds") {
				t.Errorf("refused %v, want kv_seqs %v by bounds", r, want)
			}
		}
		// Every input, a chunk and an executable chunk per kept one.
		if n := 2*4 + 2*(4-len(want)); res.Messages != n {
			t.Errorf("%d messages, want %d", res.Messages, n)
		}
		rep := replayed(t, made)
		for _, row := range rep.Rows {
			if want[row.KVSeq] && row.Status != replay.StatusRefusedNew {
				t.Errorf("kv_seq %d: %s %q, want refused with nothing recorded", row.KVSeq, row.Status, row.Note)
			}
		}
		if err := rep.Err(); err != nil {
			t.Errorf("the bag's own limits refuse the same chunks, yet: %v", err)
		}
	})
}
