//go:build unix

package testenv

import (
	"fmt"
	"os"
	"syscall"
)

// kafkaProcAttr runs the JVM in its own process group, so that a
// terminal's Ctrl-C reaches only the tests and killGroup ends everything
// the JVM started; on Linux it also dies with the test binary.
func kafkaProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(attr)
	return attr
}

// killGroup sends SIGKILL to p's process group, unless done (closed once
// p was waited for) is closed: a reaped leader's process group ID may be
// another process's by now (IDs wrap at pid_max, 32768 on a default
// Linux), and the signal would kill another test's broker or server.
func killGroup(p *os.Process, done <-chan struct{}) {
	select {
	case <-done:
	default:
		_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
	}
}

// lockFile takes an exclusive lock on path, creating it; the returned
// function releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// pauseGroup stops p's process group (SIGSTOP), or lets it go on
// (SIGCONT) when pause is false.
func pauseGroup(p *os.Process, pause bool) error {
	sig := syscall.SIGCONT
	if pause {
		sig = syscall.SIGSTOP
	}
	return syscall.Kill(-p.Pid, sig)
}
