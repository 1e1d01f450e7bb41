package layers

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/fastwam/actionexpert/internal/testenv"
)

const module = "github.com/fastwam/actionexpert"

// TestRepositoryLayers runs the check on the repository's own packages.
func TestRepositoryLayers(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		testenv.Missing(t, "no go tool on PATH to list the packages: %v", err)
		return
	}
	cmd := exec.CommandContext(t.Context(), goTool, "list", "-json", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -json: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []Package
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p Package
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list -json: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages, want the repository's (over 20)", len(pkgs))
	}
	for _, err := range Check(module, pkgs) {
		t.Error(err)
	}
}

// TestCheckFindsBackEdges checks that the check sees what it is for.
func TestCheckFindsBackEdges(t *testing.T) {
	m := func(s string) string { return module + "/" + s }
	pkgs := []Package{
		{ImportPath: m("expert/cpu"), Imports: []string{m("golden"), m("expert"), "fmt"}},
		{ImportPath: m("internal/sim"), Imports: []string{m("executor")}, Deps: []string{m("executor"), m("node"), m("msgs")}},
		{ImportPath: m("newtop"), Imports: []string{"fmt"}},
		{ImportPath: m("node"), Imports: []string{m("kvshm"), m("expert")}},
		{ImportPath: "example.com/other", Imports: []string{m("cmd/fastwam")}},
	}
	var got []string
	for _, err := range Check(module, pkgs) {
		got = append(got, err.Error())
	}
	want := []string{
		"package expert/cpu (floor 2) imports golden, which stands above it (floor 3)",
		"package internal/sim (floor 0) imports executor, which stands above it (floor 5)",
		"package internal/sim under internal/ depends on executor",
		"package internal/sim under internal/ depends on node",
		"package newtop has no floor",
	}
	if len(got) != len(want) {
		t.Fatalf("Check found %d problems, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("problem %d: %q, want it to begin with %q", i, got[i], want[i])
		}
	}
	// node imports kvshm and expert, below it: allowed.
	if f, _ := FloorOf("node/params"); f != Node {
		t.Errorf("floor of node/params: %d, want %d", f, Node)
	}
	if f, _ := FloorOf("golden/tiny"); f != Helpers {
		t.Errorf("floor of golden/tiny: %d, want %d", f, Helpers)
	}
}
