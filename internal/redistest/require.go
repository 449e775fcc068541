package redistest

import (
	"os"
	"os/exec"
	"testing"
)

// RequireEnv is the environment variable that turns skips for a missing
// redis-server or redis-cli into failures when set to "1".
const RequireEnv = "RETRYGATE_REQUIRE_REDIS"

// Require skips t when redis-server is not on PATH, or fails it when
// RETRYGATE_REQUIRE_REDIS=1.
func Require(t testing.TB) {
	t.Helper()
	require(t, "redis-server")
}

// require skips or fails t unless every named binary is on PATH.
func require(t testing.TB, bins ...string) {
	t.Helper()
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
