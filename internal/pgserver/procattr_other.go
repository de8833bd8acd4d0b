//go:build unix && !linux

package pgserver

import "syscall"

// procAttr runs a server process as cred (nil: as we are), in its own
// process group, so that a terminal's Ctrl-C reaches only us and we shut
// the server down in order. Without Linux's Pdeathsig, a server outlives a
// crash of this process; Stop is the only way it ends.
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true}
}
