package verify

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Spill files live in a private directory of the run (mode 0700), named
// after the process: pgoutbox-verify-<pid>-<random>. The run holds an
// exclusive lock (flock) on the directory's lock file for as long as it
// runs, and removes the directory when it ends; a run killed before that
// (SIGKILL, the OOM killer) leaves it, and the next run removes every such
// directory whose lock it can take. The lock, not the PID, tells: the kernel
// releases it when its process dies, and a run in another PID namespace
// (another container sharing the directory) holds it as well; a PID may
// name another live process by then, or none in this namespace. A
// directory without a lock file (of a run of an earlier version) is stale
// once its PID runs no more.

// spillPrefix starts the name of a run's spill directory.
const spillPrefix = "pgoutbox-verify-"

// spillMaking starts the name of a spill directory being made, until its
// lock is taken and it is renamed: stale-directory removal leaves it alone
// while it has no lock file, for makingGrace (its run was killed between
// the two steps after that), and removes it unlocked (a run killed in
// between).
const spillMaking = "pgoutbox-verifying-"

// makingGrace is how long a spill directory being made may lack its lock
// file: a run creates it right after the directory.
const makingGrace = time.Minute

// spillLock is the lock file in a spill directory.
const spillLock = ".lock"

// spillDir is a run's spill directory, locked while the run holds it.
type spillDir struct {
	path string
	lock *os.File
}

// makeSpillDir removes the stale spill directories in parent and creates
// and locks this run's.
func makeSpillDir(parent string, log *slog.Logger) (*spillDir, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	removeStaleSpills(parent, log)
	tmp, err := os.MkdirTemp(parent, fmt.Sprintf("%s%d-", spillMaking, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("verify: spill directory: %w", err)
	}
	lock, err := lockSpill(tmp, true)
	if err == nil && lock == nil {
		err = errors.New("locked by another process")
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("verify: spill directory: %w", err)
	}
	path := filepath.Join(parent, spillPrefix+strings.TrimPrefix(filepath.Base(tmp), spillMaking))
	if err := os.Rename(tmp, path); err != nil {
		lock.Close()
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("verify: spill directory: %w", err)
	}
	return &spillDir{path: path, lock: lock}, nil
}

// remove removes the directory and releases its lock.
func (d *spillDir) remove() {
	_ = os.RemoveAll(d.path)
	d.lock.Close()
}

// lockSpill takes the lock of spill directory dir without waiting: the
// lock file open and locked, nil when another process holds it, or
// os.ErrNotExist (wrapped) when dir has no lock file and create is not
// set.
func lockSpill(dir string, create bool) (*os.File, error) {
	flag := os.O_RDWR
	if create {
		flag |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(filepath.Join(dir, spillLock), flag, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, err
	}
	return f, nil
}

// removeStaleSpills removes the spill directories in parent of runs that
// no longer run.
func removeStaleSpills(parent string, log *slog.Logger) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, making, ok := spillOwner(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // gone meanwhile
		}
		path := filepath.Join(parent, e.Name())
		lock, err := lockSpill(path, false)
		switch {
		case err == nil && lock == nil:
			continue // its run holds it
		case errors.Is(err, os.ErrNotExist):
			// Being made (its lock file comes next, unless its run was
			// killed), or of an earlier version, which goes by its PID.
			if making && time.Since(info.ModTime()) < makingGrace || !making && alive(pid) {
				continue
			}
		case err != nil:
			continue // not ours to tell (another user's)
		}
		err = os.RemoveAll(path)
		if lock != nil {
			lock.Close()
		}
		if err != nil {
			log.Warn("verify: cannot remove a stale spill directory", "path", path, "error", err)
			continue
		}
		log.Info("verify: removed the spill directory of a run that did not finish", "path", path, "pid", pid)
	}
}

// spillOwner is the PID in a spill directory's name, and whether the
// name is of one being made (spillMaking).
func spillOwner(name string) (pid int, making, ok bool) {
	rest, ok := strings.CutPrefix(name, spillPrefix)
	if !ok {
		if rest, making = strings.CutPrefix(name, spillMaking); !making {
			return 0, false, false
		}
	}
	p, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false, false
	}
	n, err := strconv.Atoi(p)
	return n, making, err == nil && n > 0
}

// alive reports whether process pid runs (or exists as another user's),
// for a spill directory without a lock file.
func alive(pid int) bool {
	if pid == os.Getpid() {
		return true
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
