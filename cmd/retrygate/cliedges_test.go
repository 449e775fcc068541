package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// TestCalibrateRejectsWhatItCannotMean: a bare number gets the fix to
// copy ("18" used to say only "parse error"); a value no lock is held for
// (100h, negative, zero) is refused with its bound, where 100h used to be
// accepted silently.
func TestCalibrateRejectsWhatItCannotMean(t *testing.T) {
	for _, tc := range []struct {
		args []string
		msg  []string
	}{
		{[]string{"--p99", "18"}, []string{`invalid value "18" for flag --p99`, "a duration needs a unit: 18s"}},
		{[]string{"--p99", "18s", "--jitter", "2.5"}, []string{"--jitter", "2.5s"}},
		{[]string{"--p99", "18s", "--timeout", "5"}, []string{"--timeout", "5s"}},
		{[]string{"--p99", "eighteen"}, []string{"not a duration: write it like 18s"}},
		{[]string{"--p99", "100h"}, []string{"--p99 100h is over 1h: is the unit right?"}},
		{[]string{"--p99", "-18s"}, []string{"--p99 -18s is negative"}},
		{[]string{"--p99", "0s"}, []string{"--p99 is required"}},
		{[]string{"--p99", "18s", "--jitter", "2h", "--takeover-slo", "48h"}, []string{"--jitter 2h is over 1h", "--takeover-slo 48h is over 24h"}},
		{[]string{"--p99", "18s", "--detect", "-1s"}, []string{"--detect -1s is negative"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := runCLI(t, nil, append([]string{"calibrate"}, tc.args...)...)
			if r.code != exitUsage || r.stdout != "" {
				t.Fatalf("exit %d (want %d), stdout %q", r.code, exitUsage, r.stdout)
			}
			for _, m := range tc.msg {
				if !strings.Contains(r.stderr, m) {
					t.Errorf("stderr %q: want %q", r.stderr, m)
				}
			}
			r = runCLI(t, nil, append([]string{"calibrate", "--json"}, tc.args...)...)
			var e errorJSON
			if err := json.Unmarshal([]byte(r.stdout), &e); err != nil || e.ExitCode != exitUsage || !strings.Contains(e.Error, tc.msg[0]) {
				t.Errorf("--json: %q, %v", r.stdout, err)
			}
		})
	}
	// The bounds themselves are accepted.
	mustOK(t, runCLI(t, nil, "calibrate", "--p99", "1h", "--jitter", "1h", "--takeover-slo", "24h"))
}

// TestTLSToPlainRedis: a rediss:// URL pointed at a Redis without TLS used
// to end in "no answer within --timeout 10s"; it now says the handshake
// failed because the server answers plain text, within about a second.
func TestTLSToPlainRedis(t *testing.T) {
	s := redistest.Server(t)
	for _, args := range [][]string{
		{"--redis", "rediss://" + s.Addr()},
		{"--redis", "redis://" + s.Addr(), "--tls-insecure"}, // refused before dialing: needs rediss://
		{"--cluster", s.Addr(), "--tls-insecure"},
	} {
		start := time.Now()
		r := runCLI(t, nil, append(args, "--timeout", "60s", "status", "doc-1")...)
		took := time.Since(start)
		if args[1] == "redis://"+s.Addr() {
			if r.code != exitUsage || !strings.Contains(r.stderr, "need a rediss:// URL") {
				t.Errorf("%q: exit %d, %q", args, r.code, r.stderr)
			}
			continue
		}
		if r.code != exitRuntime {
			t.Fatalf("%q: exit %d, stderr %q", args, r.code, r.stderr)
		}
		for _, exp := range []string{"TLS handshake with " + s.Addr() + " failed", "answers plain-text Redis there, not TLS", "redis:// URL"} {
			if !strings.Contains(r.stderr, exp) {
				t.Errorf("%q: stderr %q, want %q", args, r.stderr, exp)
			}
		}
		// Told at once by the server's plain-text answer, not by --timeout
		// (60 s), however loaded the machine.
		if strings.Contains(r.stderr, "--timeout") || took > 30*time.Second {
			t.Errorf("%q: %q after %v", args, r.stderr, took)
		}
	}
}

// TestHelpOneFlagStyle: the top-level help spells flags --flag; every
// command's help did -flag (flag.PrintDefaults). Now both, and the flag
// errors, use --flag.
func TestHelpOneFlagStyle(t *testing.T) {
	single := regexp.MustCompile(`(?m)^\s+-[a-z]`)
	outs := map[string]string{"help": runCLI(t, nil, "help").stdout}
	for _, cmd := range (&cli{}).commands() {
		r := runCLI(t, nil, "help", cmd.name)
		mustOK(t, r)
		outs["help "+cmd.name] = r.stdout
		if r2 := runCLI(t, nil, cmd.name, "--help"); r2.stdout != r.stdout {
			t.Errorf("%s --help differs from help %s", cmd.name, cmd.name)
		}
	}
	for name, out := range outs {
		if m := single.FindString(out); m != "" {
			t.Errorf("%s: flag with one dash %q in\n%s", name, m, out)
		}
		if !strings.Contains(out, "  --json              print JSON") {
			t.Errorf("%s: the global flags are not listed in the one style:\n%s", name, out)
		}
	}
	for _, want := range []string{"  --limit N           stop after N jobs", "  --state STATE       only jobs in this STATE"} {
		if !strings.Contains(outs["help list"], want) {
			t.Errorf("help list: want %q in\n%s", want, outs["help list"])
		}
	}
	if r := runCLI(t, nil, "list", "--nope"); !strings.Contains(r.stderr, "not defined: --nope") {
		t.Errorf("unknown flag: %q", r.stderr)
	}
	if r := runCLI(t, nil, "--nope"); !strings.Contains(r.stderr, "not defined: --nope") {
		t.Errorf("unknown global flag: %q", r.stderr)
	}
}

// TestHelpListsTheFlagsTheCommandReads: a command's help lists only the
// global flags it reads. explain and calibrate never talk to Redis, so
// their help shows none of the connection, TLS, Sentinel or key flags;
// check reads no keys, so no --prefix or --upstream.
func TestHelpListsTheFlagsTheCommandReads(t *testing.T) {
	conn := []string{"--redis URL", "--cluster ADDRS", "--sentinel ADDRS", "--master NAME", "--tls-ca FILE", "--tls-cert FILE", "--tls-key FILE", "--tls-insecure", "--timeout D"}
	for _, tc := range []struct {
		cmd       string
		want, not []string
	}{
		{"explain", []string{"--json", "--status STATUS"}, append(conn, "--prefix P", "--upstream U")},
		{"calibrate", []string{"--json", "--p99 D"}, append(conn, "--prefix P", "--upstream U")},
		{"check", append(conn, "--json"), []string{"--prefix P", "--upstream U"}},
		{"list", append(conn, "--json", "--prefix P"), []string{"--upstream U"}},
		{"reset", append(conn, "--json", "--prefix P"), []string{"--upstream U"}},
		{"status", append(conn, "--json", "--prefix P", "--upstream U"), nil},
		{"upstream", append(conn, "--json", "--prefix P", "--upstream U"), nil},
	} {
		r := runCLI(t, nil, "help", tc.cmd)
		mustOK(t, r)
		for _, f := range tc.want {
			if !strings.Contains(r.stdout, "  "+f) {
				t.Errorf("help %s: want %s listed in\n%s", tc.cmd, f, r.stdout)
			}
		}
		for _, f := range tc.not {
			if strings.Contains(r.stdout, "  "+f) {
				t.Errorf("help %s: %s listed, but the command does not read it:\n%s", tc.cmd, f, r.stdout)
			}
		}
	}
	// The top-level usage still lists every global flag.
	r := runCLI(t, nil, "help")
	for _, f := range append(conn, "--json", "--prefix P", "--upstream U") {
		if !strings.Contains(r.stdout, "  "+f) {
			t.Errorf("help: want %s listed in\n%s", f, r.stdout)
		}
	}
}
