package golden

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// PolicyBagDir is the embedded image-policy bag's folder name.
const PolicyBagDir = "policy"

//go:embed policy/metadata.yaml policy/*.mcap
var policy embed.FS

// PolicyBag is the embedded image-policy regression bag: the rosbag2
// folder "policy" that `fastwam bag make -images` wrote from a small image
// bag (two cameras, the proprio state, the instruction; see
// cmd/fastwam/policybag_test.go), holding those inputs and the chunks the
// tiny world model and the tiny action expert produced from them on the
// CPU. `fastwam replay golden/policy` runs the world model again and
// compares; `fastwam policy` takes its first observation by default.
func PolicyBag() fs.FS { return policy }

// ExtractPolicyBag copies the embedded image-policy bag into a new folder
// "policy" under parent, which must exist, and returns that folder.
func ExtractPolicyBag(parent string) (string, error) {
	sub, err := fs.Sub(policy, PolicyBagDir)
	if err != nil {
		return "", fmt.Errorf("golden: embedded policy bag: %w", err)
	}
	dir := filepath.Join(parent, PolicyBagDir)
	if err := os.CopyFS(dir, sub); err != nil {
		return "", fmt.Errorf("golden: extract the policy bag: %w", err)
	}
	return dir, nil
}
