package executor

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/internal/launchtest"
	"github.com/fastwam/actionexpert/internal/rosparam"
	"github.com/fastwam/actionexpert/node"
	"github.com/fastwam/actionexpert/node/params"
)

const fqn = "/fastwam_executor"

func TestDefaultParamsValidate(t *testing.T) {
	p := DefaultParams()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if p.ControlPeriod != 50*time.Millisecond || p.AggregationWeight != 0.7 || p.Aggregation != AggregateLatest ||
		p.OnStarvation != StarveHold || p.ActionDim != 7 || p.Topics.Chunks != "action_chunk" || p.Topics.Action != "action" {
		t.Fatalf("defaults %+v", p)
	}
}

func TestLoadParams(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	text := "fastwam_executor:\n  ros__parameters:\n    aggregation: weighted_average\n    qos:\n      action:\n        depth: 3\n"
	if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := LoadParams([]string{"--ros-args", "--params-file", file, "-p", "control_period:=0.1",
		"-p", "aggregation_weight:=0.25", "-p", "other_node:action_dim:=3", "-p", "on_starvation:=stop", "-p", "action_dim:=0"}, fqn)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultParams()
	want.Aggregation, want.ControlPeriod, want.AggregationWeight, want.OnStarvation, want.ActionDim = AggregateWeighted, 100*time.Millisecond, 0.25, StarveStop, 0
	want.QoS.Action.Depth = 3
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("got %+v\nwant %+v", p, want)
	}
}

func TestParamErrors(t *testing.T) {
	for rule, want := range map[string]string{
		"control_period:=0":            `parameter "control_period": must be a number of seconds in [0.001, 60], got 0`,
		"control_period:=.nan":         `must be a number of seconds in [0.001, 60], got NaN`,
		"control_period:=fast":         `parameter "control_period": expected double, got string "fast"`,
		"aggregation:=median":          `parameter "aggregation": must be one of "latest", "average", "weighted_average", got "median"`,
		"aggregation_weight:=0":        `parameter "aggregation_weight": must be in (0, 1], got 0`,
		"aggregation_weight:=1.5":      `must be in (0, 1], got 1.5`,
		"on_starvation:=coast":         `must be one of "hold", "stop", got "coast"`,
		"action_dim:=-1":               `parameter "action_dim": must be in [0, 65536], got -1`,
		"action_dim:=7.0":              `expected integer, got double 7.0`,
		"qos.action.reliability:=sure": `must be "reliable" or "best_effort", got "sure"`,
		"qos.action_chunk.depth:=0":    `must be in [1, 1000], got 0`,
		"shutdown_grace:=0":            `must be a number of seconds in [0.01, `,
		"contrl_period:=0.05":          `unknown parameter "contrl_period" of the executor (did you mean "control_period"?)`,
		"topics.action:=":              `parameter "topics.action": topic name is empty`,
		"topics.action:=\"a\\0b\"":     `parameter "topics.action": topic name "a\x00b" is not a valid ROS topic name: it holds "\x00" at byte 1`,
		"topics.action_chunk:=~chunk":  `parameter "topics.action_chunk": topic name "~chunk" is not a valid ROS topic name: '~' is not followed by '/' at byte 1`,
		"topics.action:=action_chunk":  `parameters "topics.action_chunk" and "topics.action" name the same topic "/action_chunk" in node /fastwam_executor (given as "action_chunk" and "action_chunk")`,
		"diagnostics_period:=100":      `parameter "diagnostics_period": must be a number of seconds in [0.001, 60], got 100`,
	} {
		_, err := LoadParams([]string{"--ros-args", "-p", rule}, fqn)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", rule, err, want)
		}
	}
}

func TestEveryDefaultSetsItself(t *testing.T) {
	p := DefaultParams()
	for _, d := range paramDefs() {
		if d.Doc == "" {
			t.Errorf("parameter %q has no description", d.Name)
		}
		text := string(bytes.TrimSpace(p.ParamsYAML("/**")))
		if !strings.Contains(text, " "+d.Name[strings.LastIndex(d.Name, ".")+1:]+":") {
			t.Errorf("%s missing from the params YAML", d.Name)
		}
	}
	q := DefaultParams()
	q.Aggregation, q.ControlPeriod, q.Topics.Action = AggregateAverage, 20*time.Millisecond, "/arm/action"
	for _, p := range []Params{DefaultParams(), q} {
		r := DefaultParams()
		if err := r.ApplyParamsYAML(p.ParamsYAML("/**"), fqn); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(p, r) {
			t.Errorf("round trip:\n%+v\n%+v", p, r)
		}
	}
}

var update = flag.Bool("update", false, "rewrite launch/executor.params.yaml from the defaults")

const paramsHeader = `# Parameters of the Fast-WAM chunk executor (fastwam_executor, package
# fastwam_action_expert) with their defaults. The executor launch files read
# this file first (params_file:=... names another one).
#
# Generated from package executor: go test ./executor -run TestLaunchFiles -update
`

// TestLaunchFiles keeps launch/executor.* in step with the parameters: the
// params file is the rendering of the defaults, and both launch files
// declare every parameter as an argument.
func TestLaunchFiles(t *testing.T) {
	p := DefaultParams()
	want := append([]byte(paramsHeader), p.ParamsYAML("/**")...)
	const path = "../launch/executor.params.yaml"
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
		t.Errorf("%s is not the rendering of DefaultParams; run go test ./executor -run TestLaunchFiles -update", path)
	}
	// The file's section is /**, so the action expert, given it, skips the
	// executor's own parameters (as rclcpp does) and names them.
	np := params.Default()
	var ignored []string
	if err := np.ApplyParamsYAML(got, "/fastwam_action_expert", rosparam.ReportIgnored(func(_ string, names []string) { ignored = names })); err != nil {
		t.Errorf("the action expert refused the executor's /** params file: %v", err)
	}
	if !slices.Contains(ignored, "aggregation") {
		t.Errorf("the action expert did not report the executor's parameters as ignored: %q", ignored)
	}

	launchtest.CheckArgs(t, "../launch/executor.launch.py", "../launch/executor.launch.xml", ParamNames())
	for _, f := range []string{"../launch/executor.launch.py"} {
		text, _ := os.ReadFile(f)
		if !strings.Contains(string(text), "node_launch_description('fastwam_executor', 'fastwam_executor', 'executor.params.yaml', PARAMETERS)") {
			t.Errorf("%s does not start fastwam_executor with executor.params.yaml", f)
		}
	}
}

// TestCMakeListsBuildsTheExecutor: colcon builds and installs the
// executor beside the action expert's node (and the world model's).
func TestCMakeListsBuildsTheExecutor(t *testing.T) {
	text, err := os.ReadFile("../CMakeLists.txt")
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`foreach\(_bin fastwam_node fastwam_executor( fastwam_world_model)?\)`).Match(text) {
		t.Error("CMakeLists.txt does not build fastwam_executor beside fastwam_node")
	}
}

// The shared bringup file is accepted by the executor too.
func TestSharedBringupParamsFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bringup.yaml")
	if err := os.WriteFile(file, []byte("/**:\n  ros__parameters: {use_sim_time: true, robot_base_frame: base_link}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var ignored []string
	p, err := LoadParams([]string{"--ros-args", "--params-file", file}, fqn,
		rosparam.ReportIgnored(func(sec string, names []string) { ignored = append(ignored, sec+":"+strings.Join(names, ",")) }))
	if err != nil {
		t.Fatalf("shared bringup file refused: %v", err)
	}
	if !p.UseSimTime || !reflect.DeepEqual(ignored, []string{"/**:robot_base_frame"}) {
		t.Errorf("use_sim_time %v, ignored %q", p.UseSimTime, ignored)
	}
	if err := os.WriteFile(file, []byte("fastwam_executor:\n  ros__parameters: {robot_base_frame: base_link}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadParams([]string{"--ros-args", "--params-file", file}, fqn); err == nil || !strings.Contains(err.Error(), `unknown parameter "robot_base_frame" of the executor`) {
		t.Errorf("own section: err = %v", err)
	}
}

// TestTopicParameters: topics.hold and output.gripper_topic are validated
// as topic names, and no two of the executor's topics, its fixed ones
// included, may resolve alike in its namespace; each error names both.
func TestTopicParameters(t *testing.T) {
	for _, c := range []struct {
		fqn  string
		args []string
		want string
	}{
		{fqn, []string{"topics.hold:=/action"}, `parameters "topics.action" and "topics.hold" name the same topic "/action" in node /fastwam_executor (given as "action" and "/action")`},
		{fqn, []string{"output.gripper_topic:=/diagnostics"}, `parameters "topics.diagnostics" and "output.gripper_topic" name the same topic "/diagnostics"`},
		{fqn, []string{"output.gripper_topic:=action_chunk"}, `parameters "topics.action_chunk" and "output.gripper_topic" name the same topic "/action_chunk"`},
		{fqn, []string{"output.gripper_topic:=hold"}, `parameters "topics.hold" and "output.gripper_topic" name the same topic "/hold"`},
		{fqn, []string{"topics.hold:=diagnostics"}, `parameters "topics.diagnostics" and "topics.hold" name the same topic "/diagnostics"`},
		{fqn, []string{"topics.hold:='my hold'"}, `parameter "topics.hold": topic name "my hold" is not a valid ROS topic name: it holds " " at byte 2`},
		{fqn, []string{"output.gripper_topic:='grip per'"}, `parameter "output.gripper_topic": topic name "grip per" is not a valid ROS topic name: it holds " " at byte 4`},
		{fqn, []string{"output.gripper_topic:=rosout"}, `parameter "output.gripper_topic" names the topic "/rosout" in node /fastwam_executor, the log topic every ROS node publishes`},
		{fqn, []string{"topics.action:=/parameter_events"}, `parameter "topics.action" names the topic "/parameter_events"`},
		{fqn, []string{"use_sim_time:=true", "topics.hold:=/clock"}, `parameter "topics.hold" names the topic "/clock" in node /fastwam_executor, the clock topic`},
		{fqn, []string{"topics.hold:=/clock"}, ""}, // no /clock without sim time
		{"/arm/fastwam_executor", []string{"topics.hold:=/action"}, ""},
		{"/arm/fastwam_executor", []string{"topics.hold:=/arm/action"}, `name the same topic "/arm/action" in node /arm/fastwam_executor`},
		{"/arm/fastwam_executor", []string{"topics.hold:=~/x", "output.gripper_topic:=/arm/fastwam_executor/x"}, `parameters "topics.hold" and "output.gripper_topic" name the same topic "/arm/fastwam_executor/x"`},
		{fqn, []string{"topics.hold:=''", "output.gripper_topic:=gripper"}, ""},
	} {
		args := []string{"--ros-args"}
		for _, a := range c.args {
			args = append(args, "-p", a)
		}
		_, err := LoadParams(args, c.fqn)
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want %q", c.fqn, c.args, err, c.want)
		}
	}
	// New, too, resolves in the executor's name.
	p := DefaultParams()
	p.Topics.Hold = "/action"
	if _, err := New(Config{Params: p}, node.NewBus()); err == nil || !strings.Contains(err.Error(), `"topics.hold"`) {
		t.Errorf("New with topics.hold /action: %v", err)
	}
	if _, err := New(Config{Params: p, Name: "/arm/fastwam_executor"}, node.NewBus()); err != nil {
		t.Errorf("New in /arm with topics.hold /action: %v", err)
	}
}
