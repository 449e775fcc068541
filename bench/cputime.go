package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuTime is the CPU time all threads of process pid have run so far,
// from /proc/<pid>/task/*/schedstat (nanoseconds, not clock ticks). It is
// 0 where /proc is missing; the report then shows 0.
func cpuTime(pid int) time.Duration {
	if pid <= 0 {
		return 0
	}
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "schedstat"))
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread exited meanwhile
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			sum += time.Duration(ns)
		}
	}
	return sum
}
