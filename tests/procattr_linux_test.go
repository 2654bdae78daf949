package tests

import "syscall"

// dieWithParent makes a child process get SIGKILL when the test binary dies,
// so a test that times out leaves no process behind.
func dieWithParent() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
