package buildinfo

import (
	"runtime"
	"strings"
	"testing"
)

func TestShortAndString(t *testing.T) {
	in := Info{Module: "m", Version: "v1.2.3", Revision: "0123456789abcdef0123", Time: "2026-12-01T20:00:00Z", GoVersion: "go1.26", Platform: "linux/arm64"}
	if got := in.Short(); got != "0123456789ab" {
		t.Errorf("Short() = %q", got)
	}
	in.Modified = true
	if got := in.Short(); got != "0123456789ab+dirty" {
		t.Errorf("Short() of a modified tree = %q", got)
	}
	want := "m v1.2.3 revision 0123456789ab+dirty (2026-12-01T20:00:00Z) go1.26 linux/arm64"
	if got := in.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (Info{Module: "m", Version: "(devel)"}).Short(); got != "unknown" {
		t.Errorf("Short() without a revision = %q, want unknown", got)
	}
}

func TestReadNamesTheModule(t *testing.T) {
	in := Read()
	// A test binary's main module is the module under test.
	if in.Module != "github.com/fastwam/actionexpert" || in.GoVersion != runtime.Version() || !strings.Contains(in.String(), in.Platform) {
		t.Errorf("Read() = %+v", in)
	}
}
