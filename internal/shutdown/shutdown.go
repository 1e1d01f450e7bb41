// Package shutdown turns SIGINT and SIGTERM into an orderly shutdown with a
// deadline.
//
// The first signal cancels the context a command runs under, so it can close
// its backend, withdraw its performance vote and finalise its output. That
// needs the command to return: a load or a device call that does not watch
// its context may keep it for minutes. So the first signal also starts a
// grace period, and the process exits at once, with the conventional status
// 128 + the signal's number (130 for SIGINT, 143 for SIGTERM) and one line on
// stderr saying why, when
//
//   - a second signal arrives ("second signal"), or
//   - the grace period ends first ("shutdown did not finish within 5s").
//
// A signal within EchoWindow of the first is not a second one when it can
// be the same request delivered twice: it is the same signal, and the
// process shares its process group with its parent. That is how an echo
// arises: the whole group gets the signal and the parent, a supervisor in
// the same group, forwards it to its child (`ros2 launch` run from a
// script or a service sends SIGINT again to a group that already got it;
// `timeout` signals child and group). It is noted on stderr and ignored.
// A process in a group of its own (a shell's job) gets no echo, so there a
// quick second Ctrl-C exits at once, as does a SIGTERM after a SIGINT.
//
// Exiting at once runs no deferred calls: it is the escape from a shutdown
// that is stuck, which the operator (or a supervisor such as ros2 launch or
// timeout) asked for twice or waited too long on.
//
// A program installs one Handler in main, runs its work under
// Handler.Context, then calls Handler.Stop and exits with Handler.ExitCode.
package shutdown

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// DefaultGrace is the grace period used when none (or a non-positive one) is
// given: long enough to close a backend and finalise a bag, short enough
// that a stuck process does not outlive a supervisor's patience.
const DefaultGrace = 5 * time.Second

// MaxGrace is the longest grace period the programs' flags and parameters
// accept. The package itself does not enforce it.
const MaxGrace = time.Hour

// Options configures Notify.
type Options struct {
	// Name prefixes every message, as in "fastwam: SIGTERM: shutting down".
	Name string
	// Grace is how long the orderly shutdown may take after the first
	// signal; zero or negative means DefaultGrace.
	Grace time.Duration
}

// Handler watches SIGINT and SIGTERM for one program run. Its methods are
// safe for concurrent use.
type Handler struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	name   string
	stderr io.Writer
	exit   func(code int)

	sigs  chan os.Signal     // signals, from os/signal (or a test)
	grace chan time.Duration // SetGrace to the watcher
	quit  chan struct{}      // closed by Stop
	done  chan struct{}      // closed when the watcher has returned
	once  sync.Once          // guards close(quit)
	mu    sync.Mutex         // guards first
	first os.Signal          // the first signal, nil before it
	echo  time.Duration      // EchoWindow (tests shorten it)
	// sharesGroup says whether the process shares its process group with
	// its parent, the condition for an echo (tests replace it).
	sharesGroup func() bool
}

// EchoWindow is how soon after the first signal another one counts as the
// same request delivered twice rather than a second signal.
const EchoWindow = 500 * time.Millisecond

// Notify starts handling SIGINT and SIGTERM: from now on they no longer end
// the process by default. The first cancels Handler.Context (its cause says
// which signal) and starts the grace period; a second one, or the end of the
// grace period, exits the process at once as the package documentation
// describes. The caller must call Stop when its work is done.
func Notify(parent context.Context, o Options) *Handler {
	h := newHandler(parent, o.Name, os.Stderr, os.Exit)
	signal.Notify(h.sigs, syscall.SIGINT, syscall.SIGTERM)
	go h.watch(positive(o.Grace))
	return h
}

// newHandler makes a Handler whose messages go to stderr and which ends the
// process with exit; the caller starts watch.
func newHandler(parent context.Context, name string, stderr io.Writer, exit func(int)) *Handler {
	ctx, cancel := context.WithCancelCause(parent)
	return &Handler{
		ctx: ctx, cancel: cancel, name: name, stderr: stderr, exit: exit,
		sigs:  make(chan os.Signal, 2),
		grace: make(chan time.Duration),
		quit:  make(chan struct{}),
		done:  make(chan struct{}),
		echo:  EchoWindow,

		sharesGroup: sharesParentGroup,
	}
}

// Context is cancelled by the first signal (context.Cause names it) or by
// Stop.
func (h *Handler) Context() context.Context { return h.ctx }

// SetGrace changes the grace period, for programs that learn it only after
// they must already handle signals (a node reading its parameters). If the
// first signal has arrived, the new period counts from that signal, and a
// period already over ends the process at once. Zero or negative means
// DefaultGrace. After Stop it does nothing.
func (h *Handler) SetGrace(d time.Duration) {
	select {
	case h.grace <- positive(d):
	case <-h.done:
	}
}

// Signal returns the first signal received, or nil if none has been.
func (h *Handler) Signal() os.Signal {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.first
}

// ExitCode returns the status a program should exit with after its work
// returned code: 128 + the first signal's number if a signal interrupted it
// (130 for SIGINT, 143 for SIGTERM), else code.
func (h *Handler) ExitCode(code int) int {
	if s := h.Signal(); s != nil {
		return exitCode(s)
	}
	return code
}

// Stop ends the handling: later signals have their default effect again (a
// SIGTERM or SIGINT ends the process), the grace period no longer runs, and
// Context is cancelled. Stop is idempotent.
func (h *Handler) Stop() {
	signal.Stop(h.sigs)
	h.once.Do(func() { close(h.quit) })
	<-h.done
	h.cancel(context.Canceled)
}

// watch is the handler's goroutine: it owns the grace timer and is the only
// caller of exit.
func (h *Handler) watch(grace time.Duration) {
	defer close(h.done)
	var (
		first    os.Signal
		since    time.Time
		timer    *time.Timer
		deadline <-chan time.Time
		said     <-chan struct{} // the last line written
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	exit := func(code int, format string, args ...any) {
		said = h.say(said, format, args...)
		select {
		case <-said:
		case <-time.After(maxMessageWait):
		}
		h.exit(code)
	}
	for {
		select {
		case <-h.quit:
			return
		case grace = <-h.grace:
			if timer != nil {
				timer.Reset(time.Until(since.Add(grace)))
			}
		case s := <-h.sigs:
			if first == nil {
				first, since = s, time.Now()
				h.mu.Lock()
				h.first = s
				h.mu.Unlock()
				said = h.say(said, "%s: %s: shutting down; a second signal, or %v without finishing, exits at once\n",
					h.name, signalName(s), grace)
				h.cancel(&signalError{s})
				timer = time.NewTimer(grace)
				deadline = timer.C
				continue
			}
			if el := time.Since(since); el < h.echo && s == first && h.sharesGroup() {
				said = h.say(said, "%s: %s %v after %s: taken as the same request delivered twice (signal again to exit at once)\n",
					h.name, signalName(s), el.Round(time.Millisecond), signalName(first))
				continue
			}
			exit(exitCode(s), "%s: second signal (%s) during shutdown: exiting at once with status %d\n",
				h.name, signalName(s), exitCode(s))
			return
		case <-deadline:
			exit(exitCode(first), "%s: shutdown did not finish within %v of %s: exiting with status %d\n",
				h.name, grace, signalName(first), exitCode(first))
			return
		}
	}
}

// maxMessageWait bounds how long a forced exit waits for its message to be
// written: a stderr nobody reads must not keep the process alive.
const maxMessageWait = time.Second

// say writes one line to stderr from a goroutine of its own, after the line
// before it (prev, nil for none) has been written, and returns a channel
// closed once it is written: the watcher never blocks on stderr.
func (h *Handler) say(prev <-chan struct{}, format string, args ...any) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		fmt.Fprintf(h.stderr, format, args...)
	}()
	return done
}

// signalError is the cause of a Handler's cancelled context.
type signalError struct{ sig os.Signal }

func (e *signalError) Error() string { return "interrupted by " + signalName(e.sig) }

// signalName returns the conventional name of a signal ("SIGINT",
// "SIGTERM"), or what its String method says for signals other than the
// usual four.
func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	}
	return s.String()
}

// exitCode is 128 + the signal's number, the status a shell reports for a
// process the signal ended; 1 for a signal without a number.
func exitCode(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok && n > 0 && n < 128 {
		return 128 + int(n)
	}
	return 1
}

func positive(d time.Duration) time.Duration {
	if d <= 0 {
		return DefaultGrace
	}
	return d
}

// sharesParentGroup reports whether this process is not its process
// group's leader and its parent is in the same group: only then can the
// parent forward a signal the group already got.
func sharesParentGroup() bool {
	pgrp := syscall.Getpgrp()
	if pgrp == syscall.Getpid() {
		return false
	}
	ppgrp, err := syscall.Getpgid(syscall.Getppid())
	return err == nil && ppgrp == pgrp
}
