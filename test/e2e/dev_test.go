package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	devConsumed = regexp.MustCompile(`(?m)^\[\s*\d+s\] written \d+  published \d+  consumed ([1-9]\d*) `)
	devSummary  = regexp.MustCompile(`(?m)^summary: .*double_shipments=(\d+) .*$`)
	devDataDir  = regexp.MustCompile(`data in (\S+), removed at exit`)
	devServer   = regexp.MustCompile(`postgres  (postgres://\S+)`)
)

// Ctrl-C on the relay binary's `relay dev` drains, prints the summary,
// exits 0 and leaves no server process or temporary directory behind.
func TestDevBinaryInterrupt(t *testing.T) {
	t.Parallel()
	bin := buildRelay(t)
	logPath := filepath.Join(t.TempDir(), "dev.log")
	p := startRelay(t, bin, logPath, "dev", "--rate", "50")

	deadline := time.Now().Add(2 * time.Minute)
	for !devConsumed.MatchString(logTail(logPath)) {
		if p.exited() {
			t.Fatalf("relay dev exited early:\n%s", logTail(logPath))
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing consumed within 2m:\n%s", logTail(logPath))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatalf("relay dev still running 1m after SIGINT:\n%s", logTail(logPath))
	}
	out, _ := os.ReadFile(logPath)
	if p.err != nil {
		t.Fatalf("relay dev: %v\n%s", p.err, out)
	}
	m := devSummary.FindSubmatch(out)
	if m == nil {
		t.Fatalf("no summary line:\n%s", out)
	}
	if n, _ := strconv.Atoi(string(m[1])); n != 0 {
		t.Errorf("%d double shipments:\n%s", n, m[0])
	}

	dir := devDataDir.FindSubmatch(out)
	url := devServer.FindSubmatch(out)
	if dir == nil || url == nil {
		t.Fatalf("no data directory or server URL in output:\n%s", out)
	}
	if _, err := os.Stat(string(dir[1])); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory %s left behind: %v", dir[1], err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if conn, err := pgx.Connect(ctx, string(url[1])); err == nil {
		_ = conn.Close(ctx)
		t.Error("the throwaway server still runs after relay dev exited")
	}
}
