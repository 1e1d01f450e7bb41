package params

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/internal/rosparam"
)

const fqn = "/fastwam_action_expert"

// ros wraps rules in --ros-args ... -- with a non-ROS argument on each side.
func ros(rules ...string) []string {
	return append(append([]string{"--verbose", "--ros-args"}, rules...), "--", "-p", "steps:=999")
}

func writeFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "params.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestDefaultsNeedABackendInput(t *testing.T) {
	_, err := Load(nil, fqn)
	if err == nil || !strings.Contains(err.Error(), `"htp.context_binary"`) {
		t.Fatalf("defaults: %v, want an error naming htp.context_binary", err)
	}
	p, err := Load(ros("-p", "htp.context_binary:=/models/action_step.bin"), fqn)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.HTP.ContextBinary = "/models/action_step.bin"
	if !reflect.DeepEqual(p, want) {
		t.Errorf("got %+v\nwant %+v", p, want)
	}
}

func TestCommandLineParameters(t *testing.T) {
	p, err := Load(ros(
		"-p", "backend:=cpu",
		"--param", "cpu.weights:=/w/expert.safetensors",
		"-p", "cpu.threads:=2",
		"-p", "steps:=4",
		"-p", "shift:=3", // an integer where a double is declared
		"-p", "noise_seed:=42",
		"-p", "topics.kv_cache:=/wm/kv",
		"-p", "qos.kv_cache.reliability:=best_effort",
		"-p", "qos.actions.durability:=transient_local",
		"-p", "qos.actions.history:=keep_all",
		"-p", "qos.context.depth:=7",
		"-p", "sync.policy:=latest",
		"-p", "sync.buffer:=8",
		"-p", "sync.timeout:=0.25",
		"-p", "max_input_age:=0",
		"-p", "clip.min:=[-1, -0.5, -1, -1, -1, -1, -1.0]",
		"-p", "clip.max:=1", // a scalar where an array is declared
		"-p", "clip.max:=[1, 0.5, 1, 1, 1, 1, 1]",
		"-p", "dry_run:=true",
		"-p", "htp.performance_mode:=power_saver",
		"-p", "htp.shared_buffers:=false",
		"-p", "self_test.golden:=/g/case.npz",
		"-p", "self_test.skip:=yes",
		"-p", "self_test.min_cosine:=0.99",
		"-r", "steps:=5", // a remap rule, not a parameter
		"--log-level", "debug",
		"-p", "other_node:steps:=6", // for another node
		"-p", "fastwam_action_expert:noise_seed:=43",
	), fqn)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Backend = BackendCPU
	want.CPU = CPUParams{Weights: "/w/expert.safetensors", Threads: 2}
	want.Steps, want.Shift, want.NoiseSeed = 4, 3, 43
	want.Topics.KVCache = "/wm/kv"
	want.QoS.KVCache.Reliability = ReliabilityBestEffort
	want.QoS.Actions.Durability = DurabilityTransientLocal
	want.QoS.Actions.History = HistoryKeepAll
	want.QoS.Context.Depth = 7
	want.Sync = SyncParams{Policy: SyncLatest, Buffer: 8, Timeout: 250 * time.Millisecond}
	want.MaxInputAge = 0
	want.ClipMin = []float64{-1, -0.5, -1, -1, -1, -1, -1}
	want.ClipMax = []float64{1, 0.5, 1, 1, 1, 1, 1}
	want.DryRun = true
	want.HTP.PerformanceMode = "power_saver"
	want.HTP.SharedBuffers = false
	want.SelfTest = SelfTestParams{Golden: "/g/case.npz", Skip: true, MinCosine: 0.99}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("got  %+v\nwant %+v", p, want)
	}
}

func TestCommandLineErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string // substrings of the error
	}{
		{ros("-p", "stesp:=4"), []string{`unknown parameter "stesp"`, `did you mean "steps"`}},
		{ros("-p", "frobnicate:=1"), []string{`unknown parameter "frobnicate"`}},
		{ros("-p", "steps:=4.5"), []string{`"steps"`, "expected integer, got double 4.5"}},
		{ros("-p", "steps:=four"), []string{`"steps"`, `expected integer, got string "four"`}},
		{ros("-p", "steps:=0"), []string{`"steps"`, "[1, 1000]"}},
		{ros("-p", "dry_run:='true'"), []string{`"dry_run"`, `expected bool, got string "true"`}},
		{ros("-p", "dry_run:=1"), []string{`"dry_run"`, "expected bool, got integer 1"}},
		{ros("-p", "backend:=gpu"), []string{`"backend"`, `"htp" or "cpu", got "gpu"`}},
		{ros("-p", "backend:=true"), []string{`"backend"`, "expected string, got bool"}},
		{ros("-p", "shift:=-1"), []string{`"shift"`, "positive"}},
		{ros("-p", "shift:=.nan"), []string{`"shift"`, "positive"}},
		{ros("-p", "noise_seed:=-1"), []string{`"noise_seed"`, "negative"}},
		{ros("-p", "clip.min:=[-1, low]"), []string{`"clip.min"`, "element 1"}},
		{ros("-p", "clip.min:=[[1]]"), []string{`"clip.min"`, "scalar"}},
		{ros("-p", "sync.policy:=approximate"), []string{`"sync.policy"`, `"exact" or "latest"`}},
		{ros("-p", "sync.timeout:=-0.5"), []string{`"sync.timeout"`, "seconds"}},
		{ros("-p", "qos.kv_cache.reliability:=sometimes"), []string{`"qos.kv_cache.reliability"`, "best_effort"}},
		{ros("-p", "qos.kv_cache.depth:=0"), []string{`"qos.kv_cache.depth"`}},
		{ros("-p", "htp.performance_mode:=turbo"), []string{`"htp.performance_mode"`, "burst"}},
		{ros("-p", "self_test.min_cosine:=1.5"), []string{`"self_test.min_cosine"`}},
		{ros("-p", "steps"), []string{"name:=value"}},
		{ros("-p", ":=3"), []string{"name:=value"}},
		{[]string{"--ros-args", "-p"}, []string{"-p needs a value"}},
		{[]string{"--ros-args", "--params-file"}, []string{"--params-file needs a value"}},
		{ros("--params-file", "/nonexistent/params.yaml"), []string{"params file", "/nonexistent/params.yaml"}},
	} {
		_, err := Load(c.args, fqn)
		if err == nil {
			t.Errorf("%v: no error", c.args)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q does not contain %q", c.args, err, w)
			}
		}
	}
}

// TestTopicNameFromParamsFile: a YAML escape can put a NUL into a topic
// name that no command line can; it is refused like any invalid name.
func TestTopicNameFromParamsFile(t *testing.T) {
	p := Default()
	p.HTP.ContextBinary = "/m.bin"
	if err := p.ApplyParamsYAML([]byte("/**:\n  ros__parameters:\n    topics:\n      kv_cache: \"kv\\0cache\"\n"), fqn); err != nil {
		t.Fatal(err)
	}
	want := `parameter "topics.kv_cache": topic name "kv\x00cache" is not a valid ROS topic name: it holds "\x00" at byte 2`
	if err := p.Validate(); err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("got %v, want %s...", err, want)
	}
}

func TestValidateAcrossParameters(t *testing.T) {
	base := []string{"-p", "htp.context_binary:=/m.bin"}
	for _, c := range []struct {
		rules []string
		want  string
	}{
		{[]string{"-p", "backend:=cpu"}, `"cpu.weights"`},
		{[]string{"-p", "clip.min:=[-1]", "-p", "clip.max:=[1, 1]"}, "same length"},
		{[]string{"-p", "clip.min:=[1]", "-p", "clip.max:=[-1]"}, "clip.min <= clip.max"},
		{[]string{"-p", "topics.context:=video_kv_cache"}, "same topic"},
		{[]string{"-p", "topics.actions:=' '"}, `parameter "topics.actions": topic name " " is not a valid ROS topic name: it holds " " at byte 0`},
		{[]string{"-p", "topics.actions:=''"}, `parameter "topics.actions": topic name is empty`},
		{[]string{"-p", "topics.context:=" + strings.Repeat("c", 248)}, `parameter "topics.context": topic name "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"... is 248 bytes long, more than the 247 rmw allows`},
		{[]string{"-p", "topics.diagnostics:=/diag//x"}, `parameter "topics.diagnostics": topic name "/diag//x" is not a valid ROS topic name: it repeats '/' at byte 6`},
		{[]string{"-p", "sync.timeout:=0"}, `"sync.timeout" must be positive`},
	} {
		_, err := Load(ros(append(base, c.rules...)...), fqn)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.rules, err, c.want)
		}
	}
	if _, err := Load(ros(append(base, "-p", "use_sim_time:=false")...), fqn); err != nil {
		t.Errorf("use_sim_time false: %v", err)
	}
}

// TestTopicParameters: actions.topic and shm.topic are validated as topic
// names (in use, or when set), and no two of the node's topics, its fixed
// ones included, may resolve alike in its namespace; each error names
// both parameters (or the parameter and the fixed topic).
func TestTopicParameters(t *testing.T) {
	base := []string{"-p", "htp.context_binary:=/m.bin"}
	post := []string{"-p", "actions.gripper.invert:=true"} // any actions.* stage publishes actions.topic
	for _, c := range []struct {
		fqn   string
		rules []string
		want  string
	}{
		{fqn, append(post, "-p", "actions.topic:='robot chunk'"), `parameter "actions.topic": topic name "robot chunk" is not a valid ROS topic name: it holds " " at byte 5`},
		{fqn, []string{"-p", "actions.topic:='robot chunk'"}, `parameter "actions.topic": topic name "robot chunk"`}, // set, though not in use
		{fqn, []string{"-p", "actions.topic:=''"}, ""},
		{fqn, []string{"-p", "shm.topic:='kv handoff'"}, `parameter "shm.topic": topic name "kv handoff" is not a valid ROS topic name`},
		{fqn, append(post, "-p", "actions.topic:=/action_chunk"), `parameters "topics.actions" and "actions.topic" name the same topic "/action_chunk" in node /fastwam_action_expert (given as "action_chunk" and "/action_chunk")`},
		{fqn, append(post, "-p", "actions.topic:=/diagnostics"), `parameters "topics.diagnostics" and "actions.topic" name the same topic "/diagnostics"`},
		{fqn, []string{"-p", "actions.topic:=/diagnostics"}, ""}, // not published without actions.*
		{fqn, []string{"-p", "topics.context:=/video_kv_cache"}, `parameters "topics.kv_cache" and "topics.context" name the same topic "/video_kv_cache"`},
		{fqn, []string{"-p", "kv_transport:=shm", "-p", "shm.topic:=text_context"}, `parameters "shm.topic" and "topics.context" name the same topic "/text_context"`},
		{fqn, []string{"-p", "kv_transport:=shm", "-p", "topics.kv_cache:=text_context"}, ""}, // not subscribed with shm
		{fqn, []string{"-p", "topics.actions:=rosout"}, `parameter "topics.actions" names the topic "/rosout" in node /fastwam_action_expert, the log topic every ROS node publishes`},
		{fqn, []string{"-p", "topics.diagnostics:=/parameter_events"}, `parameter "topics.diagnostics" names the topic "/parameter_events"`},
		{fqn, []string{"-p", "topics.context:=~/transition_event"}, `parameter "topics.context" names the topic "/fastwam_action_expert/transition_event" in node /fastwam_action_expert, the lifecycle's transition events`},
		{fqn, []string{"-p", "use_sim_time:=true", "-p", "topics.context:=/clock"}, `parameter "topics.context" names the topic "/clock"`},
		{"/arm/fastwam_action_expert", append(post, "-p", "actions.topic:=/action_chunk"), ""},
		{"/arm/fastwam_action_expert", []string{"-p", "topics.context:=/arm/video_kv_cache"}, `name the same topic "/arm/video_kv_cache" in node /arm/fastwam_action_expert`},
	} {
		_, err := Load(ros(append(append([]string(nil), base...), c.rules...)...), c.fqn)
		if (c.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %v: error %v, want %q", c.fqn, c.rules, err, c.want)
		}
	}
}

const paramsFile = `
# Parameters for every node first, then for this one.
/**:
  ros__parameters:
    steps: 8
    backend: cpu
    cpu:
      weights: /w/all.safetensors
fastwam_action_expert:
  ros__parameters:
    steps: 6
    shift: 4.5
    qos:
      kv_cache: {reliability: best_effort, depth: 1}
    clip:
      min: [-1.0, -1.0, -1.0, -1.0, -1.0, -1.0, 0]
      max: [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1]
    topics:
      actions: "/robot/action_chunk"
other_node:
  ros__parameters:
    not_ours: 1
/robot:
  fastwam_action_expert:
    ros__parameters:
      steps: 2
/*/fastwam_action_expert:
  ros__parameters:
    noise_seed: 9
`

func TestParamsFile(t *testing.T) {
	path := writeFile(t, paramsFile)
	p, err := Load(ros("--params-file", path), fqn)
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Backend, want.CPU.Weights = BackendCPU, "/w/all.safetensors"
	want.Steps, want.Shift = 6, 4.5
	want.QoS.KVCache.Reliability, want.QoS.KVCache.Depth = ReliabilityBestEffort, 1
	want.ClipMin = []float64{-1, -1, -1, -1, -1, -1, 0}
	want.ClipMax = []float64{1, 1, 1, 1, 1, 1, 1}
	want.Topics.Actions = "/robot/action_chunk"
	if !reflect.DeepEqual(p, want) {
		t.Errorf("root namespace:\ngot  %+v\nwant %+v", p, want)
	}

	// In /robot the nested-namespace and wildcard sections apply too.
	p, err = Load(ros("--params-file", path), "/robot/fastwam_action_expert")
	if err != nil {
		t.Fatal(err)
	}
	if p.Steps != 2 || p.NoiseSeed != 9 || p.Shift != 5 || p.CPU.Weights != "/w/all.safetensors" {
		t.Errorf("/robot: steps %d noise_seed %d shift %v weights %q, want 2 9 5 /w/all.safetensors",
			p.Steps, p.NoiseSeed, p.Shift, p.CPU.Weights)
	}

	// Command-line order decides: later rules win.
	if p, _ := Load(ros("--params-file", path, "-p", "steps:=3"), fqn); p.Steps != 3 {
		t.Errorf("-p after the file: steps %d, want 3", p.Steps)
	}
	if p, _ := Load(ros("-p", "steps:=3", "--params-file", path), fqn); p.Steps != 6 {
		t.Errorf("-p before the file: steps %d, want 6", p.Steps)
	}
}

func TestParamsFileErrors(t *testing.T) {
	for _, c := range []struct {
		name, text string
		want       []string
	}{
		{"empty", "", []string{"empty"}},
		{"syntax", "/**:\n  ros__parameters:\n    steps: [1, 2\n", []string{"not valid YAML"}},
		{"top-level list", "- steps: 1\n", []string{"line 1", "map of node names"}},
		{"no ros__parameters", "/**:\n  steps: 4\n", []string{"line 2", `"steps"`, "ros__parameters"}},
		{"bare ros__parameters", "ros__parameters:\n  steps: 4\n", []string{"must be under a node name"}},
		{"parameters not a map", "/**:\n  ros__parameters: [1, 2]\n", []string{"ros__parameters must be a map"}},
		{"key beside ros__parameters", "/**:\n  ros__parameters:\n    steps: 4\n  extra: {a: 1}\n", []string{`unexpected key "extra"`}},
		{"unknown parameter", "fastwam_action_expert:\n  ros__parameters:\n    steps: 4\n    sheft: 3.0\n", []string{"line 4", `unknown parameter "sheft"`, `"shift"`}},
		{"nested unknown", "fastwam_action_expert:\n  ros__parameters:\n    qos:\n      kv_cache:\n        relyability: reliable\n", []string{"line 5", `"qos.kv_cache.relyability"`}},
		{"wrong type", "/**:\n  ros__parameters:\n    steps: '4'\n", []string{"line 3", `"steps"`, `expected integer, got string "4"`}},
		{"bad value", "/**:\n  ros__parameters:\n    backend: npu\n", []string{"line 3", `"backend"`, `got "npu"`}},
		{"array of maps", "/**:\n  ros__parameters:\n    clip:\n      min: [{a: 1}]\n", []string{`"clip.min"`, "scalar"}},
		{"bad structure for another node", "other:\n  ros__parameters:\n    x: [[1]]\n", []string{`"x"`, "scalar"}},
		{"duplicate parameter", "/**:\n  ros__parameters:\n    steps: 4\n    steps: 8\n", []string{`line 4: the key "steps" appears twice in one map (first on line 3); refusing the ambiguous file`}},
		{"duplicate section", "/**:\n  ros__parameters:\n    steps: 4\n/**:\n  ros__parameters:\n    steps: 8\n", []string{`line 4: the key "/**" appears twice in one map (first on line 1)`}},
		{"duplicate in another node", "other:\n  ros__parameters:\n    x: 1\n    x: 2\n", []string{`line 4: the key "x" appears twice`}},
		{"dotted and nested", "/**:\n  ros__parameters:\n    sync.timeout: 1.0\n    sync:\n      timeout: 2.0\n", []string{`line 5: /**: parameter "sync.timeout" is set twice in one section (first on line 3)`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, c.text)
			p := Default()
			before := p
			err := p.ApplyROSArgs(ros("--params-file", path), fqn)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range append(c.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !reflect.DeepEqual(p, before) {
				t.Errorf("a bad file changed the parameters")
			}
		})
	}
}

func TestParamsFileIgnoresOtherNodes(t *testing.T) {
	path := writeFile(t, "other_node:\n  ros__parameters:\n    unknown_to_us: 1\n    steps: nonsense\n/**:\n  ros__parameters:\n    htp:\n      context_binary: /m.bin\n")
	p, err := Load(ros("--params-file", path), fqn)
	if err != nil {
		t.Fatal(err)
	}
	if p.HTP.ContextBinary != "/m.bin" || p.Steps != 10 {
		t.Errorf("context_binary %q steps %d", p.HTP.ContextBinary, p.Steps)
	}
}

func TestMatchNodeName(t *testing.T) {
	for _, c := range []struct {
		pattern, fqn string
		want         bool
	}{
		{"/**", "/a", true},
		{"/**", "/ns/sub/a", true},
		{"a", "/a", true},
		{"/a", "/a", true},
		{"a", "/ns/a", false},
		{"/ns/a", "/ns/a", true},
		{"/ns/a", "/a", false},
		{"/*/a", "/ns/a", true},
		{"/*/a", "/a", false},
		{"/**/a", "/a", true},
		{"/**/a", "/x/y/a", true},
		{"/**/a", "/x/y/b", false},
		{"/ns/*", "/ns/a", true},
		{"/ns/*", "/ns/sub/a", false},
	} {
		if got := matchNodeName(c.pattern, c.fqn); got != c.want {
			t.Errorf("matchNodeName(%q, %q) = %v, want %v", c.pattern, c.fqn, got, c.want)
		}
	}
}

func TestScalarTyping(t *testing.T) {
	for _, c := range []struct {
		text string
		kind valueKind
	}{
		{"42", valInt}, {"-7", valInt}, {"4.0", valDouble}, {"1e-3", valDouble}, {".inf", valDouble},
		{"true", valBool}, {"False", valBool}, {"on", valBool}, {"'on'", valString},
		{"inf", valDouble}, {"nan", valDouble}, {"0x10", valInt}, {"1_000", valString}, {"htp", valString}, {`"12"`, valString},
		{"!!str 12", valString}, {"[1, 2.5]", valArray}, {"", valString},
	} {
		v, err := parseYAMLValue(c.text)
		if err != nil {
			t.Errorf("%q: %v", c.text, err)
			continue
		}
		if v.kind != c.kind {
			t.Errorf("%q typed %v, want %v", c.text, v.kind, c.kind)
		}
	}
	if _, err := parseYAMLValue("{a: 1}"); err == nil {
		t.Error("a map value was accepted")
	}
}

func TestParamNamesAreDocumented(t *testing.T) {
	names := Names()
	if len(names) < 30 {
		t.Fatalf("%d parameters, want the full set", len(names))
	}
	for _, d := range paramDefs() {
		if d.doc == "" {
			t.Errorf("parameter %q has no description", d.name)
		}
	}
	// Every declared parameter accepts its own default's spelling.
	p := Default()
	for _, n := range names {
		if err := p.Set(n, defaultText(t, n)); err != nil {
			t.Errorf("setting %s to its default: %v", n, err)
		}
	}
	if !reflect.DeepEqual(p, Default()) {
		t.Errorf("setting every default changed the parameters:\n%+v\n%+v", p, Default())
	}
}

// defaultText is the YAML spelling of parameter name's default.
func defaultText(t *testing.T, name string) string {
	t.Helper()
	p := Default()
	v, ok := p.Value(name)
	if !ok {
		t.Fatalf("no parameter %q", name)
	}
	return rosparam.FormatValue(v)
}

func TestParamsYAMLRoundTrip(t *testing.T) {
	p := Default()
	p.HTP.ContextBinary = "/models/a b.bin"
	p.Shift = 4
	p.ClipMin, p.ClipMax = []float64{-1, -2, -3, -4, -5, -6, -7.5}, []float64{1, 2, 3, 4, 5, 6, 7.5}
	for _, p := range []Params{Default(), p} {
		text := p.ParamsYAML("/**")
		q := Default()
		q.ClipMin, q.ClipMax = []float64{3}, []float64{4} // must stay when the file has no clip bounds
		if len(p.ClipMin) == 0 {
			p.ClipMin, p.ClipMax = q.ClipMin, q.ClipMax
		}
		if err := q.ApplyParamsYAML(text, fqn); err != nil {
			t.Fatalf("%v\n%s", err, text)
		}
		if !reflect.DeepEqual(p, q) {
			t.Errorf("round trip:\n%+v\n%+v\n%s", p, q, text)
		}
		for _, n := range Names() {
			leaf := n[strings.LastIndex(n, ".")+1:]
			if !strings.Contains(string(text), " "+leaf+":") {
				t.Errorf("%s missing from the YAML", n)
			}
		}
	}
}

// The shared bringup file: other nodes' parameters under /** are
// skipped (one report naming them), the node's own under /** apply, and an
// unknown name under the node's own name is still refused with the hint.
func TestSharedBringupParamsFile(t *testing.T) {
	path := writeFile(t, "/**:\n  ros__parameters: {use_sim_time: true, robot_base_frame: base_link}\n")
	var ignored []string
	p, err := Load(ros("--params-file", path, "-p", "htp.context_binary:=/m.bin"), fqn,
		rosparam.ReportIgnored(func(sec string, names []string) { ignored = append(ignored, sec+":"+strings.Join(names, ",")) }))
	if err != nil {
		t.Fatalf("shared bringup file refused: %v", err)
	}
	if !p.UseSimTime {
		t.Error("use_sim_time under /** not applied")
	}
	if want := []string{"/**:robot_base_frame"}; !reflect.DeepEqual(ignored, want) {
		t.Errorf("ignored %q, want %q", ignored, want)
	}
	own := writeFile(t, fqn+":\n  ros__parameters: {robot_base_frame: base_link, stesp: 3}\n")
	if _, err := Load(ros("--params-file", own, "-p", "htp.context_binary:=/m.bin"), fqn); err == nil ||
		!strings.Contains(err.Error(), `unknown parameter "robot_base_frame"`) {
		t.Errorf("own section: err = %v, want unknown parameter refused", err)
	}
}
