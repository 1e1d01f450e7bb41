package worldmodel

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/internal/testenv"
)

// python3With is testenv.Python3With, for the tests of this package that
// run the Python references.
func python3With(t *testing.T, modules, hint string) string {
	t.Helper()
	return testenv.Python3With(t, modules, hint)
}

// TestGoldensMatchTheirReference regenerates the goldens with
// golden/make_worldmodel_golden.py into a temporary directory and requires
// the same files holding the same arrays (the .npz files are compared by
// their arrays, as zlib's bytes may differ between machines; proprio.json
// by its bytes): a reference changed without regenerating, or goldens
// edited by hand, fail here.
func TestGoldensMatchTheirReference(t *testing.T) {
	python := python3With(t, "numpy, PIL", "install python3-numpy python3-pil to check golden/worldmodel against its generator")
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, filepath.Join("..", "golden", "make_worldmodel_golden.py"), "--out", out)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make_worldmodel_golden.py: %v\n%s", err, b)
	}
	names := func(dir string) []string {
		ents, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, e := range ents {
			s = append(s, e.Name())
		}
		return s
	}
	committed, regenerated := names(goldenDir), names(out)
	if !slices.Equal(committed, regenerated) {
		t.Fatalf("golden/worldmodel has %v; the reference writes %v", committed, regenerated)
	}
	for _, name := range committed {
		a, err := os.ReadFile(filepath.Join(goldenDir, name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(name, ".npz") {
			if !bytes.Equal(a, b) {
				t.Errorf("%s differs from what the reference writes now: regenerate with golden/make_worldmodel_golden.py", name)
			}
			continue
		}
		keys := npzKeys(t, a)
		if kb := npzKeys(t, b); !slices.Equal(keys, kb) {
			t.Errorf("%s holds %v; the reference writes %v", name, keys, kb)
			continue
		}
		x, y := readNPZBytes(t, name, a, keys), readNPZBytes(t, name, b, keys)
		for _, k := range keys {
			if !slices.Equal(x[k].Shape, y[k].Shape) || !slices.Equal(x[k].Data, y[k].Data) {
				t.Errorf("%s: array %q differs from what the reference writes now: regenerate with golden/make_worldmodel_golden.py", name, k)
			}
		}
	}
}
