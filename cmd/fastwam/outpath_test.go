package main

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// listDir names the entries of dir, for "nothing left behind" checks.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// TestOutputPathsCheckedFirst: unusable -o and -plot paths of replay and bag
// make are refused (exit 2, the flag and the reason named) before any work:
// nothing is printed on stdout (a replay prints its table before it writes
// the plot) and nothing is left behind.
func TestOutputPathsCheckedFirst(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file.txt")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	existing := filepath.Join(dir, "existing")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	before := listDir(t, dir)
	type tc struct {
		args []string
		want string
	}
	cases := []tc{
		{[]string{"replay", "-plot", filepath.Join(dir, "absent", "p.png")}, "-plot " + filepath.Join(dir, "absent", "p.png") + ": folder " + filepath.Join(dir, "absent") + " does not exist"},
		{[]string{"replay", "-plot", existing}, "-plot " + existing + " is a folder"},
		{[]string{"replay", "-plot", filepath.Join(file, "p.png")}, file + " is not a folder"},
		{[]string{"replay", "-o", existing}, "-o " + existing + " already exists"},
		{[]string{"replay", "-o", file}, "-o " + file + " already exists"},
		{[]string{"replay", "-o", filepath.Join(dir, "absent", "out")}, "folder " + filepath.Join(dir, "absent") + " does not exist"},
		{[]string{"replay", "-o", filepath.Join(file, "out")}, file + " is not a folder"},
		{[]string{"bag", "make", "-o", filepath.Join(dir, "absent", "bag")}, "folder " + filepath.Join(dir, "absent") + " does not exist"},
		{[]string{"bag", "make", "-o", existing}, "(replace a bag folder with -force)"},
		{[]string{"bag", "make", "-force", "-o", file}, "-o " + file + " exists and is not a folder"},
	}
	if runtime.GOOS == "linux" {
		// A folder nothing can be created in, even by root.
		cases = append(cases,
			tc{[]string{"replay", "-plot", "/proc/fastwam-test.png"}, "-plot /proc/fastwam-test.png cannot be created"},
			tc{[]string{"replay", "-o", "/proc/fastwam-test"}, "-o /proc/fastwam-test: cannot create a folder in /proc"})
	}
	for _, c := range cases {
		code, out, stderr := runCmd(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) || out != "" {
			t.Errorf("%q: exit %d, want 2 with %q on stderr and no output\nstdout:\n%s\nstderr:\n%s", c.args, code, c.want, out, stderr)
		}
	}
	if after := listDir(t, dir); !slices.Equal(after, before) {
		t.Errorf("the checks left files behind: %v, before %v", after, before)
	}

	// A usable plot path passes the check and leaves no file when the
	// replay then fails (here: the bag is not a bag).
	garbage := filepath.Join(dir, "garbage.mcap")
	if err := os.WriteFile(garbage, []byte("not a bag"), 0o644); err != nil {
		t.Fatal(err)
	}
	plot, outBag := filepath.Join(dir, "p.png"), filepath.Join(dir, "out")
	if code, _, stderr := runCmd(t, "replay", "-plot", plot, "-o", outBag, garbage); code != 1 || !strings.Contains(stderr, "open bag") {
		t.Errorf("garbage bag: exit %d, want 1\n%s", code, stderr)
	}
	for _, p := range []string{plot, outBag} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s exists after a failed replay (%v)", p, err)
		}
	}
	// An existing plot file is accepted (it is replaced) and kept as it
	// was when the replay fails.
	if err := os.WriteFile(plot, []byte("old plot"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runCmd(t, "replay", "-plot", plot, garbage); code != 1 {
		t.Errorf("existing plot file: exit %d, want 1 (the bag's failure)", code)
	}
	if b, err := os.ReadFile(plot); err != nil || string(b) != "old plot" {
		t.Errorf("existing plot file changed by the check: %q, %v", b, err)
	}
}
