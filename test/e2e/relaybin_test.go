package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pgoutbox/pgoutbox/internal/testenv"
)

// runRelay runs the binary to completion and returns its exit code and
// combined output.
func runRelay(t testing.TB, bin string, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String()
	case err != nil:
		t.Fatalf("relay %s: %v", args[0], err)
	}
	return 0, out.String()
}

// mustRunRelay runs the binary to completion and fails t unless it exits
// 0.
func mustRunRelay(t testing.TB, bin string, args ...string) {
	t.Helper()
	if code, out := runRelay(t, bin, args...); code != 0 {
		t.Fatalf("relay %s: exit %d\n%s", args[0], code, out)
	}
}

// relayProc is a relay process running in the background.
type relayProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has been waited for
	err  error         // Wait's result, set before done is closed
}

// startRelay starts the binary with its output appended to logPath. The
// process is killed when the test ends, even if the test fails first.
func startRelay(t testing.TB, bin, logPath string, args ...string) *relayProc {
	t.Helper()
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Dies with the test binary, even when it crashes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &relayProc{cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

// exited reports whether the process has ended.
func (p *relayProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *relayProc) kill() {
	if !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// stop sends SIGTERM and returns the exit code, or -1 when the process does
// not end within timeout (it is then killed).
func (p *relayProc) stop(timeout time.Duration) int {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.kill()
		return -1
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode()
	}
	if p.err != nil {
		return -1
	}
	return 0
}

// binaryEnv is what most tests of the relay binary run against: the
// binary, a database of their own, a broker and a log file (relayLog).
func binaryEnv(t *testing.T) (bin string, db *testenv.DB, kafka *testenv.Kafka, logPath string) {
	t.Helper()
	return buildRelay(t), testenv.NewDB(t), testenv.NewBroker(t), relayLog(t)
}

// relayLog returns a path in t's temporary directory for the log of a relay
// binary; when t fails, the log's tail is logged at cleanup.
func relayLog(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "relay.log")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("relay log tail:\n%s", logTail(path))
		}
	})
	return path
}

// logTail returns the end of a relay log for failure messages.
func logTail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return strings.TrimSpace(string(b))
}
