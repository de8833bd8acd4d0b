package e2e

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
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

// relay dev whose stdout reader goes away (relay dev | head -3) stops as
// on Ctrl-C: it removes its throwaway server's data directory instead of
// dying of SIGPIPE at its next line.
func TestDevClosedPipeCleansUp(t *testing.T) {
	t.Parallel()
	bin := buildRelay(t)
	cmd := exec.Command(bin, "dev", "--rate", "20")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr testenv.SyncBuffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	var dir string
	sc := bufio.NewScanner(stdout)
	for dir == "" && sc.Scan() {
		if m := devDataDir.FindStringSubmatch(sc.Text()); m != nil {
			dir = m[1]
		}
	}
	for sc.Scan() && !devConsumed.MatchString(sc.Text()) { // streaming: a status line with consumed > 0
	}
	stdout.Close() // the reader is gone, as head's after its lines
	go func() { done <- cmd.Wait() }()
	if dir == "" {
		t.Fatalf("no data directory line; stderr:\n%s", stderr.String())
	}
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("relay dev still running 2m after its stdout closed:\n%s", stderr.String())
	}
	if st, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && st.Signaled() {
		t.Errorf("relay dev died of %v", st.Signal())
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("data directory %s left behind (%v); stderr:\n%s", dir, err, stderr.String())
	}
}
