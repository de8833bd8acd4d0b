package pgserver

import "syscall"

// procAttr runs a server process as cred (nil: as we are), in its own
// process group, so that a terminal's Ctrl-C reaches only us and we shut
// the server down in order; and killed when we die, even on a crash.
func procAttr(cred *syscall.Credential) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
