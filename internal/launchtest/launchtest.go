// Package launchtest checks a node's launch files against the node's
// parameters, for the tests of packages node and node/executor.
package launchtest

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

// generic are the launch arguments every launch file declares besides the
// node's parameters.
var generic = []string{"params_file", "node_name", "namespace", "log_level"}

// CheckArgs fails t unless the Python launch file py and the XML launch
// file xml each declare exactly the parameters names (sorted) as launch
// arguments, besides the generic ones, and the XML file passes every one
// to the node under its own name.
func CheckArgs(t testing.TB, py, xml string, names []string) {
	t.Helper()
	for _, f := range []struct {
		path string
		re   *regexp.Regexp
	}{
		{py, regexp.MustCompile(`(?m)^    \(['"]([^'"]+)['"], ['"]`)},
		{xml, regexp.MustCompile(`<arg name="([^"]+)" default="" description=`)},
		{xml, regexp.MustCompile(`<arg name="([^"]+)" value="\$\(var ([^)]+)\)"/>`)},
	} {
		text, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		var found []string
		for _, m := range f.re.FindAllStringSubmatch(string(text), -1) {
			if len(m) > 2 && m[1] != m[2] {
				t.Errorf("%s passes $(var %s) as %s", f.path, m[2], m[1])
			}
			if slices.Contains(names, m[1]) {
				found = append(found, m[1])
			} else if !slices.Contains(generic, m[1]) {
				t.Errorf("%s declares %q, which is not a parameter", f.path, m[1])
			}
		}
		slices.Sort(found)
		if !slices.Equal(found, names) {
			t.Errorf("%s declares parameters %v, want %v", f.path, found, names)
		}
	}
}
