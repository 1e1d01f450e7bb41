// Package layers is the repository's floor plan: the floor each package
// stands on, read from the README's tour top to bottom (cmd → replay,
// asyncsim → executor, node's adapters → node → the goldens → the
// backends, the transport, bags → their contracts, the messages → the
// lowest helpers), and the check
// that no package imports one that stands above it. Its test runs the check
// on `go list -json ./...`, so that the layout stays as the tour says.
//
// A new package stands on the floor of the longest entry of the table that
// names it or a folder above it; one the table does not cover is an error,
// so that whoever adds a top-level folder gives it its floor here.
package layers

import (
	"fmt"
	"slices"
	"strings"
)

// Floor numbers, from the bottom up.
const (
	// Helpers is the floor of the lowest helpers (internal/regfile,
	// strictjson, progress, …) and of data that imports nothing of ours
	// (golden/tiny).
	Helpers = iota
	// Contracts is the floor of the contracts and formats: the step
	// contract (expert), the messages and their codec, safetensors, the
	// QNN runtime, ROS time.
	Contracts
	// Parts is the floor of what the nodes are built from: the backends,
	// actions, bags, the shared-memory transport, the world model's maths,
	// the lifecycle and parameter services.
	Parts
	// References is the floor of the goldens (package golden): the
	// independent reference's cases, which the node's self-test, the
	// tools and the backends' tests read. A backend does not import them:
	// its embedded tiny weights are golden/tiny's, on the lowest floor.
	References
	// Node is the floor of the action expert's node.
	Node
	// Nodes is the floor of what stands on the node: the executor, the
	// node's backends and its ROS adapter.
	Nodes
	// Tools is the floor of what runs the nodes: replay, the asynchronous
	// simulator.
	Tools
	// Commands is the floor of the binaries.
	Commands
)

// entry gives the packages under a folder their floor.
type entry struct {
	dir   string // relative to the module; a package or a folder of packages
	floor int
}

// table is the floor plan; the longest dir that holds a package wins.
func table() []entry {
	return []entry{
		{"internal", Helpers},
		{"internal/qnnfake", Parts},      // the QNN test double: a backend's part (imports expert)
		{"internal/npztest", References}, // test .npz files beside the goldens (imports golden)
		{"golden/tiny", Helpers},
		{"expert", Contracts},
		{"msgs", Contracts},
		{"safetensors", Contracts},
		{"qnnrt", Contracts},
		{"graphs", Contracts}, // the NPU graph set's sizes and plan (imports nothing of ours)
		{"node/rostime", Contracts},
		{"expert/cpu", Parts},
		{"expert/htp", Parts},
		{"golden", References},
		{"actions", Parts},
		{"bag", Parts},
		{"kvshm", Parts},
		{"worldmodel", Parts},
		{"camera", Parts},
		{"node/lifecycle", Parts},
		{"node/paramsrv", Parts},
		{"node", Node},
		{"node/backends", Nodes},
		{"node/rosnode", Nodes},
		{"executor", Nodes},
		{"wmnode", Nodes},
		{"replay", Tools},
		{"asyncsim", Tools},
		{"cmd", Commands},
	}
}

// Package is what the check reads of one package (the fields of the same
// names in `go list -json`).
type Package struct {
	ImportPath string
	Imports    []string // direct imports, without the tests'
	Deps       []string // every package it depends on, without the tests'
}

// FloorOf returns the floor of the package at rel (its path relative to the
// module), and whether the table covers it.
func FloorOf(rel string) (int, bool) {
	best, floor := -1, 0
	for _, e := range table() {
		if (rel == e.dir || strings.HasPrefix(rel, e.dir+"/")) && len(e.dir) > best {
			best, floor = len(e.dir), e.floor
		}
	}
	return floor, best >= 0
}

// Check returns one error for each package of module that the table does
// not cover, each import of a package that stands on a higher floor than
// the importer, and each package under internal/ that depends on node,
// executor or replay (directly or not). Packages outside module are
// ignored.
func Check(module string, pkgs []Package) []error {
	rel := func(path string) (string, bool) {
		return strings.CutPrefix(path, module+"/")
	}
	var errs []error
	for _, p := range pkgs {
		name, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		floor, ok := FloorOf(name)
		if !ok {
			errs = append(errs, fmt.Errorf("package %s has no floor in internal/layers' table: add its folder", name))
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := rel(imp)
			if !ok {
				continue
			}
			if f, known := FloorOf(dep); known && f > floor {
				errs = append(errs, fmt.Errorf("package %s (floor %d) imports %s, which stands above it (floor %d)", name, floor, dep, f))
			}
		}
		if name == "internal" || strings.HasPrefix(name, "internal/") {
			for _, d := range p.Deps {
				dep, ok := rel(d)
				if !ok {
					continue
				}
				for _, top := range []string{"node", "executor", "replay"} {
					if dep == top || strings.HasPrefix(dep, top+"/") {
						errs = append(errs, fmt.Errorf("package %s under internal/ depends on %s: internal/ holds only what stands below the nodes", name, dep))
					}
				}
			}
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errs
}
