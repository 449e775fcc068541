//go:build !linux

package main

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return nil }
