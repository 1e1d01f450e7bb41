package testenv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records whether it was skipped or failed.
type recorder struct {
	testing.TB
	skipped, failed bool
	msg             string
}

func (r *recorder) Helper() {}
func (r *recorder) Skip(args ...any) {
	r.skipped, r.msg = true, args[0].(string)
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = true
	r.msg = fmt.Sprintf(format, args...)
}

func TestMissing(t *testing.T) {
	for _, tc := range []struct {
		ci         string
		wantFailed bool
	}{{"", false}, {"false", false}, {"true", true}, {"1", true}} {
		t.Setenv("CI", tc.ci)
		r := &recorder{TB: t}
		var out strings.Builder
		missing(r, &out, "node is not installed")
		if said := out.String(); tc.wantFailed != (said == "") || (!tc.wantFailed && !strings.Contains(said, "SKIP (check not run) testenv TestMissing: node is not installed")) {
			t.Errorf("CI=%q: wrote %q, want one SKIP line naming the test and the reason when skipped, nothing when failed", tc.ci, said)
		}
		if r.failed != tc.wantFailed || r.skipped == tc.wantFailed {
			t.Errorf("CI=%q: failed %v skipped %v, want failed %v", tc.ci, r.failed, r.skipped, tc.wantFailed)
		}
		if tc.wantFailed && !strings.Contains(r.msg, "CI=true") {
			t.Errorf("CI=%q: message %q does not say why it fails", tc.ci, r.msg)
		}
	}
}

// TestSkipLineInGoTestOutput runs go test, without -v, on a package whose
// test lacks what it needs, with the go command's output a pipe (as under
// a CI runner or `| tee`): the SKIP line must be in that output, though go
// test drops a passing package's own output.
func TestSkipLineInGoTestOutput(t *testing.T) {
	cmd := exec.Command("go", "test", "-count=1", "./testdata/skipfixture")
	cmd.Env = append(os.Environ(), "FASTWAM_TESTENV_FIXTURE=1", "CI=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test of the fixture: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "SKIP (check not run) skipfixture TestNeedsTool: the tool is not installed\n") {
		t.Errorf("go test's output lacks the SKIP line:\n%s", out)
	}
}

// fakeGo starts a process whose executable is named go (a copy of sleep)
// with stdout as its standard output, and returns its pid.
func fakeGo(t *testing.T, stdout *os.File) int {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skipf("no sleep to copy: %v", err)
	}
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	goExe := filepath.Join(t.TempDir(), "go")
	if err := os.WriteFile(goExe, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return start(t, goExe, stdout)
}

// start runs exe 60 (a sleep) with stdout, killed when the test ends.
func start(t *testing.T, exe string, stdout *os.File) int {
	t.Helper()
	cmd := exec.Command(exe, "60")
	cmd.Stdout = stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd.Process.Pid
}

// TestGoStdout: the go command's standard output is written to when it is
// a pipe or a file in append mode; not when it is a file the go command
// writes at its own offset, nor when the process is not the go command.
func TestGoStdout(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pid := fakeGo(t, w)
	w.Close()
	f := goStdout(pid)
	if f == nil {
		t.Fatal("the go process's stdout, a pipe, was not opened")
	}
	fmt.Fprintln(f, "SKIP line")
	f.Close()
	if line, err := bufio.NewReader(r).ReadString('\n'); err != nil || line != "SKIP line\n" {
		t.Errorf("read %q (%v) from the go process's pipe", line, err)
	}

	dir := t.TempDir()
	for _, tc := range []struct {
		name   string
		flags  int
		opened bool
	}{
		{"file, O_APPEND (>> log)", os.O_APPEND, true},
		{"file without O_APPEND (> log)", 0, false},
	} {
		path := filepath.Join(dir, strings.Fields(tc.name)[1])
		log, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|tc.flags, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		pid := fakeGo(t, log)
		log.Close()
		f := goStdout(pid)
		if (f != nil) != tc.opened {
			t.Errorf("%s: opened %v, want %v", tc.name, f != nil, tc.opened)
		}
		if f != nil {
			f.Close()
		}
	}

	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skipf("no sleep: %v", err)
	}
	other := start(t, sleep, w2)
	w2.Close()
	if f := goStdout(other); f != nil {
		f.Close()
		t.Error("the stdout of a process that is not go was opened")
	}
	if f := goStdout(1<<22 + 1); f != nil { // no such process
		f.Close()
		t.Error("opened the stdout of a pid that names no process")
	}
}
