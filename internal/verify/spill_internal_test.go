package verify

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A run's spill directory is private (0700); a run removes the spill
// directories that runs of dead processes left (a SIGKILL before their
// cleanup) and keeps those of live ones and anything else.
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
	for _, d := range []string{stale, live, other} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(stale, "x.run"), make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	dir, err := makeSpillDir(parent, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("spill directory %s: %v %v, want mode 0700", dir, fi.Mode(), err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("the stale spill directory is still there: %v", err)
	}
	for _, d := range []string{live, other} {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("%s removed: %v", d, err)
		}
	}
}
