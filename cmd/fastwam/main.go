// Command fastwam is the command-line companion of the Fast-WAM action-expert
// node: parity checks of a backend against golden data, inspection of QNN
// context binaries, benchmarks, and rosbag replay. It is free of cgo, so
//
//	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build ./cmd/fastwam
//
// gives one binary to copy to the robot that needs only the system's C
// library: QNN and OpenBLAS are loaded at run time through the dynamic
// loader (purego), so the binary is dynamically linked, not static.
//
// Usage:
//
//	fastwam parity   [flags]            compare a backend with a golden (default: the embedded tiny golden on the CPU)
//	fastwam inspect  <context.bin>      list the graphs and tensors of a QNN context binary
//	fastwam bench    [flags]            CPU backend latency, and the ratio to PyTorch
//	fastwam bag make -o DIR [flags]     write a regression bag from golden inputs (expected chunks: the CPU reference's)
//	fastwam replay   [flags] [bag]      replay a bag through the node and compare with its recorded chunks (default: the embedded regression bag on the CPU)
//	fastwam weights make -o FILE [flags]  write random test weights of any shape: the action expert (default: full-size message widths, hidden 64), -model world, vae or text
//	fastwam async-sim [flags]           closed-loop timing simulation of node and executor: seam jumps with rtc off, replace and guided
//	fastwam version  [-json]            the module version and VCS revision of this binary (also -version, --version)
//	fastwam help     [command [subcommand]]   the usage of fastwam or of a command, on stdout
//
// Help (fastwam help ..., fastwam <command> -h) goes to stdout with exit status 0;
// usage errors go to stderr with exit status 2.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/fastwam/actionexpert/internal/shutdown"
)

// command is one subcommand, or a group of them (bag: bag make).
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	// subcommands, when not nil, make this command a group: its first
	// argument names one of them, and run is not used.
	subcommands []command
}

func commands() []command {
	return []command{
		{name: "parity", summary: "compare a backend with golden data; exits 1 below the cosine gate", run: runParity},
		{name: "inspect", summary: "list the graphs and tensors of a QNN context binary", run: runInspect},
		{name: "bench", summary: "measure the CPU backend (and PyTorch, for the ratio)", run: runBench},
		{name: "bag", summary: "regression bags (bag make: write one from golden inputs)", subcommands: []command{
			{name: "make", summary: "write a regression bag from golden inputs, with the CPU reference's chunks as the expected output", run: runBagMake},
		}},
		{name: "replay", summary: "replay a bag through the node and compare with its recorded chunks; exits 1 naming failing chunks", run: runReplay},
		{name: "weights", summary: "test weights (weights make: random weights of any shape: action expert, world model, VAE, text cache entry)", subcommands: []command{
			{name: "make", summary: "write random test weights (safetensors, f32/f16/bf16) of any shape: the action expert (default), -model world, vae or text", run: runWeightsMake},
		}},
		{name: "async-sim", summary: "closed-loop timing simulation of the node and the chunk executor: seam jumps with rtc off, replace, guided", run: runAsyncSim},
		{name: "version", summary: "print the module version and the VCS revision this binary was built from", run: runVersion},
	}
}

// exitError carries a process exit code through the error chain.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// main runs a command under a context the first SIGINT or SIGTERM cancels;
// a second signal, or the -shutdown-grace period (before the command name)
// passing without the command returning, exits at once (internal/shutdown).
// An interrupted command exits with 128 + the signal's number.
func main() {
	args, grace, err := globalFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "fastwam: %v\n", err)
		os.Exit(2)
	}
	surviveClosedOutput()
	h := shutdown.Notify(context.Background(), shutdown.Options{Name: "fastwam", Grace: grace})
	code := run(h.Context(), args, os.Stdout, os.Stderr)
	h.Stop()
	os.Exit(h.ExitCode(code))
}

// run executes the command line args (without the program name) and
// returns the exit status: 0 on success and for help, which goes to
// stdout; 2 for usage errors, reported on stderr; 1 (or the command's own
// status) when the command fails.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		return help(ctx, args[1:], stdout, stderr)
	case "-version", "--version": // the usual spellings of the version command
		args = append([]string{"version"}, args[1:]...)
	}
	return dispatch(ctx, "fastwam", commands(), args, stdout, stderr)
}

// dispatch runs the command of cmds that args[0] names; prefix is the
// command line so far ("fastwam", "fastwam bag") for messages.
func dispatch(ctx context.Context, prefix string, cmds []command, args []string, stdout, stderr io.Writer) int {
	c, ok := find(cmds, args[0])
	if !ok {
		fmt.Fprintf(stderr, "%s: unknown command %q\n\n", prefix, args[0])
		groupUsage(stderr, prefix, cmds)
		return 2
	}
	name := prefix + " " + c.name
	if c.subcommands == nil {
		return finish(name, c.run(ctx, args[1:], stdout, stderr), stderr)
	}
	if len(args) == 1 {
		groupUsage(stderr, name, c.subcommands)
		fmt.Fprintf(stderr, "%s: needs a subcommand\n", name)
		return 2
	}
	switch args[1] {
	case "help", "-h", "-help", "--help":
		return help(ctx, append([]string{c.name}, args[2:]...), stdout, stderr)
	}
	return dispatch(ctx, name, c.subcommands, args[1:], stdout, stderr)
}

// finish reports a command's error on stderr and returns the exit status;
// help (flag.ErrHelp) is success.
func finish(name string, err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "%s: %v\n", name, err)
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

// help prints, to stdout, the usage of the command that path names
// ("parity", "bag make"; none: the list of commands). An unknown name is a
// usage error (stderr, exit 2).
func help(ctx context.Context, path []string, stdout, stderr io.Writer) int {
	if len(path) == 0 {
		usage(stdout)
		return 0
	}
	cmds, prefix := commands(), "fastwam"
	for i, name := range path {
		c, ok := find(cmds, name)
		if !ok {
			fmt.Fprintf(stderr, "fastwam help: %s has no command %q\n\n", prefix, name)
			groupUsage(stderr, prefix, cmds)
			return 2
		}
		prefix += " " + c.name
		if c.subcommands == nil {
			if i != len(path)-1 {
				fmt.Fprintf(stderr, "fastwam help: %s has no subcommand %q\n", prefix, path[i+1])
				return 2
			}
			return finish(prefix, c.run(ctx, []string{"-h"}, stdout, stderr), stderr)
		}
		cmds = c.subcommands
	}
	groupUsage(stdout, prefix, cmds)
	return 0
}

func find(cmds []command, name string) (command, bool) {
	for _, c := range cmds {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func usage(w io.Writer) {
	groupUsage(w, "fastwam", commands())
	fmt.Fprintln(w, "'fastwam help <command>' (or 'fastwam <command> -h') lists a command's flags.")
	fmt.Fprintln(w, "\nglobal flag, before the command:\n"+
		"  -shutdown-grace D  after the first SIGINT/SIGTERM, how long the orderly shutdown may take (default 5s);\n"+
		"                     then, or at a second signal, fastwam exits at once with 130 (SIGINT) or 143 (SIGTERM)")
}

// groupUsage lists the commands of a group.
func groupUsage(w io.Writer, prefix string, cmds []command) {
	fmt.Fprintf(w, "usage: %s <command> [flags]\n\ncommands:\n", prefix)
	for _, c := range cmds {
		name := c.name
		if c.subcommands != nil {
			name += " " + c.subcommands[0].name
		}
		fmt.Fprintf(w, "  %-12s %s\n", name, c.summary)
	}
	fmt.Fprintln(w)
}

// cmdFlags is a command's flag set: -h prints its usage to stdout (exit
// 0); a parse error prints the usage to stderr and is a usage error
// (exit 2) that run reports after it.
type cmdFlags struct {
	*flag.FlagSet
	name, synopsis string
	stdout, stderr io.Writer
	usageOut       io.Writer // where Usage writes; stderr outside parse
}

// newFlags makes a command's flag set that reports errors instead of
// exiting; synopsis follows "usage: fastwam <name> " in the usage text.
func newFlags(name string, stdout, stderr io.Writer, synopsis string) *cmdFlags {
	f := &cmdFlags{FlagSet: flag.NewFlagSet("fastwam "+name, flag.ContinueOnError),
		name: name, synopsis: synopsis, stdout: stdout, stderr: stderr, usageOut: stderr}
	f.SetOutput(stderr)
	f.Usage = func() {
		fmt.Fprintf(f.usageOut, "usage: fastwam %s %s\n\nflags:\n", f.name, f.synopsis)
		out := f.Output()
		f.SetOutput(f.usageOut)
		f.PrintDefaults()
		f.SetOutput(out)
	}
	return f
}

// parse parses args. -h prints the usage to stdout and returns
// flag.ErrHelp; a bad flag prints the usage to stderr and returns a usage
// error (exit 2).
func (f *cmdFlags) parse(args []string) error {
	var buf bytes.Buffer
	f.usageOut = &buf
	f.SetOutput(io.Discard) // the flag package's own error line: run prints the error once
	err := f.Parse(args)
	f.SetOutput(f.stderr)
	f.usageOut = f.stderr
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		_, werr := f.stdout.Write(buf.Bytes())
		if werr != nil {
			return fmt.Errorf("write usage: %w", werr)
		}
		return err
	}
	f.stderr.Write(buf.Bytes())
	return &exitError{code: 2, err: err}
}

// usageError marks bad command-line use (exit code 2).
func usageError(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}
