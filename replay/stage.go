package replay

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/fastwam/actionexpert/node"
)

// A bag is made in a staging folder beside its destination, named
// stagePrefix + the maker's pid + "-" + a random suffix, and renamed into
// place when complete. A maker killed outright (SIGKILL, a power cut)
// leaves its staging folder behind; the next MakeBag in the same folder
// removes it, but only when it is surely a dead maker's: the name says
// whose it was, the folder (not a link) belongs to this user, and no
// process with that pid exists.
const stagePrefix = ".bagmake-"

// stagePattern is the MkdirTemp pattern of this process's staging folder.
func stagePattern() string { return fmt.Sprintf("%s%d-*", stagePrefix, os.Getpid()) }

// stagePID returns the pid a staging folder's name records, or false for a
// name that is not one of ours.
func stagePID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, stagePrefix)
	if !ok {
		return 0, false
	}
	digits, suffix, ok := strings.Cut(rest, "-")
	if !ok || suffix == "" || digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// removeStaleStages removes, from parent, the staging folders of makers
// that no longer run (see stagePrefix), logging each one it removes;
// alive says whether a pid runs. What it cannot remove it reports as a
// warning and leaves. log may be nil.
func removeStaleStages(parent string, alive func(pid int) bool, log node.Logger) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return // MkdirTemp in the same folder reports the problem
	}
	for _, e := range entries {
		pid, ok := stagePID(e.Name())
		if !ok || pid == os.Getpid() || !e.IsDir() || e.Type()&os.ModeSymlink != 0 {
			continue
		}
		path := filepath.Join(parent, e.Name())
		if !ownedByUs(path) || alive(pid) {
			continue
		}
		if err := os.RemoveAll(path); err != nil {
			if log != nil {
				log.Warnf("bag make: staging folder %s of process %d, which no longer runs, could not be removed: %v", path, pid, err)
			}
			continue
		}
		if log != nil {
			log.Warnf("bag make: removed staging folder %s left by process %d, which no longer runs", path, pid)
		}
	}
}

// ownedByUs says whether path (not followed if a link) belongs to this
// process's user.
func ownedByUs(path string) bool {
	st, err := os.Lstat(path)
	if err != nil || !st.IsDir() {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && int(sys.Uid) == os.Getuid()
}
