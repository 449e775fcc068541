package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// secretPiece is in every password below, whole or split by a character
// that breaks URL parsing; no output may contain it.
const secretPiece = "cr3t"

// TestNoPasswordInOutput runs the CLI on Redis URLs, addresses and
// environments that fail in every way we could think of, each carrying a
// password, and checks no output, human or --json, holds any piece of it.
func TestNoPasswordInOutput(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		code int
	}{
		{"bad percent-encoding", []string{"--redis", "redis://ops:pa%zzs3cr3t@127.0.0.1:6379"}, nil, exitUsage},
		{"bad percent-encoding at the end", []string{"--redis", "redis://ops:s3cr3t%@127.0.0.1:6379"}, nil, exitUsage},
		{"bad port", []string{"--redis", "redis://ops:s3cr3t@127.0.0.1:notaport"}, nil, exitUsage},
		{"port out of range", []string{"--redis", "redis://ops:s3cr3t@127.0.0.1:99999"}, nil, exitRuntime},
		{"unescaped / in the password", []string{"--redis", "redis://ops:s3/cr3t@127.0.0.1:6379"}, nil, exitUsage},
		{"unescaped ? in the password", []string{"--redis", "redis://ops:s3?cr3t@127.0.0.1:6379"}, nil, exitUsage},
		{"unescaped # in the password", []string{"--redis", "redis://ops:s3#cr3t@127.0.0.1:6379"}, nil, exitUsage},
		{"unescaped @ in the password", []string{"--redis", "redis://ops:s3@cr3t@127.0.0.1:1"}, nil, exitRuntime},
		{"unescaped : in the password", []string{"--redis", "redis://ops:s3:cr3t@127.0.0.1:1"}, nil, exitRuntime},
		{"space in the password", []string{"--redis", "redis://ops:s3 cr3t@127.0.0.1:6379"}, nil, exitUsage},
		{"control character", []string{"--redis", "redis://ops:s3cr3t@127.0.0.1:6379/\x7f"}, nil, exitUsage},
		{"password only, no user", []string{"--redis", "redis://:s3%cr3t@127.0.0.1:6379"}, nil, exitUsage},
		{"token as user name", []string{"--redis", "redis://s3cr3t%@127.0.0.1:6379"}, nil, exitUsage},
		{"unknown scheme", []string{"--redis", "http://ops:s3cr3t@127.0.0.1:6379"}, nil, exitUsage},
		{"no scheme", []string{"--redis", "ops:s3cr3t@127.0.0.1:6379"}, nil, exitUsage},
		{"unix scheme", []string{"--redis", "unix://ops:s3cr3t@/tmp/redis.sock"}, nil, exitUsage},
		{"bad database", []string{"--redis", "rediss://ops:s3cr3t@127.0.0.1:6379/notadb"}, nil, exitUsage},
		{"bad query value", []string{"--redis", "redis://ops:s3cr3t@127.0.0.1:6379?dial_timeout=s3cr3t"}, nil, exitUsage},
		{"password as a query parameter", []string{"--redis", "redis://127.0.0.1:6379?password=s3cr3t"}, nil, exitUsage},
		{"valid but unreachable", []string{"--redis", "redis://ops:s3cr3t@127.0.0.1:1"}, nil, exitRuntime},
		{"TLS flags on redis://", []string{"--redis", "redis://ops:s3cr3t@127.0.0.1:1", "--tls-insecure"}, nil, exitUsage},
		{"cluster URL, bad port", []string{"--cluster", "redis://ops:s3cr3t@127.0.0.1:bad"}, nil, exitUsage},
		{"cluster URL, bad escape", []string{"--cluster", "redis://ops:s3%zzcr3t@127.0.0.1:7000"}, nil, exitUsage},
		{"cluster URL, unknown scheme", []string{"--cluster", "http://ops:s3cr3t@127.0.0.1:7000"}, nil, exitUsage},
		{"cluster address with credentials", []string{"--cluster", "ops:s3cr3t@127.0.0.1:7000"}, nil, exitUsage},
		{"sentinel address with credentials", []string{"--sentinel", "ops:s3cr3t@127.0.0.1:26379", "--master", "m"}, nil, exitUsage},
		{"sentinel URL", []string{"--sentinel", "redis://ops:s3cr3t@127.0.0.1:26379", "--master", "m"}, nil, exitUsage},
		{"sentinel address with a bad port", []string{"--sentinel", "127.0.0.1:s3cr3t", "--master", "m"}, nil, exitUsage},
		{"sentinel unreachable, password in env", []string{"--sentinel", "127.0.0.1:1", "--master", "m"},
			map[string]string{envSentinelPassword: "s3cr3t", envRedisPassword: "s3cr3t"}, exitRuntime},
		{"bad URL in RETRYGATE_REDIS", nil, map[string]string{envRedis: "redis://ops:pa%zzs3cr3t@127.0.0.1:6379"}, exitUsage},
		{"bad URL in REDIS_URL", nil, map[string]string{envRedisURL: "redis://ops:s3/cr3t@127.0.0.1:6379"}, exitUsage},
		{"bad URL in RETRYGATE_CLUSTER", nil, map[string]string{envCluster: "ops:s3cr3t@127.0.0.1:7000"}, exitUsage},
		{"URL without --redis", []string{"redis://ops:s3cr3t@127.0.0.1:1"}, nil, exitUsage},
		{"URL as an extra argument", []string{"list", "redis://ops:s3cr3t@127.0.0.1:1"}, nil, exitUsage},
		{"two modes in env", nil, map[string]string{envRedis: "redis://ops:s3cr3t@127.0.0.1:1", envSentinel: "127.0.0.1:1"}, exitUsage},
	} {
		for _, asJSON := range []bool{false, true} {
			name := tc.name
			if asJSON {
				name += " json"
			}
			t.Run(name, func(t *testing.T) {
				args := append([]string{}, tc.args...)
				if asJSON {
					args = append(args, "--json")
				}
				args = append(args, "--timeout", "3s", "status", "job-1")
				r := runCLI(t, tc.env, args...)
				if exp, got := tc.code, r.code; exp != got {
					t.Errorf("exit: exp %d, got %d (stdout %q, stderr %q)", exp, got, r.stdout, r.stderr)
				}
				if strings.Contains(r.stdout+r.stderr, secretPiece) {
					t.Fatalf("output holds the password: stdout %q, stderr %q", r.stdout, r.stderr)
				}
				if asJSON {
					assertJSONError(t, r, tc.code)
				} else if r.stdout != "" || strings.Count(r.stderr, "\n") != 1 {
					t.Errorf("exp one line on stderr, got stdout %q, stderr %q", r.stdout, r.stderr)
				}
			})
		}
	}
}

// assertJSONError checks r is a --json error: one JSON object on stdout
// with the message and the exit code, nothing on stderr.
func assertJSONError(t *testing.T, r result, code int) errorJSON {
	t.Helper()
	var e errorJSON
	if err := json.Unmarshal([]byte(r.stdout), &e); err != nil {
		t.Fatalf("--json error: stdout is not JSON (%v): %q, stderr %q", err, r.stdout, r.stderr)
	}
	if e.Error == "" || e.ExitCode != code || r.stderr != "" {
		t.Fatalf("--json error: exp an error with exit_code %d and no stderr, got %+v, stderr %q", code, e, r.stderr)
	}
	return e
}

// TestNoPasswordFromServer checks the errors of a server that refuses a
// user (WRONGPASS) or a command (NOPERM) do not quote the password.
func TestNoPasswordFromServer(t *testing.T) {
	prefix := "deploy" + strings.ReplaceAll(redistest.UniqueKey(t), ":", "-")
	s := redistest.ACLServer(t, prefix, nil)
	for _, tc := range []struct {
		name, pass, cmd, msg string
	}{
		{"wrong password", "s3cr3t-wrong", "status", "WRONGPASS"},
		{"no SCAN permission", s.Password, "list", "NOPERM"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := "redis://" + s.User + ":" + tc.pass + "@" + s.Addr()
			for _, asJSON := range []bool{false, true} {
				args := []string{"--redis", url, "--prefix", prefix, tc.cmd}
				if tc.cmd == "status" {
					args = append(args, "job-1")
				}
				if asJSON {
					args = append(args, "--json")
				}
				r := runCLI(t, nil, args...)
				out := r.stdout + r.stderr
				if r.code != exitRuntime || !strings.Contains(out, tc.msg) {
					t.Fatalf("exp exit 1 naming %s, got %d: %q", tc.msg, r.code, out)
				}
				if strings.Contains(out, tc.pass) || strings.Contains(out, secretPiece) {
					t.Fatalf("output holds the password: %q", out)
				}
			}
		})
	}
}

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, exp string }{
		{"redis://ops:s3cr3t@host:6379/0", "redis://ops:xxxxx@host:6379/0"},
		{"redis://ops:s3/cr3t@host:6379", "redis://ops:xxxxx@host:6379"},
		{"redis://ops:s3@cr3t@host:6379", "redis://ops:xxxxx@host:6379"},
		{"redis://s3cr3t@host", "redis://xxxxx@host"},
		{"redis://host:6379?password=s3cr3t&db=1", "redis://host:6379?password=xxxxx&db=1"},
		{"redis://host:6379", "redis://host:6379"},
		{"ops:s3cr3t@host:6379", "ops:xxxxx@host:6379"},
	} {
		if got := redactURL(tc.in); got != tc.exp {
			t.Errorf("redactURL(%q): exp %q, got %q", tc.in, tc.exp, got)
		}
	}
}

// TestNoPasswordInHelp: help shows each flag's default, never the value
// given on this command line.
func TestNoPasswordInHelp(t *testing.T) {
	url := "redis://ops:s3cr3t@127.0.0.1:1"
	for _, args := range [][]string{
		{"--redis", url, "help", "status"},
		{"--redis", url, "status", "--help"},
		{"status", "--redis", url, "-h"},
		{"--redis", url, "--help"},
		{"--redis", url, "list", "--help", "--json"},
	} {
		r := runCLI(t, nil, args...)
		mustOK(t, r)
		if strings.Contains(r.stdout, secretPiece) || !strings.Contains(r.stdout, "Usage") && !strings.Contains(r.stdout, "Global flags") {
			t.Fatalf("%v: %s", args, r.stdout)
		}
	}
}
