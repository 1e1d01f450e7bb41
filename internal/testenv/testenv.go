// Package testenv decides what a test does when something it needs from the
// machine (node and the npm cross-check packages, OpenBLAS) is missing:
// on a developer's machine the test is skipped with the reason; under CI
// (CI=true, as .ci/run is run) it fails, because CI installs these and a
// check that silently stopped running is a check lost.
//
// A skip is also said on the terminal: go test without -v prints only "ok"
// for a package whose tests pass, hiding its skips, so Missing writes one
// line per skipped check to the controlling terminal (/dev/tty) as well,
// where there is one. Under -v, or in a log without a terminal, the skip
// reason is in the test output as usual.
package testenv

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
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
// written to the terminal (see the package doc).
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	var tty io.Writer
	if f, err := os.OpenFile("/dev/tty", os.O_WRONLY|syscall.O_NOCTTY, 0); err == nil {
		defer f.Close()
		tty = f
	}
	missing(t, tty, fmt.Sprintf(format, args...))
}

// missing is Missing with the terminal as a writer (nil: none).
func missing(t testing.TB, tty io.Writer, msg string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s (CI=true: this check must run here; .ci/run installs what it needs)", msg)
		return
	}
	if tty != nil {
		pkg := "."
		if wd, err := os.Getwd(); err == nil { // go test runs a package's tests in its folder
			pkg = filepath.Base(wd)
		}
		fmt.Fprintf(tty, "SKIP (check not run) %s %s: %s\n", pkg, t.Name(), msg)
	}
	t.Skip(msg)
}
