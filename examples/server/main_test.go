package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMainRedisDown: with REDIS_URL pointing where nothing listens, the
// demo says so on one line of its own and exits 1; go-redis's pool lines
// ("failed to dial after 5 attempts") do not precede it.
func TestMainRedisDown(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the demo")
	}
	bin := filepath.Join(t.TempDir(), "server")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "REDIS_URL=redis://127.0.0.1:1/0")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1", err)
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "server: redis at 127.0.0.1:1: ") {
		t.Fatalf("stderr:\n%s\nwant one line naming the address", stderr.String())
	}
}
