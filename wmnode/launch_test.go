package wmnode

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/internal/launchtest"
)

var update = flag.Bool("update", false, "rewrite launch/world_model.params.yaml from the defaults")

const paramsHeader = `# Parameters of the Fast-WAM world-model node (fastwam_world_model, package
# fastwam_action_expert) with their defaults. The launch files read this file
# first (params_file:=... names another one); model.dit_weights,
# model.vae_weights, model.dataset_stats and model.text_cache must be set for
# the node to start.
#
# Generated from package wmnode: go test ./wmnode -run TestLaunchFiles -update
`

// TestLaunchFiles keeps the launch directory in step with the parameters:
// the params file is the rendering of the defaults, and both launch files
// declare every parameter as an argument.
func TestLaunchFiles(t *testing.T) {
	p := DefaultParams()
	want := append([]byte(paramsHeader), p.ParamsYAML("/**")...)
	const path = "../launch/world_model.params.yaml"
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
		t.Errorf("%s is not the rendering of DefaultParams; run go test ./wmnode -run TestLaunchFiles -update", path)
	}
	q := DefaultParams()
	if err := q.ApplyParamsYAML(got, DefaultNodeName); err != nil {
		t.Errorf("%s: %v", path, err)
	}
	launchtest.CheckArgs(t, "../launch/world_model.launch.py", "../launch/world_model.launch.xml", ParamNames())
	py, err := os.ReadFile("../launch/world_model.launch.py")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(py, []byte("node_launch_description('fastwam_world_model', 'fastwam_world_model', 'world_model.params.yaml', PARAMETERS)")) {
		t.Errorf("world_model.launch.py does not start fastwam_world_model with world_model.params.yaml")
	}
}

// TestLaunchLifecycle: the launch files start the node as a launch_ros
// LifecycleNode (launching.py's LIFECYCLE_EXECUTABLES names it) and the
// node autostarts by default, as the action expert does.
func TestLaunchLifecycle(t *testing.T) {
	src, err := os.ReadFile("../python/fastwam_action_expert/launching.py")
	if err != nil {
		t.Fatal(err)
	}
	var tuple string
	for line := range strings.Lines(string(src)) {
		if rest, ok := strings.CutPrefix(line, "LIFECYCLE_EXECUTABLES = "); ok {
			tuple = rest
		}
	}
	if !strings.Contains(tuple, "'fastwam_world_model'") {
		t.Errorf("launching.py: LIFECYCLE_EXECUTABLES = %q does not name fastwam_world_model: the launch files would start it as a plain Node", strings.TrimSpace(tuple))
	}
	if !DefaultParams().Autostart {
		t.Error("autostart defaults to false; the action expert's defaults to true")
	}
	p := DefaultParams()
	if err := p.Set("autostart", "false"); err != nil || p.Autostart {
		t.Errorf("autostart:=false: %v, autostart %v", err, p.Autostart)
	}
	if err := p.Set("autostart", "maybe"); err == nil {
		t.Error("autostart:=maybe accepted")
	}
}
