package redistest

import (
	"os"
	"os/exec"
	"testing"
)

// RequireEnv is the environment variable that turns skips for a missing
// redis-server or redis-cli into failures when set to "1".
const RequireEnv = "RETRYGATE_REQUIRE_REDIS"

// OnlyMiniredisEnv is the environment variable that, set to "1", leaves
// every real backend out: Targets returns miniredis alone, RealTargets,
// Require, Server and Cluster skip. It wins over RETRYGATE_REQUIRE_REDIS.
// make mutate sets it, so each mutant's test run is short and starts no
// process.
const OnlyMiniredisEnv = "RETRYGATE_ONLY_MINIREDIS"

// onlyMiniredis is the reason real backends are left out, or "".
func onlyMiniredis() string {
	if os.Getenv(OnlyMiniredisEnv) == "1" {
		return OnlyMiniredisEnv + "=1"
	}
	return ""
}

// Require skips t when redis-server is not on PATH, or fails it when
// RETRYGATE_REQUIRE_REDIS=1.
func Require(t testing.TB) {
	t.Helper()
	require(t, "redis-server")
}

// require skips or fails t unless every named binary is on PATH.
func require(t testing.TB, bins ...string) {
	t.Helper()
	if reason := onlyMiniredis(); reason != "" {
		t.Skipf("redistest: %s: no real Redis", reason)
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
