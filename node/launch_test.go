package node

import (
	"bytes"
	"flag"
	"os"
	"testing"

	"github.com/fastwam/actionexpert/internal/launchtest"
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
	p := DefaultParams()
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
		t.Errorf("%s is not the rendering of DefaultParams; run go test ./node -run TestLaunchFiles -update", path)
	}
	q := DefaultParams()
	if err := q.ApplyParamsYAML(got, "/fastwam_action_expert"); err != nil {
		t.Errorf("%s: %v", path, err)
	}

	launchtest.CheckArgs(t, "../launch/action_expert.launch.py", "../launch/action_expert.launch.xml", ParamNames())

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
