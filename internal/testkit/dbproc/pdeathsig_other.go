//go:build !linux

package dbproc

import "syscall"

// dieWithParent does nothing where the kernel has no parent-death signal: a
// test binary that dies leaves its servers to the test's cleanup, or to the
// user.
func dieWithParent(*syscall.SysProcAttr) {}
