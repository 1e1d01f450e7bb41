// Package proc answers questions about other processes of the machine.
package proc

import (
	"errors"
	"syscall"
)

// Alive reports whether a process with this pid exists: kill(pid, 0) fails
// with ESRCH only when there is none (EPERM: it exists and belongs to
// another user). Any other answer, and a pid that cannot name one process
// (0 or less), counts as alive, so a caller that removes what a dead
// process left behind removes nothing on doubt.
func Alive(pid int) bool {
	if pid <= 0 {
		return true
	}
	err := syscall.Kill(pid, 0)
	return !errors.Is(err, syscall.ESRCH)
}
