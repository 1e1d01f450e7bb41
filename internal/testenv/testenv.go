// Package testenv decides what a test does when something it needs from the
// machine (node and the npm cross-check packages, OpenBLAS) is missing:
// on a developer's machine the test is skipped with the reason; under CI
// (CI=true, as .ci/run is run) it fails, because CI installs these and a
// check that silently stopped running is a check lost.
//
// A skip is also said where the person or the log running the tests sees
// it. go test without -v prints only "ok" for a package whose tests pass:
// it captures the test process's stdout and stderr and drops them, so a
// skip's reason never shows. Missing therefore writes one line,
//
//	SKIP (check not run) <package> <test>: <what is missing>
//
// to the go command's own standard output (the stream its "ok" lines go
// to: a terminal, a pipe such as `| tee` or a CI runner's, or a file opened
// for appending, `>> log`), reached as /proc/<parent>/fd/1 when the test
// process's parent is the go command. Where that is not possible (the
// parent is not go, its output is a file opened without O_APPEND, which a
// second writer would overwrite) the line goes to the controlling terminal
// (/dev/tty), if there is one. Under -v (and go test -json) the skip's
// reason is in the test output already, and no extra line is written.
package testenv

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// InCI reports whether the tests run under CI: the environment variable CI
// is "true" (or "1").
func InCI() bool {
	v := os.Getenv("CI")
	return v == "true" || v == "1"
}

// Missing skips t with the reason, or fails it under CI. A skip is also
// written where it is seen (see the package doc).
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	var out io.Writer
	if !InCI() && !testing.Verbose() {
		if f := skipOutput(os.Getppid()); f != nil {
			defer f.Close()
			out = f
		}
	}
	missing(t, out, fmt.Sprintf(format, args...))
}

// missing is Missing with the writer of the SKIP line (nil: none).
func missing(t testing.TB, out io.Writer, msg string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s (CI=true: this check must run here; .ci/run installs what it needs)", msg)
		return
	}
	if out != nil {
		pkg := "."
		if wd, err := os.Getwd(); err == nil { // go test runs a package's tests in its folder
			pkg = filepath.Base(wd)
		}
		fmt.Fprintf(out, "SKIP (check not run) %s %s: %s\n", pkg, t.Name(), msg)
	}
	t.Skip(msg)
}

// skipOutput opens where a SKIP line is seen when this process's parent,
// ppid, runs it: the go command's standard output (goStdout), else the
// controlling terminal; nil when there is neither.
func skipOutput(ppid int) *os.File {
	if f := goStdout(ppid); f != nil {
		return f
	}
	if f, err := os.OpenFile("/dev/tty", os.O_WRONLY|syscall.O_NOCTTY, 0); err == nil {
		return f
	}
	return nil
}

// goStdout opens the standard output of process pid when it is the go
// command, for appending a line to it: a terminal or other character
// device, a pipe, or a regular file that process writes in append mode.
// A regular file without O_APPEND is refused (nil): the go command writes
// at its own offset and would overwrite the line. So is anything that is
// not the go command's, or cannot be opened (a socket).
func goStdout(pid int) *os.File {
	proc := "/proc/" + strconv.Itoa(pid)
	exe, err := os.Readlink(proc + "/exe")
	if err != nil || filepath.Base(strings.TrimSuffix(exe, " (deleted)")) != "go" {
		return nil
	}
	f, err := os.OpenFile(proc+"/fd/1", os.O_WRONLY|os.O_APPEND|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil
	}
	st, err := f.Stat()
	switch {
	case err != nil:
	case st.Mode()&(os.ModeCharDevice|os.ModeNamedPipe) != 0:
		return f
	case st.Mode().IsRegular() && appending(proc+"/fdinfo/1"):
		return f
	}
	f.Close()
	return nil
}

// appending reports whether the descriptor that fdinfo (a
// /proc/<pid>/fdinfo/<fd> file) describes was opened with O_APPEND.
func appending(fdinfo string) bool {
	b, err := os.ReadFile(fdinfo)
	if err != nil {
		return false
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 64)
			return err == nil && flags&syscall.O_APPEND != 0
		}
	}
	return false
}
