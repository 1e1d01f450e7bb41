package testenv

import (
	"fmt"
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
		var tty strings.Builder
		missing(r, &tty, "node is not installed")
		if said := tty.String(); tc.wantFailed != (said == "") || (!tc.wantFailed && !strings.Contains(said, "SKIP (check not run) testenv TestMissing: node is not installed")) {
			t.Errorf("CI=%q: wrote %q to the terminal, want one SKIP line naming the test and the reason when skipped, nothing when failed", tc.ci, said)
		}
		if r.failed != tc.wantFailed || r.skipped == tc.wantFailed {
			t.Errorf("CI=%q: failed %v skipped %v, want failed %v", tc.ci, r.failed, r.skipped, tc.wantFailed)
		}
		if tc.wantFailed && !strings.Contains(r.msg, "CI=true") {
			t.Errorf("CI=%q: message %q does not say why it fails", tc.ci, r.msg)
		}
	}
}
