package wmnode

import (
	"bytes"
	"flag"
	"os"
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
