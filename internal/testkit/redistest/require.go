package redistest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// RequireEnv is the environment variable that turns skips for a missing
// redis-server or redis-cli into failures when set to "1".
const RequireEnv = "RETRYGATE_REQUIRE_REDIS"

// TargetsEnv is the environment variable that narrows the backends tests
// use to a comma-separated list of "miniredis", "redis" and "cluster";
// unset or empty means all three. Targets leaves the others out, and
// RealTargets, Require, Server and Cluster skip when their backend is left
// out, even with RETRYGATE_REQUIRE_REDIS=1. make mutate sets it, so each
// mutant's test run is short.
const TargetsEnv = "RETRYGATE_TARGETS"

// backends are the names TargetsEnv may list.
var backends = []string{"miniredis", "redis", "cluster"}

// leftOut returns why TargetsEnv leaves backend out, or "". It fails t
// when TargetsEnv names an unknown backend, so a typo cannot skip tests.
func leftOut(t testing.TB, backend string) string {
	t.Helper()
	v := os.Getenv(TargetsEnv)
	if v == "" {
		return ""
	}
	in := false
	for _, name := range strings.Split(v, ",") {
		switch name = strings.TrimSpace(name); {
		case name == backend:
			in = true
		case !contains(backends, name):
			t.Fatalf("redistest: %s=%q: unknown backend %q (want a list of %s)", TargetsEnv, v, name, strings.Join(backends, ", "))
		}
	}
	if in {
		return ""
	}
	return TargetsEnv + "=" + v
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// Require skips t when redis-server is not on PATH, or fails it when
// RETRYGATE_REQUIRE_REDIS=1. It skips t when RETRYGATE_TARGETS leaves out
// "redis".
func Require(t testing.TB) {
	t.Helper()
	require(t, "redis", "redis-server")
}

// require skips t when TargetsEnv leaves backend out, and skips or fails
// it unless every named binary is on PATH.
func require(t testing.TB, backend string, bins ...string) {
	t.Helper()
	if reason := leftOut(t, backend); reason != "" {
		t.Skipf("redistest: %s leaves out %s", reason, backend)
	}
	if reason := missing(bins...); reason != "" {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("redistest: %s, and %s=1", reason, RequireEnv)
		}
		t.Skipf("redistest: %s (set %s=1 to fail instead of skipping)", reason, RequireEnv)
	}
}

// missing names the first binary not on PATH, or returns "".
func missing(bins ...string) string {
	for _, b := range bins {
		if _, err := exec.LookPath(b); err != nil {
			return b + " not found on PATH"
		}
	}
	return ""
}
