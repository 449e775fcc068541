package main

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// machine describes where a run happened.
type machine struct {
	cpu       string
	cores     int
	maxProcs  int
	goVersion string
	redis     string
	loadAvg   string // at the start of the run
	date      time.Time
	deps      []string // module@version of the measured libraries
}

func describeMachine(ctx context.Context, admin *redis.Client) (machine, error) {
	m := machine{
		cpu:       "unknown",
		cores:     runtime.NumCPU(),
		maxProcs:  runtime.GOMAXPROCS(0),
		goVersion: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH,
		date:      time.Now().UTC(),
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.loadAvg = strings.Join(f[:3], " ")
		}
	}
	info, err := admin.Info(ctx, "server").Result()
	if err != nil {
		return m, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			m.redis = v
		}
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			switch d.Path {
			case "github.com/bsm/redislock", "github.com/go-redsync/redsync/v4", "github.com/redis/go-redis/v9",
				"github.com/go-chi/chi/v5", "github.com/go-chi/httprate":
				m.deps = append(m.deps, d.Path+" "+d.Version)
			}
		}
	}
	return m, nil
}
