package replay

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// warnings collects a node.Logger's warnings.
type warnings struct{ lines []string }

func (w *warnings) Debugf(string, ...any) {}
func (w *warnings) Infof(string, ...any)  {}
func (w *warnings) Warnf(f string, a ...any) {
	w.lines = append(w.lines, fmt.Sprintf(f, a...))
}
func (w *warnings) Errorf(string, ...any) {}

// TestRemoveStaleStages: a staging folder of a bag make that was killed
// (its pid gone) is removed on the next make in the same folder, with a
// warning naming it; a live maker's, this process's own, another name,
// a link to a folder and a plain file of the staging pattern are left.
func TestRemoveStaleStages(t *testing.T) {
	dir := t.TempDir()
	const dead, live = 999_999_991, 999_999_992
	mk := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Join(p, "bag"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p, "bag", "x_0.mcap"), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stale := mk(fmt.Sprintf(".bagmake-%d-123", dead))
	keep := []string{
		mk(fmt.Sprintf(".bagmake-%d-456", live)),
		mk(fmt.Sprintf(".bagmake-%d-789", os.Getpid())),
		mk(".bagmake-123456"), // the old pattern: no pid, not known to be ours
		mk(".bagmake-x1-2"),
		mk("unrelated"),
	}
	outside := t.TempDir()
	link := filepath.Join(dir, fmt.Sprintf(".bagmake-%d-link", dead))
	if err := os.Symlink(outside, link); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, fmt.Sprintf(".bagmake-%d-file", dead))
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, link, file, outside)
	var w warnings
	removeStaleStages(dir, func(pid int) bool { return pid != dead }, &w)
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("stale staging folder %s of a gone process kept (%v)", stale, err)
	}
	for _, p := range keep {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
	}
	if len(w.lines) != 1 || !strings.Contains(w.lines[0], stale) || !strings.Contains(w.lines[0], fmt.Sprint(dead)) {
		t.Errorf("warnings %q, want one naming %s and pid %d", w.lines, stale, dead)
	}
}

func TestStagePattern(t *testing.T) {
	pid, ok := stagePID(strings.Replace(stagePattern(), "*", "42", 1))
	if !ok || pid != os.Getpid() {
		t.Errorf("stagePattern %q reads as pid %d, %v", stagePattern(), pid, ok)
	}
}
