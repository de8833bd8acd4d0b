//go:build unix && !linux

package testenv

import "syscall"

// dieWithParent does nothing: without Linux's Pdeathsig, a broker outlives
// a crash of the test binary; Stop is the only way it ends.
func dieWithParent(*syscall.SysProcAttr) {}
