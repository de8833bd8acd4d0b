package verify

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// A run's spill directory is private (0700) and locked; a run removes the
// spill directories that runs of dead processes left (a SIGKILL before
// their cleanup) and keeps those of live ones and anything else. A
// directory's lock tells, not its PID: a locked one is kept though its PID
// runs no more here (a run in another PID namespace), an unlocked one is
// removed though its PID runs (reused); a directory without a lock file
// (an earlier version's) goes by its PID, one being made without one by
// its age.
func TestSpillDirRemovesStale(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(parent, fmt.Sprintf("%s%d-123", spillPrefix, gone.Process.Pid))
	live := filepath.Join(parent, spillPrefix+"1-456") // init: alive
	other := filepath.Join(parent, "pgoutbox-verify-notes")
	lockedGone := filepath.Join(parent, fmt.Sprintf("%s%d-789", spillPrefix, gone.Process.Pid))
	unlockedLive := filepath.Join(parent, spillPrefix+"1-999")
	making := filepath.Join(parent, spillMaking+"1-111")     // no lock file yet
	madeGone := filepath.Join(parent, spillMaking+"1-222")   // locked, then its run died
	makingGone := filepath.Join(parent, spillMaking+"1-333") // no lock file, long ago: its run died before the lock
	for _, d := range []string{stale, live, other, lockedGone, unlockedLive, making, madeGone, makingGone} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * makingGrace)
	if err := os.Chtimes(makingGone, long, long); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{lockedGone, unlockedLive, madeGone} {
		if err := os.WriteFile(filepath.Join(d, spillLock), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	held, err := lockSpill(lockedGone, false)
	if err != nil || held == nil {
		t.Fatalf("lock %s: %v %v", lockedGone, held, err)
	}
	defer held.Close()
	if err := os.WriteFile(filepath.Join(stale, "x.run"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	dir, err := makeSpillDir(parent, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.remove()
	if fi, err := os.Stat(dir.path); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("spill directory %s: %v %v, want mode 0700", dir.path, fi.Mode(), err)
	}
	if l, err := lockSpill(dir.path, false); l != nil || err != nil {
		t.Fatalf("the run's spill directory is not locked: %v %v", l, err)
	}
	for _, d := range []string{stale, unlockedLive, madeGone, makingGone} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Fatalf("the stale spill directory %s is still there: %v", d, err)
		}
	}
	for _, d := range []string{live, other, lockedGone, making} {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("%s removed: %v", d, err)
		}
	}
}
