// Package testenv decides what a test does when something it needs from the
// machine (node and the npm cross-check packages, OpenBLAS) is missing:
// on a developer's machine the test is skipped with the reason; under CI
// (CI=true, as .ci/run is run) it fails, because CI installs these and a
// check that silently stopped running is a check lost.
package testenv

import (
	"fmt"
	"os"
	"testing"
)

// InCI reports whether the tests run under CI: the environment variable CI
// is "true" (or "1").
func InCI() bool {
	v := os.Getenv("CI")
	return v == "true" || v == "1"
}

// Missing skips t with the reason, or fails it under CI.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		t.Fatalf("%s (CI=true: this check must run here; .ci/run installs what it needs)", msg)
		return
	}
	t.Skip(msg)
}
