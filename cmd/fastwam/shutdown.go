package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/fastwam/actionexpert/internal/shutdown"
)

// globalFlags strips the global flags that come before the command name:
// -shutdown-grace D (or -shutdown-grace=D, with one or two dashes), the time
// the orderly shutdown after the first signal may take. It returns the
// remaining arguments and the grace period (shutdown.DefaultGrace when the
// flag is absent).
func globalFlags(args []string) (rest []string, grace time.Duration, err error) {
	grace = shutdown.DefaultGrace
	for len(args) > 0 {
		name, value, hasValue := strings.Cut(args[0], "=")
		if name != "-shutdown-grace" && name != "--shutdown-grace" {
			break
		}
		args = args[1:]
		if !hasValue {
			if len(args) == 0 {
				return nil, 0, fmt.Errorf("flag %s needs a duration such as 5s or 500ms", name)
			}
			value, args = args[0], args[1:]
		}
		d, err := time.ParseDuration(value)
		if err != nil || d <= 0 || d > shutdown.MaxGrace {
			return nil, 0, fmt.Errorf("flag %s: want a duration in (0, %v] such as 5s or 500ms, got %q", name, shutdown.MaxGrace, value)
		}
		grace = d
	}
	return args, grace, nil
}

// surviveClosedOutput keeps a closed stdout or stderr (`fastwam … 2>&1 |
// head`) from killing the process. By default a Go program dies of SIGPIPE
// when a write to fd 1 or 2 finds the pipe closed; a long command (weights
// make, bag make) would then stop half way, its deferred clean-up not run.
// With SIGPIPE routed to a channel (never read: the signal is only
// discarded) such a write fails with EPIPE instead, and the command goes on
// and finishes its work. A handled signal, unlike an ignored one, is reset
// to its default in the child processes fastwam starts.
func surviveClosedOutput() {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
}
