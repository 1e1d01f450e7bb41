package replay_test

import (
	"context"
	"math"
	"path/filepath"
	"testing"

	"github.com/fastwam/actionexpert/actions"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/replay"
)

// withPost sets the actions.* post-processing of the test's stats file.
func withPost(t *testing.T, p *node.Params) {
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
	p := params(t)
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
