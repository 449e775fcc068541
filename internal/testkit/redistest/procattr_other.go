//go:build !linux

package redistest

import "syscall"

// sysProcAttr has no parent-death signal outside Linux: call Shutdown.
func sysProcAttr() *syscall.SysProcAttr { return nil }
