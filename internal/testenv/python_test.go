package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFirstImporting: the first interpreter that imports the modules is
// chosen; one that does not, or does not exist, is passed over.
func TestFirstImporting(t *testing.T) {
	py := firstImporting(python3Candidates(), "sys")
	if py == "" {
		Missing(t, "no python3 on this machine")
	}
	if _, err := os.Stat(DebianPython3); err == nil {
		if c := python3Candidates(); c[0] != DebianPython3 {
			t.Errorf("candidates %v: Debian's %s, present, is not first", c, DebianPython3)
		}
	}
	absent := filepath.Join(t.TempDir(), "python3")
	if got := firstImporting([]string{absent, py}, "sys, os"); got != py {
		t.Errorf("[absent, %s] importing sys, os: %q, want %s", py, got, py)
	}
	if got := firstImporting([]string{py}, "sys, no_such_module_fastwam"); got != "" {
		t.Errorf("a module no interpreter has: %q, want none", got)
	}
	if got := firstImporting(nil, "sys"); got != "" {
		t.Errorf("no candidates: %q", got)
	}
}

// TestPython3WithMissing: without an interpreter that imports the modules,
// the test is refused with the modules, the interpreters tried and the
// hint (failed here, as under CI, so that no SKIP line is written).
func TestPython3WithMissing(t *testing.T) {
	t.Setenv("CI", "true")
	r := &recorder{TB: t}
	if p := Python3With(r, "no_such_module_fastwam", "install python3-nothing"); p != "" || !r.failed {
		t.Fatalf("got %q, failed %v; want none and a failure under CI", p, r.failed)
	}
	for _, want := range []string{"no python3 that imports no_such_module_fastwam (tried [", "install python3-nothing", "CI=true"} {
		if !strings.Contains(r.msg, want) {
			t.Errorf("message %q lacks %q", r.msg, want)
		}
	}
}
