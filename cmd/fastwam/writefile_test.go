package main

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// temps lists the temporary files of path left in its folder.
func temps(t *testing.T, path string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestClosedOutputPipe runs weights make as a child whose stdout and stderr
// are a pipe nobody reads any more (`2>&1 | head` after head exited): the
// command must finish its file instead of dying of SIGPIPE half way and
// leaving its temporary file behind.
func TestClosedOutputPipe(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close() // the reader is gone before the child writes a byte
	out := filepath.Join(t.TempDir(), "w.safetensors")
	args := append([]string{"weights", "make", "-o", out, "-progress", "on"}, smallWeightsFlags...)
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^TestMainProcess$", "-test.count=1", "--"}, args...)...)
	cmd.Env = append(os.Environ(), mainProcessEnv+"=1")
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatal("weights make with a closed output pipe still runs after 2 minutes")
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Errorf("weights make was killed by %v writing to a closed pipe", ws.Signal())
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("weights make did not write its file: %v", err)
	}
	if left := temps(t, out); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

// TestWriteFileMode: what writeFile writes (weights make -o, replay -json
// and -junit) gets os.Create's mode: 0666 less the umask for a new file,
// the old permissions for a replaced one.
func TestWriteFileMode(t *testing.T) {
	old := syscall.Umask(0o027)
	defer syscall.Umask(old)
	dir := t.TempDir()
	w := filepath.Join(dir, "w.safetensors")
	makeWeights(t, w)
	if st, err := os.Stat(w); err != nil || st.Mode().Perm() != 0o640 {
		t.Errorf("weights make -o under umask 027: mode %v (%v), want -rw-r-----", st.Mode(), err)
	}
	syscall.Umask(0o002)
	j := filepath.Join(dir, "r.json")
	if err := writeFile(j, func(w io.Writer) error { _, err := io.WriteString(w, "{}"); return err }); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(j); err != nil || st.Mode().Perm() != 0o664 {
		t.Errorf("new file under umask 002: mode %v (%v), want -rw-rw-r--", st.Mode(), err)
	}
	if err := os.Chmod(j, 0o666); err != nil { // kept even where the umask would clear bits
		t.Fatal(err)
	}
	if err := writeFile(j, func(w io.Writer) error { _, err := io.WriteString(w, "[]"); return err }); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(j); err != nil || st.Mode().Perm() != 0o666 {
		t.Errorf("replaced file: mode %v (%v), want its old -rw-rw-rw-", st.Mode(), err)
	}
	if err := os.Chmod(j, 0o604); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(j, func(w io.Writer) error { _, err := io.WriteString(w, "[]"); return err }); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(j); err != nil || st.Mode().Perm() != 0o604 {
		t.Errorf("replaced file: mode %v (%v), want its old -rw----r--", st.Mode(), err)
	}
}

// TestWriteFileFailures: a write that fails or panics leaves neither the
// file nor a temporary file; an existing file is kept as it was.
func TestWriteFileFailures(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "out.json")
	boom := errors.New("boom")
	if err := writeFile(p, func(io.Writer) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("error %v, want boom", err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the caller")
			}
		}()
		writeFile(p, func(io.Writer) error { panic("write panicked") })
	}()
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("%s exists after failed writes (%v)", p, err)
	}
	if left := temps(t, p); len(left) != 0 {
		t.Errorf("temporary files left behind: %v", left)
	}
}

// TestRemoveStaleTemps: the temporary files of a writer that no longer
// runs are removed before the next write of the same path; everything
// else is left alone.
func TestRemoveStaleTemps(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "w.safetensors")
	// dead is above PID_MAX_LIMIT (4194304), so no process has it; the
	// parent (go test) runs.
	const dead = 1<<22 + 1
	alive := os.Getppid()
	alivePID := func(pid int) bool { return pid != dead }
	name := func(rest string) string { return filepath.Join(dir, ".w.safetensors.tmp-"+rest) }
	file := func(path string) {
		if err := os.WriteFile(path, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stale := name(strconv.Itoa(dead) + "-123")
	file(stale)
	keep := []string{
		name(strconv.Itoa(alive) + "-123"),                        // its writer runs
		name(strconv.Itoa(os.Getpid()) + "-77"),                   // this process's own
		name(strconv.Itoa(dead) + "-12x"),                         // not our name
		name("123456789"),                                         // no pid in the name
		filepath.Join(dir, ".other.tmp-"+strconv.Itoa(dead)+"-1"), // another file's
	}
	for _, k := range keep {
		file(k)
	}
	link, sub := name(strconv.Itoa(dead)+"-5"), name(strconv.Itoa(dead)+"-6")
	if err := os.Symlink(keep[0], link); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, link, sub)
	removeStaleTemps(p, alivePID)
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("%s of a dead writer is still there (%v)", stale, err)
	}
	for _, k := range keep {
		if _, err := os.Lstat(k); err != nil {
			t.Errorf("%s was removed: %v", k, err)
		}
	}
	// writeFile does it by itself, with the real process table.
	file(stale)
	if err := writeFile(p, func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }); err != nil {
		t.Fatal(err)
	}
	left := temps(t, p)
	slices.Sort(left)
	if slices.Contains(left, stale) || len(left) != 6 {
		t.Errorf("after writeFile: %s", strings.Join(left, "\n"))
	}
}
