package redistest

import "syscall"

// sysProcAttr kills redis-server when the test binary dies, so a crash,
// a -timeout panic or a missing Shutdown leaves no stray servers.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
