//go:build !unix

package testenv

import (
	"errors"
	"os"
	"syscall"
)

// kafkaProcAttr has nothing to add off Unix.
func kafkaProcAttr() *syscall.SysProcAttr { return nil }

// killGroup kills p alone: there are no process groups to kill.
func killGroup(p *os.Process, _ <-chan struct{}) { _ = p.Kill() }

// lockFile fails: the real broker is supported on Unix only.
func lockFile(string) (func(), error) {
	return nil, errors.New("the Apache Kafka test broker needs a Unix system")
}

// pauseGroup fails: pausing a process group needs a Unix system.
func pauseGroup(*os.Process, bool) error {
	return errors.New("pausing a process group needs a Unix system")
}
