package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/limits"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// result is one run of the command.
type result struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb, func(k string) string { return env[k] })
	return result{code, out.String(), errb.String()}
}

// redisArgs are the flags that point the CLI at a target.
func redisArgs(t *testing.T, tg redistest.Target) []string {
	t.Helper()
	switch c := tg.Client.(type) {
	case *redis.ClusterClient:
		return []string{"--cluster", strings.Join(c.Options().Addrs, ",")}
	case *redis.Client:
		return []string{"--redis", "redis://" + c.Options().Addr}
	}
	t.Fatalf("unexpected client %T", tg.Client)
	return nil
}

var (
	errTimeout = errors.New("upstream timed out")
	errInvalid = errors.New("invalid request")
	errQuota   = errors.New("quota exhausted")
)

func testClassify(err error) classify.Verdict {
	switch {
	case errors.Is(err, errInvalid):
		return classify.Verdict{Class: classify.ClassPermanent, Reason: classify.ReasonInvalidRequest}
	case errors.Is(err, errQuota):
		return classify.Verdict{Class: classify.ClassSystemic, Reason: classify.ReasonQuotaExhausted, ProviderWide: true}
	}
	return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonTimeout}
}

// fixture puts jobs of a fresh prefix in known states, with hour-long
// TTLs so the human output (rounded to minutes) is stable.
type fixture struct {
	prefix string
	args   []string // --redis/--cluster and --prefix
	g      *gate.Gate
}

func newFixture(t *testing.T, tg redistest.Target) *fixture {
	t.Helper()
	f := &fixture{prefix: redistest.UniqueKey(t)}
	f.args = append(redisArgs(t, tg), "--prefix", f.prefix)
	var err error
	f.g, err = gate.New(tg.Client, gate.Options{Prefix: f.prefix, Cooldown: time.Hour,
		Lease: time.Hour, Classify: testClassify,
		Backoff: gate.Backoff{Jitter: -1}, UpstreamPolicy: gate.UpstreamPolicy{Off: true}}) // jobs of their own, as the goldens show
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	fail := func(job string, err error) {
		t.Helper()
		if e := f.g.Do(ctx, job, func(context.Context, *gate.Lease) error { return err }); e == nil {
			t.Fatalf("%s: expected a failure", job)
		}
	}
	fail("doc-1", errTimeout)
	fail("doc-2", errInvalid)
	fail("doc 3/ü", errTimeout)
	l, err := f.g.Acquire(ctx, "doc-4")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	if err := f.g.Do(ctx, "doc-5", func(context.Context, *gate.Lease) error { return nil }); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) run(t *testing.T, args ...string) result {
	t.Helper()
	return runCLI(t, nil, append(append([]string{}, f.args...), args...)...)
}

var (
	fenceRe = regexp.MustCompile(`\b1\d{15}\b`)
	timeRe  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
)

// golden compares out, with the prefix, fences and wall-clock times
// scrubbed, to testdata/name.golden.
func golden(t *testing.T, name, prefix, out string) {
	t.Helper()
	if prefix != "" {
		out = strings.ReplaceAll(out, prefix, "PREFIX")
	}
	out = fenceRe.ReplaceAllString(out, "<fence>")
	out = timeRe.ReplaceAllString(out, "<time>")
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	exp, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(exp) != out {
		t.Errorf("%s: output differs from %s:\n--- got\n%s--- exp\n%s", name, path, out, exp)
	}
}

func mustOK(t *testing.T, r result) {
	t.Helper()
	if r.code != exitOK || r.stderr != "" {
		t.Fatalf("exit %d, stderr %q, stdout %q", r.code, r.stderr, r.stdout)
	}
}

func TestStatusGolden(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			f := newFixture(t, tg)
			for _, tc := range []struct{ golden, job string }{
				{"status_cooling", "doc-1"},
				{"status_failed", "doc-2"},
				{"status_encoded", "doc 3/ü"},
				{"status_running", "doc-4"},
				{"status_ready", "never-seen"},
			} {
				r := f.run(t, "status", tc.job)
				mustOK(t, r)
				golden(t, tc.golden, f.prefix, r.stdout)
			}
		})
	}
}

func TestStatusJSON(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			f := newFixture(t, tg)
			// Flags may follow the job.
			r := f.run(t, "status", "doc-1", "--json")
			mustOK(t, r)
			var got statusJSON
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("%v: %s", err, r.stdout)
			}
			if exp, got := "cooling_down", got.State; exp != got {
				t.Errorf("state: exp %s, got %s", exp, got)
			}
			if exp, got := "timeout", got.Reason; exp != got {
				t.Errorf("reason: exp %s, got %s", exp, got)
			}
			if exp, got := 1, got.Attempts; exp != got {
				t.Errorf("attempts: exp %d, got %d", exp, got)
			}
			if got.RetryAfterMs <= ms(59*time.Minute) || got.RetryAfterMs > ms(time.Hour) {
				t.Errorf("retry_after_ms: exp just under 1h, got %d", got.RetryAfterMs)
			}
			if _, err := time.Parse(time.RFC3339, got.RetryAt); err != nil {
				t.Errorf("retry_at %q: %v", got.RetryAt, err)
			}
			st, err := f.g.Status(context.Background(), "doc-1")
			if err != nil {
				t.Fatal(err)
			}
			if exp, got := st.Fence, got.Fence; exp != got || got == 0 {
				t.Errorf("fence: exp %d, got %d", exp, got)
			}
			key := keyspace.Job(f.prefix, "doc-1")
			if len(got.Keys) != 1 || got.Keys[0].Key != key || !got.Keys[0].Exists || got.Keys[0].TTLMs <= got.RetryAfterMs {
				t.Errorf("keys: exp the job's key outliving its cooldown (it keeps the attempt count), got %+v", got.Keys)
			}
		})
	}
}

func TestListAndReset(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			f := newFixture(t, tg)
			if tg.IsCluster {
				assertSpread(t, tg.Client.(*redis.ClusterClient), f.prefix, "doc-1", "doc-2", "doc 3/ü", "doc-4")
			}
			r := f.run(t, "list")
			mustOK(t, r)
			golden(t, "list", f.prefix, r.stdout)

			r = f.run(t, "list", "--state", "cooling")
			mustOK(t, r)
			golden(t, "list_cooling", f.prefix, r.stdout)

			r = f.run(t, "--json", "list", "--state", "failed")
			mustOK(t, r)
			var l listJSON
			if err := json.Unmarshal([]byte(r.stdout), &l); err != nil {
				t.Fatal(err)
			}
			if len(l.Jobs) != 1 || l.Jobs[0].Job != "doc-2" || l.Jobs[0].State != "failed" || l.LimitReached {
				t.Fatalf("list --state failed: %+v", l)
			}

			r = f.run(t, "list", "--limit", "2")
			if exp, got := exitOK, r.code; exp != got {
				t.Fatalf("exit: exp %d, got %d", exp, got)
			}
			if exp, got := 3, strings.Count(r.stdout, "\n"); exp != got { // header + 2
				t.Errorf("--limit 2: exp %d lines, got %d:\n%s", exp, got, r.stdout)
			}
			if !strings.Contains(r.stderr, "--limit 2") {
				t.Errorf("--limit 2: exp a note on stderr, got %q", r.stderr)
			}

			r = f.run(t, "reset", "doc-1")
			mustOK(t, r)
			golden(t, "reset", f.prefix, r.stdout)
			if st, _ := f.g.Status(context.Background(), "doc-1"); st.State != gate.Ready || st.Attempts != 0 {
				t.Fatalf("after reset: %+v", st)
			}
			r = f.run(t, "reset", "doc-4")
			if exp, got := exitRunning, r.code; exp != got {
				t.Fatalf("reset running: exit exp %d, got %d (%s)", exp, got, r.stderr)
			}
			if !strings.Contains(r.stderr, "is running") || strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("reset running: stderr %q", r.stderr)
			}
		})
	}
}

func TestUpstream(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			g, err := gate.New(tg.Client, gate.Options{UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Hour, PauseTTL: time.Hour}, Prefix: prefix, Upstream: "openai:prod",
				Cooldown: time.Hour, Classify: testClassify,
				Backoff: gate.Backoff{Jitter: -1}})
			if err != nil {
				t.Fatal(err)
			}
			args := append(redisArgs(t, tg), "--prefix", prefix, "--upstream", "openai:prod")
			ctx := context.Background()
			_ = g.Do(ctx, "doc-9", func(context.Context, *gate.Lease) error { return errQuota })

			r := runCLI(t, nil, append(args, "upstream", "status")...)
			mustOK(t, r)
			golden(t, "upstream_status_paused", prefix, r.stdout)
			// A job of a paused upstream says why it is refused and how to clear it.
			r = runCLI(t, nil, append(args, "status", "doc-0")...)
			mustOK(t, r)
			golden(t, "status_upstream_paused", prefix, r.stdout)

			r = runCLI(t, nil, append(args, "--json", "upstream", "reset")...)
			mustOK(t, r)
			var sr upstreamResetJSON
			if err := json.Unmarshal([]byte(r.stdout), &sr); err != nil {
				t.Fatal(err)
			}
			if !sr.Reset || sr.Was.State != "paused" || sr.Was.Reason != "quota_exhausted" {
				t.Fatalf("upstream reset: %+v", sr)
			}
			if err := g.Do(ctx, "doc-0", func(context.Context, *gate.Lease) error { return nil }); err != nil {
				t.Fatalf("after upstream reset: %v", err)
			}
			r = runCLI(t, nil, append(args, "upstream", "status")...)
			mustOK(t, r)
			golden(t, "upstream_status_ready", prefix, r.stdout)
			// The fake calls answer with no rate-limit headers: the
			// provider reads as sending none, with no rate learned yet (no
			// call refused: issue 37.4).
			r = runCLI(t, nil, append(args, "--json", "upstream", "status")...)
			mustOK(t, r)
			var learned upstreamJSON
			if err := json.Unmarshal([]byte(r.stdout), &learned); err != nil {
				t.Fatal(err)
			}
			if b := learned.Budget; b == nil || !b.Unreported || b.LearnedRPM != 0 || b.Requests != nil || b.Tokens != nil {
				t.Errorf("upstream status --json of a provider that sends no budget: %+v, want unreported, no rate learned", learned.Budget)
			}

			// A response's rate limits, in OpenAI's documented headers
			// (gatetest.OpenAIRequests): upstream status shows the budget
			// as admission estimates it.
			gatetest.Report(t, g, "doc-8", gatetest.OpenAIRequests(12, 60, "48s"))
			r = runCLI(t, nil, append(args, "upstream", "status")...)
			mustOK(t, r)
			if !strings.Contains(r.stdout, "budget requests") || !strings.Contains(r.stdout, " of 60 left, whole in ") ||
				!strings.Contains(r.stdout, "0 calls admitted, not settled") {
				t.Errorf("upstream status with a budget:\n%s", r.stdout)
			}
			r = runCLI(t, nil, append(args, "--json", "upstream", "status")...)
			mustOK(t, r)
			var uj upstreamJSON
			if err := json.Unmarshal([]byte(r.stdout), &uj); err != nil {
				t.Fatal(err)
			}
			if b := uj.Budget; b == nil || b.Requests == nil || b.Requests.Limit != 60 || b.Requests.Left < 12 || b.Requests.ResetMs <= 0 || b.Tokens != nil {
				t.Errorf("upstream status --json budget: %+v", uj.Budget)
			}
		})
	}
}

func TestCalibrate(t *testing.T) {
	for _, tc := range []struct {
		golden string
		args   []string
		code   int
	}{
		{"calibrate_met", []string{"calibrate", "--p99", "18s", "--jitter", "4s", "--guard", "2s", "--takeover-slo", "30s"}, exitOK},
		{"calibrate_not_met", []string{"calibrate", "--p99", "18s", "--jitter", "4s", "--takeover-slo", "20s"}, exitNotMet},
		{"calibrate_short", []string{"calibrate", "--p99", "5ms", "--guard", "0s"}, exitOK},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			r := runCLI(t, nil, tc.args...)
			if exp, got := tc.code, r.code; exp != got {
				t.Fatalf("exit: exp %d, got %d (%s)", exp, got, r.stderr)
			}
			golden(t, tc.golden, "", r.stdout+r.stderr)
		})
	}
	r := runCLI(t, nil, "calibrate", "--json", "--p99=18s", "--jitter=4s", "--detect=1s", "--takeover-slo=20s")
	if exp, got := exitNotMet, r.code; exp != got {
		t.Fatalf("exit: exp %d, got %d", exp, got)
	}
	var j calibrationJSON
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
		t.Fatal(err)
	}
	if j.LeaseTTLMs != 24000 || j.RenewEveryMs != 8000 || j.TakeoverBoundMs != 25000 || j.SLOMet == nil || *j.SLOMet {
		t.Fatalf("calibrate --json: %+v", j)
	}
}

func TestCheck(t *testing.T) {
	s := redistest.Server(t, redistest.WithArgs("--maxmemory-policy", "allkeys-lru"))
	r := runCLI(t, nil, "--redis", "redis://"+s.Addr(), "check")
	if exp, got := exitNotMet, r.code; exp != got {
		t.Fatalf("exit: exp %d, got %d (%s)", exp, got, r.stderr)
	}
	if !strings.Contains(r.stdout, "maxmemory_policy_evicts") || !strings.Contains(r.stdout, "allkeys-lru") {
		t.Fatalf("stdout %q", r.stdout)
	}
	// REDIS_URL is the default for --redis.
	ok := redistest.Server(t, redistest.WithArgs("--appendonly", "yes"))
	r = runCLI(t, map[string]string{"REDIS_URL": "redis://" + ok.Addr()}, "check")
	mustOK(t, r)
}

// TestCheckPersistence: check warns (exit 3) when Redis persists nothing,
// since a restart then forgets every cooldown, failed and done mark
// (TestRestartKeepsMarks shows what each setting keeps); an AOF or an RDB
// save schedule is enough. The expectations are Redis's documented
// defaults: appendonly no, and a save schedule unless --save "" is given.
func TestCheckPersistence(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		warn bool
	}{
		{"nothing persisted", nil, true}, // redistest's servers run with --save "" --appendonly no
		{"AOF", []string{"--appendonly", "yes", "--appendfsync", "everysec"}, false},
		{"RDB schedule", []string{"--save", "3600 1 300 100"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Server(t, redistest.WithArgs(tc.args...))
			r := runCLI(t, nil, "--redis", "redis://"+s.Addr(), "check")
			if !tc.warn {
				mustOK(t, r)
				return
			}
			if r.code != exitNotMet || !strings.Contains(r.stdout, "warning: no_persistence: gate: Redis on "+s.Addr()+" persists nothing") ||
				!strings.Contains(r.stdout, "appendonly yes") {
				t.Fatalf("exp exit 3 and a no_persistence warning naming the fix, got %d %q %q", r.code, r.stdout, r.stderr)
			}
			r = runCLI(t, nil, "--redis", "redis://"+s.Addr(), "--json", "check")
			var j struct {
				OK       bool `json:"ok"`
				Warnings []struct {
					Reason, Addr string
				} `json:"warnings"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || j.OK || len(j.Warnings) != 1 ||
				j.Warnings[0].Reason != "no_persistence" || j.Warnings[0].Addr != s.Addr() {
				t.Fatalf("check --json: %q, %v", r.stdout, err)
			}
		})
	}
}

// Bad input ends in one line on stderr and a non-zero exit, never a trace.
func TestBadInput(t *testing.T) {
	long := strings.Repeat("x", limits.MaxJobLen+1)
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no command", nil, exitUsage, "missing COMMAND"},
		{"unknown command", []string{"frobnicate"}, exitUsage, `unknown command "frobnicate"`},
		{"unknown flag", []string{"status", "--nope", "a"}, exitUsage, "flag provided but not defined"},
		{"missing job", []string{"status"}, exitUsage, "missing JOB"},
		{"two jobs", []string{"reset", "a", "b"}, exitUsage, "one JOB expected"},
		{"long job", []string{"status", long}, exitUsage, "invalid job key"},
		{"unknown state", []string{"list", "--state", "sleeping"}, exitUsage, `unknown --state "sleeping"`},
		{"bad limit", []string{"list", "--limit", "many"}, exitUsage, "invalid value"},
		{"bad duration", []string{"calibrate", "--p99", "18 parsecs"}, exitUsage, "invalid value"},
		{"missing p99", []string{"calibrate"}, exitUsage, "--p99 is required"},
		{"negative", []string{"calibrate", "--p99", "1s", "--guard", "-1s"}, exitUsage, "negative"},
		{"bad url", []string{"--redis", "http://x", "status", "a"}, exitUsage, "bad Redis URL"},
		{"redis and cluster", []string{"--redis", "redis://a:1", "--cluster", "b:1", "list"}, exitUsage, "exclusive"},
		{"bad prefix", []string{"--redis", "redis://127.0.0.1:1", "--prefix", "a{b", "status", "a"}, exitUsage, "Prefix"},
		{"upstream without --upstream", []string{"upstream", "status"}, exitUsage, "--upstream is required"},
		{"upstream bad verb", []string{"--upstream", "s", "upstream", "drop"}, exitUsage, "upstream status"},
		{"unreachable", []string{"--redis", "redis://127.0.0.1:1", "status", "a"}, exitRuntime, "redis at 127.0.0.1:1"},
		{"unreachable env", []string{"list"}, exitRuntime, "connection refused"},
		{"unreachable cluster", []string{"--cluster", "127.0.0.1:1", "list"}, exitRuntime, "connection refused"},
		{"help unknown", []string{"help", "nope"}, exitUsage, "unknown command"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			// A --timeout far above the bound below: failing fast means not
			// waiting for it, however loaded the machine.
			r := runCLI(t, map[string]string{"REDIS_URL": "redis://127.0.0.1:1"}, append([]string{"--timeout", "60s"}, tc.args...)...)
			if exp, got := tc.code, r.code; exp != got {
				t.Fatalf("exit: exp %d, got %d (stderr %q)", exp, got, r.stderr)
			}
			if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "retrygate: ") {
				t.Fatalf("stderr: exp one line starting with 'retrygate: ', got %q", r.stderr)
			}
			if !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("stderr %q should contain %q", r.stderr, tc.msg)
			}
			if strings.Contains(r.stderr, "goroutine") || r.stdout != "" {
				t.Errorf("stdout %q, stderr %q", r.stdout, r.stderr)
			}
			if d := time.Since(start); d > 30*time.Second {
				t.Errorf("took %v; unreachable Redis must fail fast, not wait for --timeout", d)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"-h"}} {
		r := runCLI(t, nil, args...)
		mustOK(t, r)
		if !strings.Contains(r.stdout, "Exit codes:") || !strings.Contains(r.stdout, "calibrate") {
			t.Errorf("%v: %s", args, r.stdout)
		}
	}
	r := runCLI(t, nil, "list", "--help")
	mustOK(t, r)
	if !strings.Contains(r.stdout, "-state") || !strings.Contains(r.stdout, "Exit codes:") {
		t.Errorf("list --help: %s", r.stdout)
	}
}

// assertSpread checks the jobs' locks live on more than one master, so a
// complete list proves the SCAN covered every master.
func assertSpread(t *testing.T, cc *redis.ClusterClient, prefix string, jobs ...string) {
	t.Helper()
	var mu sync.Mutex
	nodes := 0
	err := cc.ForEachMaster(context.Background(), func(ctx context.Context, c *redis.Client) error {
		for _, job := range jobs {
			lock := keyspace.Job(prefix, job)
			// A master answers EXISTS only for its own slots' keys.
			if n, err := c.Exists(ctx, lock).Result(); err == nil && n == 1 {
				mu.Lock()
				nodes++
				mu.Unlock()
				return nil
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if nodes < 2 {
		t.Fatalf("the fixture's jobs live on %d master(s); the test needs at least 2", nodes)
	}
}
