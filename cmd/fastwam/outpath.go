package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/fastwam/actionexpert/internal/proc"
)

// Output paths are checked when the command starts, before any work, so a
// typo in -o or -plot costs nothing; the checks leave nothing behind.

// checkOutputFile checks that the file output flag (for example -plot)
// names can be written: an existing file must be a writable regular file
// (it is opened without truncation), a new one must be creatable in an
// existing folder (it is created and removed again).
func checkOutputFile(flagName, path string) error {
	st, err := os.Stat(path)
	switch {
	case err == nil:
		if st.IsDir() {
			return usageError("%s %s is a folder; want the path of a file to write", flagName, path)
		}
		if !st.Mode().IsRegular() {
			return usageError("%s %s exists and is not a regular file (%s); want the path of a file to write", flagName, path, st.Mode().Type())
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return usageError("%s %s exists but cannot be written: %v", flagName, path, err)
		}
		return f.Close()
	case !errors.Is(err, fs.ErrNotExist):
		if perr := checkParent(flagName, path); perr != nil {
			return perr
		}
		return usageError("%s %s: %v", flagName, path, err)
	}
	if err := checkParent(flagName, path); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return usageError("%s %s cannot be created: %v", flagName, path, err)
	}
	f.Close()
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("%s %s: remove the trial file: %w", flagName, path, err)
	}
	return nil
}

// checkOutputDir checks that the folder output flag (for example -o of a
// bag) names can be created: it must not exist (unless replace, and then it
// must be a folder), and its parent must be an existing folder in which a
// folder can be created (one is created and removed again). how is appended
// to the "already exists" message (how to replace it, or "").
func checkOutputDir(flagName, path string, replace bool, how string) error {
	st, err := os.Stat(path)
	switch {
	case err == nil:
		if !replace {
			return usageError("%s %s already exists; want a new folder%s", flagName, path, how)
		}
		if !st.IsDir() {
			return usageError("%s %s exists and is not a folder; will not replace it", flagName, path)
		}
	case !errors.Is(err, fs.ErrNotExist):
		if perr := checkParent(flagName, path); perr != nil {
			return perr
		}
		return usageError("%s %s: %v", flagName, path, err)
	}
	if err := checkParent(flagName, path); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(path)), ".fastwam-check-*")
	if err != nil {
		return usageError("%s %s: cannot create a folder in %s: %v", flagName, path, filepath.Dir(filepath.Clean(path)), err)
	}
	if err := os.Remove(tmp); err != nil {
		return fmt.Errorf("%s %s: remove the trial folder: %w", flagName, path, err)
	}
	return nil
}

// checkParent checks that the folder path is to be written in exists.
func checkParent(flagName, path string) error {
	parent := filepath.Dir(filepath.Clean(path))
	st, err := os.Stat(parent)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return usageError("%s %s: folder %s does not exist", flagName, path, parent)
	case err != nil:
		return usageError("%s %s: %v", flagName, path, err)
	case !st.IsDir():
		return usageError("%s %s: %s is not a folder", flagName, path, parent)
	}
	return nil
}

// writeFile writes path through write, atomically: into a temporary file
// beside it, renamed over path only when write and the close succeeded,
// so a reader (a CI system) never sees half a file. On every failure (an
// error, a panic of write) the temporary file is removed.
//
// The file gets the mode os.Create would give it: a new file 0666 less the
// umask (the temporary file is created with that mode, so the kernel
// applies the umask), a replaced file its old permissions.
//
// The temporary file is named "." + base + ".tmp-" + pid + "-" + random
// (tempPrefix). A process killed outright (SIGKILL, the forced exit of a
// second signal, a power cut) leaves it behind; so before writing,
// writeFile removes the temporary files of path left by processes that no
// longer run (removeStaleTemps).
func writeFile(path string, write func(io.Writer) error) (err error) {
	removeStaleTemps(path, proc.Alive)
	perm, replacing := os.FileMode(0o666), false
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		perm, replacing = st.Mode().Perm(), true
	}
	tmp, err := createTemp(path, perm)
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if !renamed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if replacing { // the replaced file's permissions, whatever the umask
		if err := tmp.Chmod(perm); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	w := bufio.NewWriterSize(tmp, 1<<20)
	if err := write(w); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	renamed = true
	return nil
}

// tempPrefix is the start of the names of path's temporary files: "." +
// its base name + ".tmp-"; this process's go on with its pid and "-".
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// createTemp creates a new temporary file for path in path's folder, with
// mode perm less the umask, named tempPrefix + pid + "-" + a random number.
func createTemp(path string, perm os.FileMode) (*os.File, error) {
	dir := filepath.Dir(path)
	prefix := fmt.Sprintf("%s%d-", tempPrefix(path), os.Getpid())
	for range 100 {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, err
	}
	return nil, fmt.Errorf("write %s: could not create a temporary file %s* in %s: 100 names taken", path, prefix, dir)
}

// removeStaleTemps removes the temporary files of path that a writer left
// behind when it was killed: regular files (not links) of this user in
// path's folder named tempPrefix(path) + pid + "-" + digits whose pid alive
// says no longer runs. Names of other kinds, other users' files, and the
// files of running processes (this one included) are left alone, as is
// anything it cannot remove: the write goes on regardless.
func removeStaleTemps(path string, alive func(pid int) bool) {
	dir := filepath.Dir(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return // creating the temporary file reports the problem
	}
	prefix := tempPrefix(path)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		digits, random, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(digits)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() || !allDigits(digits) || !allDigits(random) {
			continue
		}
		name := filepath.Join(dir, e.Name())
		st, err := os.Lstat(name)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); !ok || int(sys.Uid) != os.Getuid() || alive(pid) {
			continue
		}
		os.Remove(name)
	}
}

// allDigits reports whether s is a non-empty run of ASCII digits.
func allDigits(s string) bool {
	return s != "" && strings.TrimLeft(s, "0123456789") == ""
}
