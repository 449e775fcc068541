package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/alicebob/miniredis/v2"
)

// TestProgram builds the quickstart as a program, the README's code whole,
// and runs it as a newcomer would: on every path a user meets, it prints
// a sentence for people and exits cleanly, or says what to fix; a retry
// from a new process during a cooldown makes no model call.
func TestProgram(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "quickstart")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	run := func(t *testing.T, env ...string) (stdout, stderr string, code int) {
		t.Helper()
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ()[:0:0], "PATH="+os.Getenv("PATH"), "HOME="+t.TempDir())
		cmd.Env = append(cmd.Env, env...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	model := func(t *testing.T, ans answer) (env []string, calls func() int64) {
		t.Helper()
		m := miniredis.RunT(t)
		_, cfg, n, stop := localBackends(ans)
		t.Cleanup(stop)
		return []string{"REDIS_URL=redis://" + m.Addr(), "OPENAI_API_KEY=sk-test", "OPENAI_BASE_URL=" + cfg.BaseURL}, n.Load
	}

	t.Run("success", func(t *testing.T) {
		env, calls := model(t, answerOK)
		out, _, code := run(t, env...)
		if code != 0 || out != "A supplier contract: 400 units a month, 90 days' notice.\n" || calls() != 1 {
			t.Fatalf("exit %d, output %q, %d calls", code, out, calls())
		}
	})
	t.Run("rate limited, then retried from a new process", func(t *testing.T) {
		env, calls := model(t, answerRateLimited)
		for try := 1; try <= 2; try++ {
			if out, _, code := run(t, env...); code != 0 || out != "Not now: retry in 30s.\n" {
				t.Fatalf("try %d: exit %d, output %q", try, code, out)
			}
		}
		if calls() != 1 {
			t.Fatalf("%d model calls, want 1", calls())
		}
	})
	t.Run("prompt too long", func(t *testing.T) {
		env, calls := model(t, answerTooLong)
		for try := 1; try <= 2; try++ {
			if out, _, code := run(t, env...); code != 0 || out != "This document cannot be summarised; retrying will not help.\n" {
				t.Fatalf("try %d: exit %d, output %q", try, code, out)
			}
		}
		if calls() != 1 {
			t.Fatalf("%d model calls, want 1", calls())
		}
	})
	// A bad key or an exhausted quota is no user's fault and no wait fixes
	// it: the user is asked to come back, and the operator is told the
	// verdict and its evidence on stderr, by the process that met it.
	for _, tc := range []struct {
		name   string
		ans    answer
		reason string
	}{
		{"bad API key", answerBadKey, "auth (evidence code:invalid_api_key)"},
		{"quota exhausted", answerNoQuota, "quota_exhausted (evidence code:insufficient_quota)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, calls := model(t, tc.ans)
			out, errOut, code := run(t, env...)
			// The gate's upstream (the default) pauses: UpstreamPolicy.Cooldown
			// first, longer with each probe that finds it again.
			if code != 0 || out != "Not now: retry in 10s.\n" || calls() != 1 {
				t.Fatalf("exit %d, output %q, %d calls", code, out, calls())
			}
			if want := "summarise document-42: " + tc.reason; !strings.Contains(errOut, want) {
				t.Fatalf("stderr %q: the operator is not told %q", errOut, want)
			}
		})
	}
	t.Run("a rate limit is no operator's business", func(t *testing.T) {
		env, _ := model(t, answerRateLimited)
		if _, errOut, _ := run(t, env...); errOut != "" {
			t.Fatalf("stderr %q, want nothing", errOut)
		}
	})
	t.Run("Redis down", func(t *testing.T) {
		env, calls := model(t, answerOK)
		env[0] = "REDIS_URL=redis://127.0.0.1:1" // nothing listens there
		out, errOut, code := run(t, env...)
		if code != 0 || out != "The service is busy; please try again shortly.\n" || calls() != 0 {
			t.Fatalf("exit %d, output %q, %d calls", code, out, calls())
		}
		if strings.Contains(out, "127.0.0.1") || !strings.Contains(errOut, "summarise document-42") {
			t.Fatalf("the operator's line belongs on stderr: stdout %q, stderr %q", out, errOut)
		}
		// The program's own line is the only one: go-redis's pool does not
		// log each failed dial before it.
		if lines := strings.Split(strings.TrimSpace(errOut), "\n"); len(lines) != 1 {
			t.Fatalf("stderr has %d lines, want the program's one:\n%s", len(lines), errOut)
		}
	})
	t.Run("no REDIS_URL", func(t *testing.T) {
		out, errOut, code := run(t, "OPENAI_API_KEY=sk-test")
		if code == 0 || out != "" || !strings.Contains(errOut, "REDIS_URL") {
			t.Fatalf("exit %d, stdout %q, stderr %q: want a failure naming REDIS_URL", code, out, errOut)
		}
	})
}
