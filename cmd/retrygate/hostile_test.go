package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// Job ids come from URLs; reasons and upstreams from code and Redis. These
// hold every byte that could rewrite an operator's terminal or a log line.
var (
	hostileJobs = []string{
		"hostile\x00nul",
		"hostile\r\nstate     ready",
		"\x1b[31mhostile\x1b[0m",
		"hostile-" + strings.Repeat("A", 900) + "\x1b]0;title\x07",
		"hostile\xff\xfenot-utf8",
	}
	hostileUpstream = "\x1b[31mupstream\x00"
)

// assertTerminalSafe fails when out holds a control character other than
// a newline, or bytes that are not UTF-8.
func assertTerminalSafe(t *testing.T, what, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: output is not UTF-8: %q", what, out)
	}
	for _, r := range out {
		if r != '\n' && (r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0) {
			t.Errorf("%s: control character %U in output %q", what, r, out)
			return
		}
	}
}

// hostileFixture cools the hostile jobs (the first one fails) and pauses
// a hostile upstream, under a fresh prefix. (Reasons are not hostile here:
// the gate writes only classification codes, and printable covers them
// like every name.)
func hostileFixture(t *testing.T, tg redistest.Target) *fixture {
	t.Helper()
	f := &fixture{prefix: redistest.UniqueKey(t)}
	f.args = append(redisArgs(t, tg), "--prefix", f.prefix)
	var err error
	f.g, err = gate.New(tg.Client, gate.Options{Prefix: f.prefix, Cooldown: time.Hour, Classify: testClassify, Backoff: gate.Backoff{Jitter: -1}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, job := range hostileJobs {
		fail := errTimeout
		if i == 0 {
			fail = errInvalid
		}
		if err := f.g.Do(ctx, job, func(context.Context, *gate.Lease) error { return fail }); err == nil {
			t.Fatalf("%q: expected a failure", job)
		}
	}
	upstreamd, err := gate.New(tg.Client, gate.Options{Prefix: f.prefix, Upstream: hostileUpstream, Classify: testClassify,
		UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Hour, PauseTTL: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	_ = upstreamd.Do(ctx, "quota", func(context.Context, *gate.Lease) error { return errQuota })
	return f
}

// TestHostileNamesAreEscaped runs every command that prints a job, an upstream
// or a reason on names holding NUL, CR/LF, escape sequences, a very long
// name and bytes that are not UTF-8: the human output never holds a
// control character, --json stays valid JSON and names every job so it
// can be passed back, and every command the CLI prints can be pasted back
// to reach the same job or upstream.
func TestHostileNamesAreEscaped(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			f := hostileFixture(t, tg)
			human := func(args ...string) result {
				t.Helper()
				r := f.run(t, args...)
				assertTerminalSafe(t, strings.Join(args, " "), r.stdout+r.stderr)
				return r
			}
			for _, args := range [][]string{
				{"list"},
				{"list", "--state", "failed"},
				{"list", "--match", "hostile"},
				{"status", "hostile"}, // the "did you mean" suggestions
				{"status", printable(hostileJobs[0])},
				{"status", "never-seen"}, // the paused upstream found under the prefix
				{"reset", "--state", "failed", "--dry-run"},
				{"--upstream", printable(hostileUpstream), "upstream", "status"},
			} {
				if r := human(args...); r.code != exitOK {
					t.Errorf("%q: exit %d, stderr %q", args, r.code, r.stderr)
				}
			}
			// Errors too: a name that is not a quoted name, a running job.
			if r := human("status", `"unterminated`); r.code != exitUsage {
				t.Errorf("bad quoted JOB: exit %d", r.code)
			}
			running := "running\x1b[31m\r\n"
			l, err := f.g.Acquire(context.Background(), running)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = l.Release(context.Background()) }()
			if r := human("reset", printable(running)); r.code != exitRunning || !strings.Contains(r.stderr, printable(running)) {
				t.Errorf("reset of a running hostile job: exit %d, stderr %q", r.code, r.stderr)
			}

			// The suggestions of status are commands to paste.
			r := human("status", "hostile")
			var pasted int
			for _, line := range strings.Split(r.stdout, "\n") {
				_, cmd, ok := strings.Cut(line, "→ ")
				if !ok {
					continue
				}
				args := shellWords(t, cmd)
				if args[0] != "retrygate" {
					t.Fatalf("suggestion %q", cmd)
				}
				st := statusOf(t, runCLI(t, nil, append(append(append([]string{}, f.args...), "--json"), args[1:]...)...))
				if st.State != "cooling_down" && st.State != "failed" {
					t.Errorf("pasted %q: job %q is %s, want the hostile job's state", cmd, st.Job, st.State)
				}
				pasted++
			}
			if pasted != similarLimit {
				t.Errorf("status hostile: %d suggestions pasted, want %d:\n%s", pasted, similarLimit, r.stdout)
			}

			// --json: valid JSON, and job or job_quoted names the job.
			for _, job := range hostileJobs {
				r := f.run(t, "--json", "status", printable(job))
				st := statusOf(t, r)
				back := st.Job
				if st.JobQuoted != "" {
					if back, err = parseName("JOB", st.JobQuoted); err != nil {
						t.Fatal(err)
					}
				}
				if back != job {
					t.Errorf("--json status %q: job %q, job_quoted %q name another job", job, st.Job, st.JobQuoted)
				}
			}
			for _, args := range [][]string{{"list"}, {"status", "hostile"}, {"status", "never-seen"},
				{"reset", "--state", "failed", "--dry-run"}, {"--upstream", printable(hostileUpstream), "upstream", "status"},
				{"status", `"unterminated`}, {"reset", printable(running)}} {
				r := f.run(t, append([]string{"--json"}, args...)...)
				if !json.Valid([]byte(r.stdout)) || r.stderr != "" {
					t.Errorf("--json %q: invalid JSON %q, stderr %q", args, r.stdout, r.stderr)
				}
			}

			// Without --upstream the paused upstream is named, but no command
			// resets it: the job's gate may not use it.
			if r := human("status", "never-seen"); strings.Contains(r.stdout, "upstream reset") {
				t.Errorf("status without --upstream suggests an upstream reset:\n%s", r.stdout)
			}
			// The clear hint of the job's gate's paused upstream, pasted, resets it.
			r = human("--upstream", printable(hostileUpstream), "status", "never-seen")
			var hint string
			for _, line := range strings.Split(r.stdout, "\n") {
				if h, ok := strings.CutPrefix(line, "clear     "); ok {
					hint = h
				}
			}
			if hint == "" {
				t.Fatalf("status never-seen: no clear hint for the paused upstream:\n%s", r.stdout)
			}
			args := shellWords(t, hint)
			mustOK(t, runCLI(t, nil, append(append([]string{}, f.args...), args[1:]...)...))
			upstreamd, err := gate.New(tg.Client, gate.Options{Prefix: f.prefix, Upstream: hostileUpstream})
			if err != nil {
				t.Fatal(err)
			}
			if ups, err := upstreamd.Upstreams(context.Background()); err != nil || len(ups) != 1 || ups[0].State != gate.Ready {
				t.Fatalf("after the pasted %q: upstream %+v, %v", hint, ups, err)
			}

			// reset takes what status printed: every cooling hostile job
			// resets; the failed one is left to the bulk reset below.
			for _, job := range hostileJobs[1:] {
				r := human("reset", printable(job))
				if r.code != exitOK || !strings.Contains(r.stdout, printable(job)) {
					t.Errorf("reset %q: exit %d, %q", printable(job), r.code, r.stdout)
				}
				if st := mustStatusOf(t, f.g, job); st.State != gate.Ready || st.Attempts != 0 {
					t.Errorf("%q after reset: %v, %d attempts", job, st.State, st.Attempts)
				}
			}
			// The bulk reset prints what it cleared.
			if r := human("reset", "--state", "failed"); r.code != exitOK || !strings.Contains(r.stdout, printable(hostileJobs[0])) {
				t.Errorf("reset --state failed: exit %d, %q", r.code, r.stdout)
			}
			if r := f.run(t, "--json", "reset", "--state", "cooling"); r.code != exitOK || !json.Valid([]byte(r.stdout)) {
				t.Errorf("--json reset --state cooling: exit %d, %q", r.code, r.stdout)
			}
		})
	}
}

// TestParseNameReadsPrintable: what printable writes, parseName reads
// back, for names that need quoting and names that do not.
func TestParseNameReadsPrintable(t *testing.T) {
	for _, s := range append([]string{"doc-1", "doc 3/ü", `"quoted"`, `back\slash`, "\"", "", "tab\there"}, hostileJobs...) {
		got, err := parseName("JOB", printable(s))
		if err != nil || got != s {
			t.Errorf("parseName(printable(%q)) = %q, %v", s, got, err)
		}
	}
	if _, err := parseName("JOB", `"open`); err == nil {
		t.Error(`parseName("open): exp an error`)
	}
}

func FuzzParseNameReadsPrintable(f *testing.F) {
	for _, s := range append([]string{"doc-1", `"x"`, "\\"}, hostileJobs...) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := printable(s)
		if got, err := parseName("JOB", p); err != nil || got != s {
			t.Fatalf("parseName(printable(%q)) = %q, %v", s, got, err)
		}
		if strings.ContainsFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f }) || !utf8.ValidString(p) {
			t.Fatalf("printable(%q) = %q is not safe on a terminal", s, p)
		}
	})
}

// shellWords splits a printed command line as a POSIX shell would, for
// the plain words and single quotes the CLI prints.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	in, quoted := false, false
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; {
		case in && ch == '\'':
			in = false
		case in:
			cur.WriteByte(ch)
		case ch == '\'':
			in, quoted = true, true
		case ch == ' ':
			if cur.Len() > 0 || quoted {
				words = append(words, cur.String())
			}
			cur.Reset()
			quoted = false
		case ch == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		default:
			cur.WriteByte(ch)
		}
	}
	if in {
		t.Fatalf("unterminated quote in %q", line)
	}
	if cur.Len() > 0 || quoted {
		words = append(words, cur.String())
	}
	return words
}
