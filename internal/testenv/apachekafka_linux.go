package testenv

import "syscall"

// dieWithParent has the kernel kill the process when the test binary dies,
// even on a crash or a test timeout (Pdeathsig).
func dieWithParent(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
