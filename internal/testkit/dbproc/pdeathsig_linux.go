package dbproc

import "syscall"

// dieWithParent makes a test binary that dies take its servers along.
func dieWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
