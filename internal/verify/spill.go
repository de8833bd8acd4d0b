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
)

// Spill files live in a private directory of the run (mode 0700), named
// after the process: pgoutbox-verify-<pid>-<random>. A run removes it when
// it ends; a run killed before that (SIGKILL, the OOM killer) leaves it,
// and the next run removes every such directory whose process is gone.

// spillPrefix starts the name of a run's spill directory.
const spillPrefix = "pgoutbox-verify-"

// makeSpillDir removes the stale spill directories in parent and creates
// this run's.
func makeSpillDir(parent string, log *slog.Logger) (string, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	removeStaleSpills(parent, log)
	dir, err := os.MkdirTemp(parent, fmt.Sprintf("%s%d-", spillPrefix, os.Getpid()))
	if err != nil {
		return "", fmt.Errorf("verify: spill directory: %w", err)
	}
	return dir, nil
}

// removeStaleSpills removes the spill directories in parent of processes
// that no longer run.
func removeStaleSpills(parent string, log *slog.Logger) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, ok := spillOwner(e.Name())
		if !ok || !e.IsDir() || alive(pid) {
			continue
		}
		path := filepath.Join(parent, e.Name())
		if err := os.RemoveAll(path); err != nil {
			log.Warn("verify: cannot remove a stale spill directory", "path", path, "error", err)
			continue
		}
		log.Info("verify: removed the spill directory of a run that did not finish", "path", path, "pid", pid)
	}
}

// spillOwner is the PID in a spill directory's name.
func spillOwner(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, spillPrefix)
	if !ok {
		return 0, false
	}
	pid, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(pid)
	return n, err == nil && n > 0
}

// alive reports whether process pid runs (or exists as another user's).
func alive(pid int) bool {
	if pid == os.Getpid() {
		return true
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
