//go:build !linux

package pgtest

import "syscall"

// sysProcAttr: outside Linux there is no parent-death signal (stop the
// shared server with Main) and the server runs as the test, so a test run
// as root there is refused by postgres.
func sysProcAttr(uid, gid int) *syscall.SysProcAttr { return nil }
