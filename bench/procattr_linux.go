package main

import "syscall"

// sysProcAttr kills redis-server when the benchmark dies, however it dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
