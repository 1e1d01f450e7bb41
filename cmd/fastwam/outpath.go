package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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
// so a reader (a CI system) never sees half a file.
func writeFile(path string, write func(io.Writer) error) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
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
	return nil
}
