// Package regfile opens files that must be regular files, without blocking.
//
// os.Open of a FIFO blocks until a writer appears, and a character device
// such as /dev/zero never ends; a reader that is handed either where it
// expects a file hangs or runs out of memory. Open refuses both before any
// byte is read: the path is opened non-blocking and checked with fstat on
// the descriptor itself, so a file swapped between a check and the open
// cannot slip through.
package regfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrNotRegular is wrapped by the error Open and ReadFile return for a path
// that is not a regular file.
var ErrNotRegular = errors.New("not a regular file")

// Open opens path for reading and returns the file and its size. A path that
// is not a regular file (a FIFO, a device, a socket, a folder) is refused
// with an error that names it, its kind and what, the caller's word for the
// file expected ("a weights file", "the bag's metadata.yaml").
func Open(path, what string) (*os.File, int64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("%s is %s, want %s: %w", path, kind(st.Mode()), what, ErrNotRegular)
	}
	// Reads of a regular file never block, O_NONBLOCK or not; clear it all
	// the same so that the descriptor behaves as os.Open's would.
	if sc, err := f.SyscallConn(); err == nil {
		_ = sc.Control(func(fd uintptr) { _ = syscall.SetNonblock(int(fd), false) })
	}
	return f, st.Size(), nil
}

// ReadFile reads a whole regular file of at most limit bytes. A larger file
// is refused before it is read, and a file that grows past limit while it is
// read is refused too, so memory stays bounded by limit.
func ReadFile(path, what string, limit int64) ([]byte, error) {
	f, size, err := Open(path, what)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if size > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the %d allowed for %s", path, size, limit, what)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s grew past the %d bytes allowed for %s while it was read", path, limit, what)
	}
	return b, nil
}

func kind(m os.FileMode) string {
	switch {
	case m&os.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m.IsDir():
		return "a folder"
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	default:
		return fmt.Sprintf("not a regular file (mode %v)", m)
	}
}
