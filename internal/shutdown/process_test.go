package shutdown

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The subprocess tests re-run this test binary as a child that installs a
// Handler and then works in one of the ways childMode names; the parent
// signals it and watches how it ends.
const (
	childModeEnv  = "SHUTDOWN_TEST_CHILD"
	childGraceEnv = "SHUTDOWN_TEST_GRACE"
)

// TestChildProcess is the child's body; it does nothing in a normal test run.
func TestChildProcess(t *testing.T) {
	mode := os.Getenv(childModeEnv)
	if mode == "" {
		return
	}
	grace, err := time.ParseDuration(os.Getenv(childGraceEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	h := Notify(context.Background(), Options{Name: "child", Grace: grace})
	fmt.Println("ready")
	switch mode {
	case "block":
		// A call that ignores ctx, like a blocked device call or a long
		// load: only the grace period or a second signal ends the process.
		// nanosleep, resumed after every signal handler interrupts it.
		req := syscall.Timespec{Sec: 120}
		for {
			var rem syscall.Timespec
			if err := syscall.Nanosleep(&req, &rem); err != syscall.EINTR {
				break
			}
			req = rem
		}
		fmt.Println("block returned")
	case "orderly":
		<-h.Context().Done()
		fmt.Println("cleaned up:", context.Cause(h.Context()))
	}
	h.Stop()
	os.Exit(h.ExitCode(0))
}

// child is a running child process.
type child struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	exited         chan struct{}
}

func startChild(t *testing.T, mode string, grace time.Duration) *child {
	t.Helper()
	c := &child{stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestChildProcess$", "-test.count=1")
	c.cmd.Env = append(os.Environ(), childModeEnv+"="+mode, childGraceEnv+"="+grace.String())
	c.cmd.Stdout, c.cmd.Stderr = c.stdout, c.stderr
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.cmd.Process.Kill()
		<-c.exited
	})
	c.waitFor(t, c.stdout, "ready")
	return c
}

// waitFor waits until b holds want, failing if the child exits first or
// after 30 s.
func (c *child) waitFor(t *testing.T, b *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(b.String(), want) {
		select {
		case <-c.exited:
			if strings.Contains(b.String(), want) {
				return
			}
			t.Fatalf("child exited before writing %q\nstdout:\n%s\nstderr:\n%s", want, c.stdout, c.stderr)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("child did not write %q within 30s\nstdout:\n%s\nstderr:\n%s", want, c.stdout, c.stderr)
		}
	}
}

func (c *child) signal(t *testing.T, s os.Signal) {
	t.Helper()
	if err := c.cmd.Process.Signal(s); err != nil {
		t.Fatalf("signal %v: %v", s, err)
	}
}

// wait waits for the child to end, at most within, and returns its exit
// status (-1 if a signal killed it) and how long it took.
func (c *child) wait(t *testing.T, since time.Time, within time.Duration) (int, time.Duration) {
	t.Helper()
	select {
	case <-c.exited:
	case <-time.After(within):
		t.Fatalf("child still running %v after the signal\nstderr:\n%s", within, c.stderr)
	}
	return c.cmd.ProcessState.ExitCode(), time.Since(since)
}

// TestProcessSIGTERMWhileBlocked: a child stuck in a call that ignores its
// context exits when the grace period ends, with 143 and the message.
func TestProcessSIGTERMWhileBlocked(t *testing.T) {
	const grace = 2 * time.Second
	c := startChild(t, "block", grace)
	t0 := time.Now()
	c.signal(t, syscall.SIGTERM)
	code, el := c.wait(t, t0, grace+15*time.Second)
	t.Logf("exit %d after %v\n%s", code, el, c.stderr)
	if code != 143 {
		t.Errorf("exit status %d, want 143", code)
	}
	if el < grace-100*time.Millisecond {
		t.Errorf("exited %v after SIGTERM, before the %v grace period", el, grace)
	}
	if want := "child: shutdown did not finish within 2s of SIGTERM: exiting with status 143"; !strings.Contains(c.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, c.stderr)
	}
	if strings.Contains(c.stdout.String(), "block returned") {
		t.Errorf("the blocking call returned: the test proves nothing")
	}
}

// TestProcessSecondSIGINT: a second SIGINT ends a stuck child at once with
// 130, long before its grace period.
func TestProcessSecondSIGINT(t *testing.T) {
	const grace = time.Minute
	c := startChild(t, "block", grace)
	c.signal(t, syscall.SIGINT)
	// Wait until the first is handled: the kernel merges a signal sent
	// while the same one is still pending.
	c.waitFor(t, c.stderr, "child: SIGINT: shutting down")
	time.Sleep(EchoWindow) // a second signal, not the first delivered twice
	t0 := time.Now()
	c.signal(t, syscall.SIGINT)
	code, el := c.wait(t, t0, 15*time.Second)
	t.Logf("exit %d %v after the second SIGINT\n%s", code, el, c.stderr)
	if code != 130 {
		t.Errorf("exit status %d, want 130", code)
	}
	if want := "child: second signal (SIGINT) during shutdown: exiting at once with status 130"; !strings.Contains(c.stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, c.stderr)
	}
}

// TestProcessOrderly: a child that watches its context shuts down in order
// (its cleanup runs) well within the grace period, still with 143.
func TestProcessOrderly(t *testing.T) {
	const grace = time.Minute
	c := startChild(t, "orderly", grace)
	t0 := time.Now()
	c.signal(t, syscall.SIGTERM)
	code, el := c.wait(t, t0, 15*time.Second)
	if code != 143 {
		t.Errorf("exit status %d, want 143\nstderr:\n%s", code, c.stderr)
	}
	if !strings.Contains(c.stdout.String(), "cleaned up: interrupted by SIGTERM") {
		t.Errorf("the cleanup did not run:\n%s", c.stdout)
	}
	if s := c.stderr.String(); strings.Contains(s, "exiting") {
		t.Errorf("orderly shutdown reported a forced exit:\n%s", s)
	}
	t.Logf("orderly exit after %v", el)
}
