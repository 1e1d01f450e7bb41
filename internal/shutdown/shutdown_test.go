package shutdown

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer the watcher goroutine and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start makes a Handler that sees no real signals (the test sends them to
// h.sigs) and whose exit reports on exits.
func start(t *testing.T, grace time.Duration) (h *Handler, exits <-chan int, stderr *syncBuffer) {
	t.Helper()
	stderr = &syncBuffer{}
	ex := make(chan int, 2)
	h = newHandler(context.Background(), "prog", stderr, func(code int) { ex <- code })
	h.echo = 50 * time.Millisecond
	h.sharesGroup = func() bool { return true }
	go h.watch(positive(grace))
	t.Cleanup(h.Stop)
	return h, ex, stderr
}

// waitDone waits for ctx to be cancelled, failing the test after a while.
func waitDone(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("context not cancelled 10s after the signal")
	}
}

func waitExit(t *testing.T, exits <-chan int, within time.Duration) int {
	t.Helper()
	select {
	case code := <-exits:
		return code
	case <-time.After(within):
		t.Fatalf("no exit within %v", within)
	}
	return 0
}

func TestFirstSignalCancelsSecondExits(t *testing.T) {
	h, exits, stderr := start(t, time.Hour)
	if h.Signal() != nil || h.ExitCode(3) != 3 {
		t.Fatalf("before any signal: Signal %v, ExitCode(3) %d; want nil, 3", h.Signal(), h.ExitCode(3))
	}
	h.sigs <- syscall.SIGTERM
	waitDone(t, h.Context())
	if got := context.Cause(h.Context()).Error(); got != "interrupted by SIGTERM" {
		t.Errorf("cause %q, want %q", got, "interrupted by SIGTERM")
	}
	if h.Signal() != syscall.SIGTERM || h.ExitCode(0) != 143 || h.ExitCode(1) != 143 {
		t.Errorf("after SIGTERM: Signal %v, ExitCode %d; want SIGTERM, 143", h.Signal(), h.ExitCode(0))
	}
	select {
	case code := <-exits:
		t.Fatalf("exit(%d) after one signal with an hour of grace", code)
	case <-time.After(100 * time.Millisecond):
	}
	h.sigs <- syscall.SIGINT
	if code := waitExit(t, exits, 10*time.Second); code != 130 {
		t.Errorf("second signal SIGINT: exit %d, want 130", code)
	}
	want := []string{
		"prog: SIGTERM: shutting down; a second signal, or 1h0m0s without finishing, exits at once",
		"prog: second signal (SIGINT) during shutdown: exiting at once with status 130",
	}
	if got := strings.Split(strings.TrimSpace(stderr.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr, strings.Join(want, "\n"))
	}
}

func TestGraceEndsTheProcess(t *testing.T) {
	h, exits, stderr := start(t, 300*time.Millisecond)
	t0 := time.Now()
	h.sigs <- syscall.SIGINT
	code := waitExit(t, exits, 10*time.Second)
	if el := time.Since(t0); el < 300*time.Millisecond {
		t.Errorf("exited %v after the signal, before the 300ms grace", el)
	}
	if code != 130 {
		t.Errorf("exit %d, want 130", code)
	}
	if want := "prog: shutdown did not finish within 300ms of SIGINT: exiting with status 130\n"; !strings.HasSuffix(stderr.String(), want) {
		t.Errorf("stderr %q lacks %q", stderr, want)
	}
}

func TestStopBeforeGraceDoesNotExit(t *testing.T) {
	h, exits, stderr := start(t, 200*time.Millisecond)
	h.sigs <- syscall.SIGTERM
	waitDone(t, h.Context())
	h.Stop() // the orderly shutdown finished in time
	h.Stop()
	select {
	case code := <-exits:
		t.Fatalf("exit(%d) after Stop", code)
	case <-time.After(500 * time.Millisecond):
	}
	if strings.Contains(stderr.String(), "did not finish") {
		t.Errorf("stderr after Stop: %q", stderr)
	}
	if h.ExitCode(0) != 143 {
		t.Errorf("ExitCode after an orderly SIGTERM shutdown: %d, want 143", h.ExitCode(0))
	}
	h.SetGrace(time.Second) // must not block after Stop
}

func TestStopCancelsWithoutSignal(t *testing.T) {
	h, _, _ := start(t, time.Second)
	h.Stop()
	waitDone(t, h.Context())
	if h.Signal() != nil || h.ExitCode(0) != 0 {
		t.Errorf("no signal: Signal %v, ExitCode %d; want nil, 0", h.Signal(), h.ExitCode(0))
	}
	if c := context.Cause(h.Context()); c != context.Canceled {
		t.Errorf("cause %v, want context.Canceled", c)
	}
}

func TestSetGraceCountsFromTheFirstSignal(t *testing.T) {
	h, exits, stderr := start(t, time.Hour)
	h.sigs <- syscall.SIGTERM
	waitDone(t, h.Context())
	time.Sleep(50 * time.Millisecond)
	h.SetGrace(time.Millisecond) // already over: exit at once
	if code := waitExit(t, exits, 10*time.Second); code != 143 {
		t.Errorf("exit %d, want 143", code)
	}
	if want := "shutdown did not finish within 1ms of SIGTERM"; !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr %q lacks %q", stderr, want)
	}

	h2, exits2, _ := start(t, 100*time.Millisecond)
	h2.SetGrace(time.Hour) // before any signal: the hour applies
	h2.sigs <- syscall.SIGINT
	select {
	case code := <-exits2:
		t.Fatalf("exit(%d) 100ms-grace handler extended to an hour", code)
	case <-time.After(600 * time.Millisecond):
	}
}

func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		sig  syscall.Signal
		name string
		code int
	}{{syscall.SIGINT, "SIGINT", 130}, {syscall.SIGTERM, "SIGTERM", 143}, {syscall.SIGHUP, "SIGHUP", 129}, {syscall.SIGQUIT, "SIGQUIT", 131}} {
		if got := exitCode(c.sig); got != c.code {
			t.Errorf("exitCode(%s) = %d, want %d", c.name, got, c.code)
		}
		if got := signalName(c.sig); got != c.name {
			t.Errorf("signalName(%d) = %q, want %q", int(c.sig), got, c.name)
		}
	}
	if positive(0) != DefaultGrace || positive(-time.Second) != DefaultGrace || positive(time.Second) != time.Second {
		t.Errorf("positive: %v %v %v", positive(0), positive(-time.Second), positive(time.Second))
	}
}

// blockedWriter is a stderr nobody reads: every write blocks until release.
type blockedWriter struct{ release chan struct{} }

func (b blockedWriter) Write(p []byte) (int, error) {
	<-b.release
	return len(p), nil
}

func TestBlockedStderrDoesNotPreventExit(t *testing.T) {
	w := blockedWriter{make(chan struct{})}
	defer close(w.release)
	exits := make(chan int, 2)
	h := newHandler(context.Background(), "prog", w, func(code int) { exits <- code })
	go h.watch(100 * time.Millisecond)
	h.sigs <- syscall.SIGTERM
	waitDone(t, h.Context())
	t0 := time.Now()
	if code := waitExit(t, exits, 10*time.Second); code != 143 {
		t.Errorf("exit %d, want 143", code)
	}
	if el := time.Since(t0); el > 100*time.Millisecond+maxMessageWait+5*time.Second {
		t.Errorf("exit took %v with a blocked stderr", el)
	}
	h.Stop()
}

// TestEchoedSignalIsTheSameRequest: a signal right after the first (a
// supervisor's forward of the one the process group already got) does not
// end the process; one after the window does.
func TestEchoedSignalIsTheSameRequest(t *testing.T) {
	h, exits, stderr := start(t, time.Hour)
	h.echo = 300 * time.Millisecond
	h.sigs <- syscall.SIGINT
	waitDone(t, h.Context())
	h.sigs <- syscall.SIGINT
	select {
	case code := <-exits:
		t.Fatalf("exit(%d) on a signal within the echo window", code)
	case <-time.After(400 * time.Millisecond):
	}
	if !strings.Contains(stderr.String(), "taken as the same request delivered twice") {
		t.Errorf("stderr does not note the echo:\n%s", stderr)
	}
	h.sigs <- syscall.SIGINT
	if code := waitExit(t, exits, 10*time.Second); code != 130 {
		t.Errorf("signal after the window: exit %d, want 130", code)
	}
}

// TestEchoNeedsSameSignalAndSharedGroup: within the echo window, another
// signal than the first, or any signal to a process in a process group of
// its own (no parent in its group could have forwarded it: a person's
// quick second Ctrl-C), exits at once.
func TestEchoNeedsSameSignalAndSharedGroup(t *testing.T) {
	for _, tc := range []struct {
		name          string
		first, second syscall.Signal
		shares        bool
		want          int
	}{
		{"SIGTERM then SIGINT", syscall.SIGTERM, syscall.SIGINT, true, 130},
		{"own process group", syscall.SIGINT, syscall.SIGINT, false, 130},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, exits, _ := start(t, time.Hour)
			h.echo = time.Hour
			h.sharesGroup = func() bool { return tc.shares }
			h.sigs <- tc.first
			waitDone(t, h.Context())
			h.sigs <- tc.second
			if code := waitExit(t, exits, 10*time.Second); code != tc.want {
				t.Errorf("exit %d, want %d", code, tc.want)
			}
		})
	}
}
