// Package launchtest checks a node's launch files against the node's
// parameters, and the SROS2 policy (launch/security/policy.xml) against
// the topics and services the node uses, for the tests of packages node
// and executor.
package launchtest

import (
	"encoding/xml"
	"fmt"
	"os"
	pathpkg "path"
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

// Grants are the topic and service names an SROS2 policy allows one
// profile (an enclave's node), or the names a node uses.
type Grants struct {
	Publish, Subscribe []string // topics
	Reply, Request     []string // services served and called
}

// policy is the part of an SROS2 policy file (sros2's policy.xsd) the
// check reads.
type policy struct {
	Enclaves []struct {
		Path     string `xml:"path,attr"`
		Profiles []struct {
			NS     string `xml:"ns,attr"`
			Node   string `xml:"node,attr"`
			Topics []struct {
				Publish   string   `xml:"publish,attr"`
				Subscribe string   `xml:"subscribe,attr"`
				Names     []string `xml:"topic"`
			} `xml:"topics"`
			Services []struct {
				Reply   string   `xml:"reply,attr"`
				Request string   `xml:"request,attr"`
				Names   []string `xml:"service"`
			} `xml:"services"`
		} `xml:"profiles>profile"`
	} `xml:"enclaves>enclave"`
}

// PolicyGrants reads the SROS2 policy file path and returns what it
// ALLOWs the profile of node (in namespace "/") in enclave.
func PolicyGrants(path, enclave, node string) (Grants, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return Grants{}, err
	}
	var p policy
	if err := xml.Unmarshal(text, &p); err != nil {
		return Grants{}, fmt.Errorf("%s: %w", path, err)
	}
	for _, e := range p.Enclaves {
		if e.Path != enclave {
			continue
		}
		for _, pr := range e.Profiles {
			if pr.NS != "/" || pr.Node != node {
				continue
			}
			var g Grants
			for _, ts := range pr.Topics {
				if ts.Publish == "ALLOW" {
					g.Publish = append(g.Publish, ts.Names...)
				}
				if ts.Subscribe == "ALLOW" {
					g.Subscribe = append(g.Subscribe, ts.Names...)
				}
			}
			for _, ss := range pr.Services {
				if ss.Reply == "ALLOW" {
					g.Reply = append(g.Reply, ss.Names...)
				}
				if ss.Request == "ALLOW" {
					g.Request = append(g.Request, ss.Names...)
				}
			}
			return g, nil
		}
		return Grants{}, fmt.Errorf("%s: enclave %s has no profile for node %q in namespace /", path, enclave, node)
	}
	return Grants{}, fmt.Errorf("%s: no enclave %s", path, enclave)
}

// CheckGrants fails t unless the SROS2 policy file path allows the profile
// of node in enclave every name of used. A grant may be a DDS pattern
// (fnmatch, as "~/*"); names are compared as written, relative names with
// relative grants.
func CheckGrants(t testing.TB, path, enclave, node string, used Grants) {
	t.Helper()
	g, err := PolicyGrants(path, enclave, node)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		what          string
		used, granted []string
	}{
		{"publish topic", used.Publish, g.Publish},
		{"subscribe to topic", used.Subscribe, g.Subscribe},
		{"serve service", used.Reply, g.Reply},
		{"call service", used.Request, g.Request},
	} {
		for _, name := range k.used {
			if !slices.ContainsFunc(k.granted, func(pat string) bool {
				ok, err := pathpkg.Match(pat, name)
				return err == nil && ok
			}) {
				t.Errorf("%s: enclave %s, node %s: not allowed to %s %q, which the node uses (granted: %v)",
					path, enclave, node, k.what, name, k.granted)
			}
		}
	}
}
