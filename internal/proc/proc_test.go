package proc

import (
	"os"
	"os/exec"
	"testing"
)

func TestAlive(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Error("this process is not alive")
	}
	if !Alive(1) {
		t.Error("pid 1 (another user's or ours) is not alive")
	}
	for _, pid := range []int{0, -1} {
		if !Alive(pid) {
			t.Errorf("pid %d counts as dead; want alive (no doubt resolved towards removal)", pid)
		}
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("cannot run a child: %v", err)
	}
	// Reaped: the pid names no process (pids are handed out in turn, so
	// it is not reused within this test).
	if Alive(cmd.Process.Pid) {
		t.Errorf("pid %d of an exited, reaped child is alive", cmd.Process.Pid)
	}
}
