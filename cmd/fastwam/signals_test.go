package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fastwam/actionexpert/internal/shutdown"
)

// mainProcessEnv makes TestMainProcess run main() with the arguments after
// "--": the subprocess tests below re-run this test binary as the fastwam
// command, signal handling and os.Exit included.
const mainProcessEnv = "FASTWAM_TEST_MAIN_PROCESS"

// TestMainProcess is the child's body; it does nothing in a normal test run.
func TestMainProcess(t *testing.T) {
	if os.Getenv(mainProcessEnv) != "1" {
		return
	}
	os.Args = append([]string{"fastwam"}, flag.Args()...)
	main()
}

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fastwamProcess is the fastwam command running as a child process.
type fastwamProcess struct {
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	exited         chan struct{}
}

func startFastwam(t *testing.T, env []string, args ...string) *fastwamProcess {
	t.Helper()
	p := &fastwamProcess{stdout: &lockedBuffer{}, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], append([]string{"-test.run=^TestMainProcess$", "-test.count=1", "--"}, args...)...)
	p.cmd.Env = append(append(os.Environ(), mainProcessEnv+"=1"), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// waitFor waits until b holds want, failing if the process exits first or
// after a minute (a cold start on a loaded machine is slow).
func (p *fastwamProcess) waitFor(t *testing.T, b *lockedBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(b.String(), want) {
		select {
		case <-p.exited:
			if strings.Contains(b.String(), want) {
				return
			}
			t.Fatalf("fastwam exited (%v) before writing %q\nstdout:\n%s\nstderr:\n%s", p.cmd.ProcessState, want, p.stdout, p.stderr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("fastwam did not write %q within a minute\nstdout:\n%s\nstderr:\n%s", want, p.stdout, p.stderr)
		}
	}
}

// signalAndWait sends s and waits at most within for the process to end; it
// returns the exit status (-1 if a signal killed it) and the time taken.
func (p *fastwamProcess) signalAndWait(t *testing.T, s os.Signal, within time.Duration) (int, time.Duration) {
	t.Helper()
	t0 := time.Now()
	if err := p.cmd.Process.Signal(s); err != nil {
		t.Fatalf("signal %v: %v", s, err)
	}
	select {
	case <-p.exited:
	case <-time.After(within):
		t.Fatalf("fastwam still running %v after %v\nstdout:\n%s\nstderr:\n%s", within, s, p.stdout, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode(), time.Since(t0)
}

// htpParityArgs runs parity on the HTP backend against the QNN test double.
func htpParityArgs(t *testing.T, chunks string) []string {
	lib, ctxPath, goldenPath := fakeContext(t)
	return []string{"parity", "-backend", "htp", "-context", ctxPath, "-golden", goldenPath, "-head-dim", "16",
		"-backend-lib", lib.Path, "-system-lib", lib.Path, "-rpcmem-lib", lib.Path, "-chunks", chunks}
}

// TestSIGTERMDuringBlockedExecute: parity's first graphExecute blocks for two
// minutes without looking at any context (FAKEQNN_EXECUTE_SLEEP_MS); a
// SIGTERM then ends the process when the grace period is over, with 143 and
// the reason on stderr.
func TestSIGTERMDuringBlockedExecute(t *testing.T) {
	args := append([]string{"-shutdown-grace", "2s"}, htpParityArgs(t, "1")...)
	p := startFastwam(t, []string{"FAKEQNN_EXECUTE_SLEEP_MS=120000"}, args...)
	p.waitFor(t, p.stdout, "backend htp") // printed just before the first step
	time.Sleep(500 * time.Millisecond)    // into the blocked execute
	code, el := p.signalAndWait(t, syscall.SIGTERM, 2*time.Second+20*time.Second)
	t.Logf("exit %d %v after SIGTERM\nstderr:\n%s", code, el, p.stderr)
	if code != 143 {
		t.Errorf("exit status %d, want 143", code)
	}
	if el < 2*time.Second-100*time.Millisecond {
		t.Errorf("exited %v after SIGTERM, before the 2s grace: the execute did not block", el)
	}
	for _, want := range []string{
		"fastwam: SIGTERM: shutting down",
		"fastwam: shutdown did not finish within 2s of SIGTERM: exiting with status 143",
	} {
		if !strings.Contains(p.stderr.String(), want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
}

// TestSecondSIGINTDuringBlockedExecute: with a long grace period, a second
// SIGINT ends the blocked process at once with 130.
func TestSecondSIGINTDuringBlockedExecute(t *testing.T) {
	p := startFastwam(t, []string{"FAKEQNN_EXECUTE_SLEEP_MS=120000"}, htpParityArgs(t, "1")...) // default grace
	p.waitFor(t, p.stdout, "backend htp")
	time.Sleep(500 * time.Millisecond)
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	p.waitFor(t, p.stderr, "fastwam: SIGINT: shutting down; a second signal, or "+shutdown.DefaultGrace.String())
	time.Sleep(shutdown.EchoWindow) // a second signal, not the first delivered twice
	code, el := p.signalAndWait(t, syscall.SIGINT, shutdown.DefaultGrace-time.Second)
	t.Logf("exit %d %v after the second SIGINT\nstderr:\n%s", code, el, p.stderr)
	if code != 130 {
		t.Errorf("exit status %d, want 130", code)
	}
	if want := "fastwam: second signal (SIGINT) during shutdown: exiting at once with status 130"; !strings.Contains(p.stderr.String(), want) {
		t.Errorf("stderr lacks %q", want)
	}
}

// TestSIGTERMOrderly: when the execute returns soon (50 ms), the command
// notices the cancelled context and returns by itself, well within the grace
// period: 143, the command's own error naming the signal, no forced exit.
func TestSIGTERMOrderly(t *testing.T) {
	args := append([]string{"-shutdown-grace=1m"}, htpParityArgs(t, "1000")...)
	p := startFastwam(t, []string{"FAKEQNN_EXECUTE_SLEEP_MS=50"}, args...)
	p.waitFor(t, p.stdout, "backend htp")
	time.Sleep(500 * time.Millisecond)
	code, el := p.signalAndWait(t, syscall.SIGTERM, 30*time.Second)
	t.Logf("exit %d %v after SIGTERM\nstderr:\n%s", code, el, p.stderr)
	if code != 143 {
		t.Errorf("exit status %d, want 143", code)
	}
	s := p.stderr.String()
	if !strings.Contains(s, "fastwam parity: ") || strings.Contains(s, "exiting") {
		t.Errorf("want the command's own error and no forced exit, stderr:\n%s", s)
	}
	if strings.Contains(p.stdout.String(), "PASS") {
		t.Errorf("parity passed although interrupted:\n%s", p.stdout)
	}
}

// TestFIFOGoldenRefused: a golden that is a FIFO (or any file that is not
// a regular file) would stall a load in read(2) whatever its context says;
// the golden reader refuses it before reading, so no signal is needed.
func TestFIFOGoldenRefused(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "stalled.npz")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// O_RDWR opens a FIFO without waiting for a reader; the writer stays
	// open, so a reader would never see end of file.
	w, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() { done <- run(context.Background(), []string{"parity", "-golden", fifo}, &stdout, &stderr) }()
	select {
	case code := <-done:
		if code != 1 || !strings.Contains(stderr.String(), "is a named pipe (FIFO), want an .npz golden file: not a regular file") {
			t.Errorf("exit %d, stderr %q; want 1 and the golden refused as not a regular file", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("parity is still reading a FIFO golden after 30s")
	}
}

// TestCancelledParityClosesBackend: cancelling the context a command runs
// under (what the first signal does) makes parity on the HTP backend return
// with its handles freed and its performance vote withdrawn.
func TestCancelledParityClosesBackend(t *testing.T) {
	lib, ctxPath, goldenPath := fakeContext(t)
	args := []string{"parity", "-backend", "htp", "-context", ctxPath, "-golden", goldenPath, "-head-dim", "16",
		"-backend-lib", lib.Path, "-system-lib", lib.Path, "-rpcmem-lib", lib.Path, "-chunks", "100000"}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stdout, stderr := &lockedBuffer{}, &lockedBuffer{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, stdout, stderr) }()
	for deadline := time.Now().Add(time.Minute); !strings.Contains(stdout.String(), "backend htp"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("parity did not start within a minute\n%s\n%s", stdout, stderr)
		}
	}
	time.Sleep(200 * time.Millisecond) // into the timed chunks
	votes := len(lib.PowerVotes())
	cancel(errors.New("interrupted by SIGTERM"))
	var code int
	select {
	case code = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("parity did not return within 30s of the cancellation")
	}
	if code == 0 || strings.Contains(stdout.String(), "PASS") {
		t.Errorf("cancelled parity: exit %d\n%s", code, stdout)
	}
	if !strings.Contains(stderr.String(), "context canceled") {
		t.Errorf("stderr does not say the run was cancelled: %q", stderr)
	}
	if n := lib.LiveHandles(); n != 0 {
		t.Errorf("%d QNN handles live after the cancelled run", n)
	}
	// The down-vote: power saver (mode 4) with the 2000 µs sleep latency
	// qnnrt casts on close, after the burst vote of the run.
	if vs := lib.PowerVotes(); len(vs) <= votes {
		t.Errorf("no performance vote after the cancellation (%d votes before, %d after): not withdrawn", votes, len(vs))
	} else if last := vs[len(vs)-1]; last.PowerMode != 4 || last.SleepLatency != 2000 {
		t.Errorf("last vote %+v is not the down-vote (power mode 4, sleep latency 2000)", last)
	}
}

func TestGlobalFlags(t *testing.T) {
	for _, c := range []struct {
		args  []string
		rest  string
		grace time.Duration
		err   string
	}{
		{[]string{"parity", "-shutdown-grace", "1s"}, "parity -shutdown-grace 1s", shutdown.DefaultGrace, ""},
		{[]string{"-shutdown-grace", "1.5s", "parity"}, "parity", 1500 * time.Millisecond, ""},
		{[]string{"--shutdown-grace=10m", "replay", "x"}, "replay x", 10 * time.Minute, ""},
		{[]string{}, "", shutdown.DefaultGrace, ""},
		{[]string{"-shutdown-grace"}, "", 0, "flag -shutdown-grace needs a duration"},
		{[]string{"-shutdown-grace", "5", "parity"}, "", 0, `want a duration in (0, 1h0m0s] such as 5s or 500ms, got "5"`},
		{[]string{"-shutdown-grace=0s", "parity"}, "", 0, `got "0s"`},
		{[]string{"-shutdown-grace=-1s", "parity"}, "", 0, `got "-1s"`},
		{[]string{"-shutdown-grace=2h", "parity"}, "", 0, `got "2h"`},
	} {
		rest, grace, err := globalFlags(c.args)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: error %v, want one containing %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || strings.Join(rest, " ") != c.rest || grace != c.grace {
			t.Errorf("%q: %q, %v, %v; want %q, %v", c.args, rest, grace, err, c.rest, c.grace)
		}
	}
}
