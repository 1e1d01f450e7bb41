package regfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestOpenRefusesWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	cases := map[string]string{
		fifo:        "named pipe",
		dir:         "folder",
		"/dev/zero": "character device",
	}
	for path, want := range cases {
		done := make(chan error, 1)
		go func() { _, _, err := Open(path, "a test file"); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "want a test file") {
				t.Errorf("Open(%s) = %v, want a %q error wrapping ErrNotRegular", path, err, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Open(%s) blocked", path)
		}
	}
}

func TestReadFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := ReadFile(p, "f", 10)
	if err != nil || string(b) != "0123456789" {
		t.Fatalf("ReadFile at the limit = %q, %v", b, err)
	}
	if _, err := ReadFile(p, "f", 9); err == nil || !strings.Contains(err.Error(), "10 bytes, more than the 9") {
		t.Fatalf("ReadFile over the limit = %v", err)
	}
	f, _, err := Open(p, "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Read(make([]byte, 4)); err != nil {
		t.Fatalf("read after Open: %v", err)
	}
}
