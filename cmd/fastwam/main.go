// Command fastwam is the command-line companion of the Fast-WAM action-expert
// node: parity checks of a backend against golden data, inspection of QNN
// context binaries, benchmarks, and rosbag replay. It is free of cgo, so
//
//	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 go build ./cmd/fastwam
//
// gives one static binary to copy to the robot; QNN and OpenBLAS are loaded
// at run time.
//
// Usage:
//
//	fastwam parity   [flags]            compare a backend with a golden (default: the embedded tiny golden on the CPU)
//	fastwam inspect  <context.bin>      list the graphs and tensors of a QNN context binary
//	fastwam bench    [flags]            CPU backend latency, and the ratio to PyTorch
//	fastwam bag make -o DIR [flags]     write a regression bag from golden inputs (expected chunks: the CPU reference's)
//	fastwam replay   [flags] [bag]      replay a bag through the node and compare with its recorded chunks (default: the embedded regression bag on the CPU)
//	fastwam help     [command]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/fastwam/actionexpert/internal/shutdown"
)

// command is one subcommand.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"parity", "compare a backend with golden data; exits 1 below the cosine gate", runParity},
		{"inspect", "list the graphs and tensors of a QNN context binary", runInspect},
		{"bench", "measure the CPU backend (and PyTorch, for the ratio)", runBench},
		{"bag", "write a regression bag from golden inputs (bag make)", runBag},
		{"replay", "replay a bag through the node and compare with its recorded chunks; exits 1 naming failing chunks", runReplay},
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
	h := shutdown.Notify(context.Background(), shutdown.Options{Name: "fastwam", Grace: grace})
	code := run(h.Context(), args, os.Stdout, os.Stderr)
	h.Stop()
	os.Exit(h.ExitCode(code))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			args = []string{args[1], "-h"}
		} else {
			usage(stderr)
			if len(args) == 0 {
				return 2
			}
			return 0
		}
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		}
		fmt.Fprintf(stderr, "fastwam %s: %v\n", c.name, err)
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	fmt.Fprintf(stderr, "fastwam: unknown command %q\n\n", args[0])
	usage(stderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: fastwam <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'fastwam <command> -h' for the flags of a command.")
}

// newFlags makes a flag set that reports errors instead of exiting.
func newFlags(name string, stderr io.Writer, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("fastwam "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: fastwam %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// usageError marks bad command-line use (exit code 2).
func usageError(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}
