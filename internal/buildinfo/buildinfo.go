// Package buildinfo says which build of the project a binary is: its module
// version and the VCS revision it was built from, as the Go toolchain stamps
// them into every binary (runtime/debug.ReadBuildInfo). The CLI prints it
// (fastwam version), and both nodes log it at start-up and publish it in
// their diagnostics, so a log or a bag names the exact commit that made it.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Info is what a binary knows of its own build.
type Info struct {
	Module    string // the main module's path
	Version   string // its version: a tag, a pseudo-version, or "(devel)"
	Revision  string // the VCS revision (commit), or "" when the build was not stamped
	Time      string // the revision's commit time (RFC 3339), or ""
	Modified  bool   // the work tree had uncommitted changes
	GoVersion string // the toolchain that built it
	Platform  string // GOOS/GOARCH
}

// Read returns the running binary's build information. A binary built
// without VCS stamping (go build -buildvcs=false, or outside a checkout)
// has no revision; Read still returns the module, version and toolchain.
func Read() Info {
	in := Info{GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return in
	}
	in.Module, in.Version = bi.Main.Path, bi.Main.Version
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Revision = s.Value
		case "vcs.time":
			in.Time = s.Value
		case "vcs.modified":
			in.Modified = s.Value == "true"
		}
	}
	return in
}

// Short is the revision for a log line or a diagnostics value: the first
// 12 hex digits, "+dirty" for a modified work tree, or "unknown" when the
// binary carries no revision.
func (in Info) Short() string {
	if in.Revision == "" {
		return "unknown"
	}
	r := in.Revision
	if len(r) > 12 {
		r = r[:12]
	}
	if in.Modified {
		r += "+dirty"
	}
	return r
}

// String is one line: module, version, revision, commit time, toolchain
// and platform.
func (in Info) String() string {
	v := in.Version
	if v == "" {
		v = "(unknown version)"
	}
	s := fmt.Sprintf("%s %s revision %s", in.Module, v, in.Short())
	if in.Time != "" {
		s += " (" + in.Time + ")"
	}
	return s + " " + in.GoVersion + " " + in.Platform
}
