package faults

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildRelay builds cmd/relay once per test binary.
func buildRelay(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "relay")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/pgoutbox/pgoutbox/cmd/relay").CombinedOutput(); err != nil {
		t.Fatalf("go build cmd/relay: %v\n%s", err, out)
	}
	return bin
}

// relayProc is one relay process, with its instance ID (the
// relay-instance header of its records) and its own log file.
type relayProc struct {
	instance string
	log      string
	cmd      *exec.Cmd
	done     chan struct{}
	err      error // Wait's result, set before done closes
}

// startProc starts bin with args, its output in logPath. It dies with the
// test binary; t's cleanup kills it.
func startProc(t testing.TB, bin, logPath, instance string, args ...string) *relayProc {
	t.Helper()
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &relayProc{instance: instance, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

func (p *relayProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *relayProc) signal(sig syscall.Signal) {
	if !p.exited() {
		_ = p.cmd.Process.Signal(sig)
	}
}

// kill sends SIGKILL (after SIGCONT, in case it is stopped) and waits.
func (p *relayProc) kill() {
	p.signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and returns the exit code; -1 when it had to be
// killed after timeout.
func (p *relayProc) stop(timeout time.Duration) int {
	p.signal(syscall.SIGCONT)
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.kill()
		return -1
	}
	return p.exitCode()
}

// exitCode is the exit code of an ended process (-1 for a signal).
func (p *relayProc) exitCode() int {
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode()
	}
	if p.err != nil {
		return -1
	}
	return 0
}

// logged is the process's log so far.
func (p *relayProc) logged() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// tail is the end of the log, for a failure message.
func (p *relayProc) tail(n int) string {
	s := strings.TrimSpace(p.logged())
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return s
}
