package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/fastwam/actionexpert/internal/buildinfo"
)

// runVersion prints which build this binary is: the module version and the
// VCS revision Go stamped into it (internal/buildinfo).
func runVersion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", stdout, stderr, "[-json]\n\n"+
		"Prints the module version, the VCS revision (commit; +dirty for a modified work tree; unknown\n"+
		"for a build without VCS stamping), the commit time, the Go toolchain and the platform.")
	asJSON := fs.Bool("json", false, "print the build information as one JSON object")
	if err := fs.parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageError("unexpected argument %q", fs.Arg(0))
	}
	in := buildinfo.Read()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		return enc.Encode(struct {
			buildinfo.Info
			Short string
		}{in, in.Short()})
	}
	_, err := fmt.Fprintln(stdout, "fastwam", in.String())
	return err
}
