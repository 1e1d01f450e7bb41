package node

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/actions"
	"github.com/fastwam/actionexpert/msgs"
)

// robotChunks subscribes to the executable-actions topic of h.
func robotChunks(t *testing.T, h *harness, topic string) chan msgs.ActionChunk {
	ch := make(chan msgs.ActionChunk, 64)
	if err := h.bus.Subscribe(Topic{Name: topic, Type: msgs.TypeActionChunk}, func(data []byte) {
		var m msgs.ActionChunk
		if err := m.UnmarshalCDR(data); err != nil {
			t.Errorf("executable ActionChunk does not decode: %v", err)
			return
		}
		ch <- m
	}); err != nil {
		t.Fatal(err)
	}
	return ch
}

// TestActionsPostProcessing: with actions.* set, the model's rows still go
// out unchanged on topics.actions and the executable rows on actions.topic.
func TestActionsPostProcessing(t *testing.T) {
	d := tinyDims()
	p := testParams()
	for name, v := range map[string]string{
		"actions.norm_mode": `"-2/2"`, "actions.gripper.affine": "true", "actions.gripper.invert": "true",
	} {
		if err := p.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	h := newHarness(t, p, newTestBackend(d))
	robot := robotChunks(t, h, p.Actions.Topic)
	h.waitState(StateActive)
	in := makeInputs(d, 1, time.Unix(1_700_000_000, 0))
	h.send(in)
	m := h.waitChunk()
	raw := expectedActions(t, d, in, 3, 5, in.kv.Seq)
	sameFloats(t, "model rows on "+p.Topics.Actions, flatten(m), raw)
	var r msgs.ActionChunk
	select {
	case r = <-robot:
	case <-time.After(10 * time.Second):
		t.Fatal("no executable chunk")
	}
	if r.Seq != m.Seq || r.Header != m.Header || r.Dt != m.Dt || r.InferenceDelay != m.InferenceDelay {
		t.Errorf("executable chunk's metadata %+v differs from the model's chunk", r)
	}
	// Constant bounds -2/2: scale 0.5, offset 0, so x = 2y; the gripper
	// then 2x - 1, negated.
	for i, v := range flatten(r) {
		want := float32(2 * float64(raw[i]))
		if i%d.ActionDim == d.ActionDim-1 {
			want = float32(-(2*float64(want) - 1))
		}
		if v != want {
			t.Fatalf("executable value %d = %v, want %v (model row value %v)", i, v, want, raw[i])
		}
	}
	s := h.diag()
	if got := diagValue(t, s, "actions.norm_mode"); got != "-2/2" {
		t.Errorf("diagnostics actions.norm_mode = %q", got)
	}
}

// TestActionsLimitsRefuse: a chunk over a limit in refuse mode goes out on
// neither topic, is counted by reason in the diagnostics (WARN), and the
// next chunk within the limits is published again. A one-sided limit,
// actions.limits.min or actions.limits.max set alone (from -p), refuses
// too.
func TestActionsLimitsRefuse(t *testing.T) {
	for _, limits := range [][]string{
		{"actions.limits.min:=[-1e-6]", "actions.limits.max:=[1e-6]"},
		{"actions.limits.max:=[-1e6]"},
		{"actions.limits.min:=[1e6]"},
	} {
		t.Run(strings.Join(limits, " "), func(t *testing.T) { testActionsLimitsRefuse(t, limits) })
	}
}

func testActionsLimitsRefuse(t *testing.T, limits []string) {
	d := tinyDims()
	p := testParams()
	args := []string{"--ros-args", "-p", "actions.limits.mode:=refuse"}
	for _, l := range limits {
		args = append(args, "-p", l)
	}
	if err := p.ApplyROSArgs(args, "/fastwam_action_expert"); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, p, newTestBackend(d))
	robot := robotChunks(t, h, p.Actions.Topic)
	h.waitState(StateActive)
	h.send(makeInputs(d, 1, time.Unix(1_700_000_000, 0)))
	h.noChunk(300 * time.Millisecond)
	select {
	case m := <-robot:
		t.Fatalf("refused chunk %d published on %s", m.Seq, p.Actions.Topic)
	default:
	}
	s := h.diag()
	if s.Level != msgs.LevelWarn || !strings.Contains(s.Message, "refused") {
		t.Errorf("diagnostics level %d %q; want WARN naming the refusal", s.Level, s.Message)
	}
	if got := diagValue(t, s, "actions.refused.bounds"); got != "1" {
		t.Errorf("actions.refused.bounds = %q, want 1", got)
	}
	if h.log.count("refused by the action limits") != 1 {
		t.Errorf("refusal not logged once:\n%s", h.log)
	}
}

// TestActionsLimitsClamp: in clamp mode every executable value is within
// its bounds and its step limit, the chunk says clipped, the model's rows
// are unchanged.
func TestActionsLimitsClamp(t *testing.T) {
	d := tinyDims()
	p := testParams()
	p.Actions.Post.Limits = actions.Limits{Min: []float64{-0.05}, Max: []float64{0.05}, MaxStep: []float64{0.01}}
	h := newHarness(t, p, newTestBackend(d))
	robot := robotChunks(t, h, p.Actions.Topic)
	h.waitState(StateActive)
	in := makeInputs(d, 1, time.Unix(1_700_000_000, 0))
	h.send(in)
	m := h.waitChunk()
	sameFloats(t, "model rows", flatten(m), expectedActions(t, d, in, 3, 5, in.kv.Seq))
	r := <-robot
	if !r.Clipped {
		t.Error("clamped executable chunk not flagged clipped")
	}
	x := flatten(r)
	for i, v := range x {
		if v < -0.05 || v > 0.05 {
			t.Fatalf("value %d = %v outside [-0.05, 0.05]", i, v)
		}
		if i >= d.ActionDim && math.Abs(float64(v-x[i-d.ActionDim])) > 0.01+1e-7 {
			t.Fatalf("value %d steps by %v > 0.01", i, v-x[i-d.ActionDim])
		}
	}
	if got := diagValue(t, h.diag(), "actions.clamped"); got != "1" {
		t.Errorf("actions.clamped = %q, want 1", got)
	}
}

// TestActionsConfigErrors: a bad stats file or shape stops New, naming it.
func TestActionsConfigErrors(t *testing.T) {
	d := tinyDims()
	p := testParams()
	if err := p.Set("actions.norm_mode", "min/max"); err != nil {
		t.Fatal(err)
	}
	if err := p.Validate(); err == nil || !strings.Contains(err.Error(), "actions.stats_file") {
		t.Errorf("min/max without a stats file: %v", err)
	}
	p.Actions.Post.Stats = "../actions/testdata/dataset_stats.json"
	p.Actions.Post.Key = "libero"
	if _, err := New(Config{Params: p}, newTestBackend(d), NewBus()); err == nil || !strings.Contains(err.Error(), `"libero"`) {
		t.Errorf("missing key: %v", err)
	}
	p.Actions.Post.Key = "other" // 4 dimensions, not 7
	if _, err := New(Config{Params: p}, newTestBackend(d), NewBus()); err == nil || !strings.Contains(err.Error(), "want 7") {
		t.Errorf("wrong dimension: %v", err)
	}
	p.Actions.Post.Key = "default"
	if _, err := New(Config{Params: p}, newTestBackend(d), NewBus()); err != nil {
		t.Errorf("good stats: %v", err)
	}
	for _, c := range []struct{ min, max, want string }{
		{"[1.0]", "[0.0]", `parameters "actions.limits.*": limit 0: want limits.min <= limits.max, got [1, 0]`},
		{"[0.0, 0.0]", "[1.0, 1.0, 1.0]", `parameters "actions.limits.*": limits.min has 2 values and limits.max 3`},
		{"[2.0]", "[3.0, 1.0]", `limit 1: want limits.min <= limits.max, got [2, 1]`},
	} {
		q := testParams()
		if err := q.Set("actions.limits.min", c.min); err != nil {
			t.Fatal(err)
		}
		if err := q.Set("actions.limits.max", c.max); err != nil {
			t.Fatal(err)
		}
		if err := q.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("min %s max %s: %v, want an error containing %q", c.min, c.max, err, c.want)
		}
	}
	q := testParams()
	if err := q.Set("actions.topic", `"`+q.Topics.Actions+`"`); err != nil {
		t.Fatal(err)
	}
	q.Actions.Post.Gripper.Invert = true
	if err := q.Validate(); err == nil || !strings.Contains(err.Error(), "actions.topic") {
		t.Errorf("same topic twice: %v", err)
	}
}

// TestManagedActionsTopic: the managed (lifecycle) node publishes the
// executable chunks too; before, its transport refused the second
// publisher and configure failed ("managed node has no publisher
// robot_action_chunk", seen on the Humble build).
func TestManagedActionsTopic(t *testing.T) {
	p := testParams()
	p.SelfTest.Skip = true
	p.Actions.Post.Gripper.Invert = true
	r := newManagedRig(t, p)
	robot := make(chan msgs.ActionChunk, 8)
	if err := r.bus.Subscribe(Topic{Name: p.Actions.Topic, Type: msgs.TypeActionChunk}, func(b []byte) {
		var c msgs.ActionChunk
		if err := c.UnmarshalCDR(b); err != nil {
			t.Error(err)
		}
		robot <- c
	}); err != nil {
		t.Fatal(err)
	}
	if err := r.m.Configure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.m.Activate(); err != nil {
		t.Fatal(err)
	}
	r.send(makeInputs(tinyDims(), 1, time.Unix(1_700_000_000, 0)))
	m := r.chunk()
	select {
	case c := <-robot:
		last := len(c.Actions[0].Values) - 1
		if c.Seq != m.Seq || c.Actions[0].Values[last] != -m.Actions[0].Values[last] {
			t.Errorf("executable chunk %d gripper %v; model chunk %d gripper %v", c.Seq, c.Actions[0].Values[last], m.Seq, m.Actions[0].Values[last])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no executable chunk from the managed node")
	}
}
