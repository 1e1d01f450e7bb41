package node

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"math"
	"os"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/actions"
	"github.com/fastwam/actionexpert/bag"
	"github.com/fastwam/actionexpert/internal/launchtest"
	"github.com/fastwam/actionexpert/msgs"
	"github.com/fastwam/actionexpert/node/params"
)

var update = flag.Bool("update", false, "rewrite launch/action_expert.params.yaml from the defaults")

const paramsHeader = `# Parameters of the Fast-WAM action-expert node (package fastwam_action_expert)
# with their defaults. The launch files read this file first (params_file:=...
# names another one); htp.context_binary (or backend: "cpu" with cpu.weights)
# must be set for the node to start.
#
# Generated from package node: go test ./node -run TestLaunchFiles -update
`

// TestLaunchFiles keeps the launch directory in step with the parameters:
// the params file is the rendering of the defaults, and both launch files
// declare every parameter as an argument.
func TestLaunchFiles(t *testing.T) {
	p := params.Default()
	want := append([]byte(paramsHeader), p.ParamsYAML("/**")...)
	const path = "../launch/action_expert.params.yaml"
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not the rendering of params.Default; run go test ./node -run TestLaunchFiles -update", path)
	}
	q := params.Default()
	if err := q.ApplyParamsYAML(got, "/fastwam_action_expert"); err != nil {
		t.Errorf("%s: %v", path, err)
	}

	launchtest.CheckArgs(t, "../launch/action_expert.launch.py", "../launch/action_expert.launch.xml", params.Names())

	// The Python launch file builds its description with the package's
	// shared module, which CMakeLists.txt installs beside the messages.
	py, err := os.ReadFile("../launch/action_expert.launch.py")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(py, []byte("node_launch_description('fastwam_node', 'fastwam_action_expert', 'action_expert.params.yaml', PARAMETERS)")) {
		t.Errorf("action_expert.launch.py does not start fastwam_node as fastwam_action_expert with action_expert.params.yaml")
	}
	cmake, err := os.ReadFile("../CMakeLists.txt")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(cmake, []byte("python/fastwam_action_expert/launching.py")) {
		t.Errorf("CMakeLists.txt does not install python/fastwam_action_expert/launching.py, which the launch files import")
	}
}

// TestLiberoParams loads launch/libero.params.yaml, runs the model rows of
// the regression bag's chunks (golden/regression) and of actions/testdata
// through the post-processing it configures, with the statistics of
// actions/testdata/dataset_stats.json, and checks every value against a
// transcription of upstream FastWAM's LIBERO evaluation
// (experiments/libero/eval_libero_single.py, _predict_action_chunk):
// normalizer.backward in min/max mode with the global statistics, then
// action[..., -1] = action[..., -1]*2 - 1, invert_gripper_action (the
// last dimension negated) and, with binarize_gripper, np.sign.
func TestLiberoParams(t *testing.T) {
	text, err := os.ReadFile("../launch/libero.params.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := params.Default()
	if err := p.ApplyParamsYAML(text, "/fastwam_action_expert"); err != nil {
		t.Fatalf("libero.params.yaml: %v", err)
	}
	if p.ControlPeriod != 50*time.Millisecond {
		t.Errorf("libero.params.yaml: control_period %v, want LIBERO's 20 Hz", p.ControlPeriod)
	}
	if p.Actions.Post.Stats != "" {
		t.Errorf("libero.params.yaml sets actions.stats_file %q: the checkpoint's file is the user's to give", p.Actions.Post.Stats)
	}
	const statsFile = "../actions/testdata/dataset_stats.json"
	p.Actions.Post.Stats = statsFile
	p.Backend, p.CPU.Weights = params.BackendCPU, "unused"
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}

	// The statistics, read here as upstream's load_dataset_stats_from_json does.
	var stats struct {
		Action map[string]struct {
			Min []float64 `json:"global_min"`
			Max []float64 `json:"global_max"`
		} `json:"action"`
	}
	b, err := os.ReadFile(statsFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &stats); err != nil {
		t.Fatal(err)
	}
	st := stats.Action["default"]
	const tokens, dim = 32, 7
	if len(st.Min) != dim || len(st.Max) != dim {
		t.Fatalf("%s: global_min/max of %d/%d values, want %d", statsFile, len(st.Min), len(st.Max), dim)
	}
	// upstream, per dimension j and model value y of row i.
	upstream := func(j int, y float32) float32 {
		lo, hi := st.Min[j], st.Max[j]
		scale, offset := 2/(hi-lo), -1-2/(hi-lo)*lo // range [-1, 1]
		if hi-lo < 1e-4 {
			scale, offset = 1, 0-lo
		}
		a := float32((float64(y) - offset) / scale) // normalizer.backward, a float32 tensor
		if j == dim-1 {
			a = a*2 - 1 // 0 = close, 1 = open -> [-1, 1]
			a = -a      // invert_gripper_action: LIBERO's -1 = open
			switch {    // binarize_gripper: np.sign
			case a > 0:
				a = 1
			case a < 0:
				a = -1
			}
		}
		return a
	}

	var chunks [][]float32
	r, err := bag.Open("../golden/regression")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for m, err := range r.Messages(context.Background()) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Topic != "/action_chunk" {
			continue
		}
		var c msgs.ActionChunk
		if err := c.UnmarshalCDR(m.Data); err != nil {
			t.Fatal(err)
		}
		var rows []float32
		for _, row := range c.Actions {
			rows = append(rows, row.Values...)
		}
		chunks = append(chunks, rows)
	}
	var golden struct{ Y []uint32 } // float32 bit patterns, row-major
	if b, err = os.ReadFile("../actions/testdata/golden.json"); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, len(golden.Y))
	for i, bits := range golden.Y {
		y[i] = math.Float32frombits(bits)
	}
	chunks = append(chunks, y)
	if len(chunks) != 9 {
		t.Fatalf("%d chunks, want the regression bag's 8 and the golden's rows", len(chunks))
	}

	post, err := actions.New(p.Actions.Post, tokens, dim)
	if err != nil {
		t.Fatal(err)
	}
	stamp := time.Unix(1_700_000_000, 0)
	var agree, grippers int
	for k, y := range chunks {
		if len(y) != tokens*dim {
			t.Fatalf("chunk %d: %d values, want %d", k, len(y), tokens*dim)
		}
		post.Reset()
		got := make([]float32, len(y))
		if _, err := post.Apply(got, y, stamp, p.ControlPeriod); err != nil {
			t.Fatalf("chunk %d: %v", k, err)
		}
		for i := range tokens {
			for j := range dim {
				want := upstream(j, y[i*dim+j])
				if g := got[i*dim+j]; g != want {
					t.Errorf("chunk %d row %d dim %d: model %v -> %v, upstream's LIBERO steps give %v", k, i, j, y[i*dim+j], g, want)
				}
			}
			if g := got[i*dim+dim-1]; g == 1 || g == -1 {
				agree++
			}
			grippers++
		}
	}
	t.Logf("%d chunks, %d gripper values, %d of them +-1", len(chunks), grippers, agree)
}
