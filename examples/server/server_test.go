package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrygate/retrygate/internal/testkit/syncbuf"
)

// retryAfter returns the Retry-After header in seconds (-1 when missing).
func (r reply) retryAfter(t *testing.T) int {
	t.Helper()
	v := r.header.Get("Retry-After")
	if v == "" {
		return -1
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("Retry-After %q: %v", v, err)
	}
	return n
}

// expect checks a refusal or failure: status, problem JSON, job state and
// reason.
func expect(t *testing.T, what string, r reply, code int, state, reason string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: status %d, want %d (%s)", what, r.code, code, r.raw)
	}
	if code >= 400 && r.header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s: Content-Type %q, want application/problem+json", what, r.header.Get("Content-Type"))
	}
	if exp, got := state, r.body["job_state"]; exp != got {
		t.Errorf("%s: job_state %v, want %q", what, got, exp)
	}
	if exp, got := reason, r.body["reason"]; reason != "" && exp != got {
		t.Errorf("%s: reason %v, want %q", what, got, exp)
	}
}

func TestEvaluateSucceedsAndStoresTheResult(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig())

	r := s.evaluate(t, "welcome-letter")
	if r.code != http.StatusOK {
		t.Fatalf("evaluate: %d %s", r.code, r.raw)
	}
	doc := s.do(t, http.MethodGet, "/documents/welcome-letter")
	res, _ := doc.body["result"].(map[string]any)
	if exp, got := "A friendly welcome; the first invoice is due in 30 days.", res["summary"]; exp != got {
		t.Fatalf("stored summary %v, want %q", got, exp)
	}
	if exp, got := "low", res["risk"]; exp != got {
		t.Fatalf("stored risk %v, want %q", got, exp)
	}
	if exp, got := int64(1), s.stats(t).UpstreamCalls; exp != got {
		t.Fatalf("upstream calls %d, want %d", got, exp)
	}
	// Kept Done for DoneTTL: a duplicate gets the stored result (Replay)
	// without a model call, then the document can run again.
	if exp, got := "done", s.status(t, "welcome-letter").body["job_state"]; exp != got {
		t.Fatalf("job_state after success %v, want %q", got, exp)
	}
	dup := s.evaluate(t, "welcome-letter")
	res, _ = dup.body["result"].(map[string]any)
	if dup.code != http.StatusOK || res["summary"] == nil {
		t.Fatalf("duplicate within DoneTTL: %d %s, want the stored result", dup.code, dup.raw)
	}
	if exp, got := int64(1), s.stats(t).UpstreamCalls; exp != got {
		t.Fatalf("upstream calls after the duplicate %d, want %d", got, exp)
	}
	s.waitState(t, "welcome-letter", "ready", 10*time.Second)
}

// A per-document 429 with retry-after-ms cools the job for the hint;
// retries meanwhile are refused without a model call; after the hint the
// retry runs and succeeds.
func TestRateLimitedCoolsDownForTheServersHint(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.RateLimitHint = 2 * time.Second // above Cooldown, so the hint decides
	s := startServer(t, cfg)

	r := s.evaluate(t, "supplier-contract")
	expect(t, "first call", r, http.StatusTooManyRequests, "cooling_down", "rate_limited")
	if exp, got := 2, r.retryAfter(t); exp != got {
		t.Fatalf("Retry-After %d, want %d (the server's hint)", got, exp)
	}
	for i := 0; i < 3; i++ {
		expect(t, "retry during cooldown", s.evaluate(t, "supplier-contract"), http.StatusTooManyRequests, "cooling_down", "rate_limited")
	}
	st := s.stats(t)
	if exp, got := int64(1), st.UpstreamCalls; exp != got {
		t.Fatalf("upstream calls %d, want %d: retries during the cooldown must not reach the model", got, exp)
	}
	if exp, got := int64(3), st.Refused; exp != got {
		t.Fatalf("refused %d, want %d", got, exp)
	}
	if exp, got := "ready", st.Upstream.State; exp != got {
		t.Fatalf("upstream %q, want %q: a per-document limit must not pause every job", got, exp)
	}
	status := s.status(t, "supplier-contract")
	if secs, _ := status.body["retry_after_seconds"].(float64); secs < 1 || secs > 2 {
		t.Fatalf("retry-status retry_after_seconds %v, want 1..2", secs)
	}

	s.waitState(t, "supplier-contract", "ready", 10*time.Second)
	if r := s.evaluate(t, "supplier-contract"); r.code != http.StatusOK {
		t.Fatalf("retry after the cooldown: %d %s", r.code, r.raw)
	}
}

// A 503 without a hint cools the job for the gate's own backoff.
func TestOverloadedBacksOff(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Cooldown = 3 * time.Second
	s := startServer(t, cfg)

	r := s.evaluate(t, "incident-report")
	expect(t, "first call", r, http.StatusTooManyRequests, "cooling_down", "overloaded")
	// Cooldown 3s ± 10% jitter, rounded up to whole seconds.
	if got := r.retryAfter(t); got < 3 || got > 4 {
		t.Fatalf("Retry-After %d, want 3..4 (the gate's cooldown)", got)
	}
	if exp, got := "ready", s.stats(t).Upstream.State; exp != got {
		t.Fatalf("upstream %q, want %q", got, exp)
	}
}

// Context too long is permanent: the job is failed at once and stays
// failed, without further model calls, until an operator resets it.
func TestContextTooLongFailsPermanently(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig())

	r := s.evaluate(t, "patient-history")
	expect(t, "first call", r, http.StatusUnprocessableEntity, "failed", "context_length_exceeded")
	if got := r.retryAfter(t); got != -1 {
		t.Fatalf("Retry-After %d on a failed job, want none", got)
	}
	expect(t, "retry", s.evaluate(t, "patient-history"), http.StatusUnprocessableEntity, "failed", "context_length_exceeded")
	if exp, got := int64(1), s.stats(t).UpstreamCalls; exp != got {
		t.Fatalf("upstream calls %d, want %d", got, exp)
	}
	if exp, got := "failed", s.status(t, "patient-history").body["job_state"]; exp != got {
		t.Fatalf("job_state %v, want %q", got, exp)
	}

	if r := s.do(t, http.MethodPost, "/documents/patient-history/reset"); r.code != http.StatusNoContent {
		t.Fatalf("reset: %d %s", r.code, r.raw)
	}
	if exp, got := "ready", s.status(t, "patient-history").body["job_state"]; exp != got {
		t.Fatalf("job_state after reset %v, want %q", got, exp)
	}
}

// A model that ignores the output format is retried after cooldowns until
// MaxAttempts, then the job is failed.
func TestBadOutputFailsAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Cooldown = 200 * time.Millisecond
	s := startServer(t, cfg)

	for attempt := 1; attempt <= cfg.MaxAttempts; attempt++ {
		r := s.evaluate(t, "survey-answers")
		if attempt < cfg.MaxAttempts {
			expect(t, "attempt "+strconv.Itoa(attempt), r, http.StatusTooManyRequests, "cooling_down", "bad_output")
			if exp, got := float64(attempt), r.body["attempts"]; exp != got {
				t.Fatalf("attempts %v, want %v", got, exp)
			}
			s.waitState(t, "survey-answers", "ready", 10*time.Second)
			continue
		}
		expect(t, "last attempt", r, http.StatusUnprocessableEntity, "failed", "bad_output")
	}
	expect(t, "after MaxAttempts", s.evaluate(t, "survey-answers"), http.StatusUnprocessableEntity, "failed", "bad_output")
	if exp, got := int64(cfg.MaxAttempts), s.stats(t).UpstreamCalls; exp != got {
		t.Fatalf("upstream calls %d, want %d", got, exp)
	}
}

// A call longer than the lease keeps the job: the lease is renewed, a
// duplicate is refused as running, and the result arrives.
func TestSlowCallRenewsTheLease(t *testing.T) {
	t.Parallel()
	cfg := testConfig() // Lease 300ms, slow call 1s
	s := startServer(t, cfg)

	done := make(chan reply, 1)
	go func() { done <- s.evaluate(t, "annual-filing") }()
	s.waitState(t, "annual-filing", "running", 10*time.Second)
	running := time.Now()
	// Poll until the first lease would have expired and renewals have
	// kept the job: still held, so the duplicate is refused.
	for deadline := running.Add(cfg.SlowCall); time.Since(running) <= cfg.Lease || s.stats(t).LeaseRenewals < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("lease renewals %d after %v, want ≥ 2 past the first %v lease", s.stats(t).LeaseRenewals, time.Since(running), cfg.Lease)
		}
	}
	dup := s.evaluate(t, "annual-filing")
	expect(t, "duplicate", dup, http.StatusConflict, "running", "")
	if dup.retryAfter(t) < 1 {
		t.Fatalf("duplicate: Retry-After %d, want ≥ 1", dup.retryAfter(t))
	}
	if r := <-done; r.code != http.StatusOK {
		t.Fatalf("slow call: %d %s", r.code, r.raw)
	}
	st := s.stats(t)
	if st.LeaseRenewals < 2 {
		t.Fatalf("lease renewals %d, want ≥ 2 for a %v call on a %v lease", st.LeaseRenewals, cfg.SlowCall, cfg.Lease)
	}
	if exp, got := int64(1), st.UpstreamCalls; exp != got {
		t.Fatalf("upstream calls %d, want %d", got, exp)
	}
}

// A provider-wide 429 pauses every job of the upstream for the provider's
// hint, without calling the model, and the pause ends by itself.
func TestProviderRateLimitPausesEveryJob(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig()) // upstream hint 1.5s

	expect(t, "provider 429", s.evaluate(t, "press-release"), http.StatusTooManyRequests, "cooling_down", "rate_limited")
	up := s.stats(t).Upstream
	if exp, got := "cooling_down", up.State; exp != got {
		t.Fatalf("upstream %q, want %q", got, exp)
	}
	if up.RetryAfterSeconds <= 0 || up.RetryAfterSeconds > 1.5 {
		t.Fatalf("upstream retry_after_seconds %v, want (0, 1.5]", up.RetryAfterSeconds)
	}
	r := s.evaluate(t, "welcome-letter")
	expect(t, "another document", r, http.StatusServiceUnavailable, "upstream_cooling", "rate_limited")
	if got := r.retryAfter(t); got < 1 || got > 2 {
		t.Fatalf("Retry-After %d, want 1..2", got)
	}
	if exp, got := "upstream_cooling", s.status(t, "welcome-letter").body["job_state"]; exp != got {
		t.Fatalf("retry-status %v, want %q", got, exp)
	}
	if exp, got := int64(1), s.stats(t).UpstreamCalls; exp != got {
		t.Fatalf("upstream calls %d, want %d", got, exp)
	}

	s.waitState(t, "welcome-letter", "ready", 10*time.Second)
	if r := s.evaluate(t, "welcome-letter"); r.code != http.StatusOK {
		t.Fatalf("after the pause: %d %s", r.code, r.raw)
	}
}

// With the backup upstream (the demo's default), a provider-wide rate limit
// cools the first upstream, not the job: the next click runs on the
// backup at once and the result says so, while the first upstream counts
// down to its probe. One model call each, never two in one click.
func TestBackupRunsTheJobWhileTheFirstCools(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.Backup = true
	cfg.UpstreamHint = time.Minute
	s := startServer(t, cfg)

	r := s.evaluate(t, "press-release")
	if r.code == http.StatusOK {
		t.Fatalf("provider 429: %d %s, want the click refused", r.code, r.raw)
	}
	if exp, got := int64(1), s.stats(t).UpstreamCalls; exp != got {
		t.Fatalf("upstream calls %d, want %d", got, exp)
	}
	up := s.stats(t).Upstream
	if up.State != "cooling_down" || up.RetryAfterSeconds < 50 {
		t.Fatalf("first upstream %+v, want cooling for its minute", up)
	}
	r = s.evaluate(t, "press-release")
	if r.code != http.StatusOK {
		t.Fatalf("the retry: %d %s, want it done on the backup at once", r.code, r.raw)
	}
	var v documentView
	if err := json.Unmarshal([]byte(r.raw), &v); err != nil {
		t.Fatal(err)
	}
	if v.Result == nil || v.Result.Via != backupUpstream {
		t.Fatalf("result %+v, want one via %q", v.Result, backupUpstream)
	}
	if exp, got := int64(2), s.stats(t).UpstreamCalls; exp != got {
		t.Fatalf("upstream calls %d, want %d", got, exp)
	}
	// Another document runs on the backup too, while the first cools.
	r = s.evaluate(t, "welcome-letter")
	if err := json.Unmarshal([]byte(r.raw), &v); err != nil || r.code != http.StatusOK || v.Result == nil || v.Result.Via != backupUpstream {
		t.Fatalf("another document: %d %s, want it done via the backup", r.code, r.raw)
	}
}

// An empty credit balance (Anthropic's 400 with only a message to say so)
// is the key's problem, not the document's: the upstream pauses, every
// job waits, and the job is not marked failed; once the pause ends the
// next call probes the upstream and, the credits back, runs.
func TestCreditBalancePausesTheUpstream(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig()) // upstream pause 1s

	r := s.evaluate(t, "board-minutes")
	if r.code == http.StatusOK || r.code == http.StatusUnprocessableEntity {
		t.Fatalf("credit balance too low: %d %s, want a refusal that is not a failed job", r.code, r.raw)
	}
	if got := s.status(t, "board-minutes").body["job_state"]; got == "failed" {
		t.Fatal("the job was marked failed for a billing problem")
	}
	up := s.stats(t).Upstream
	if up.State != "paused" || up.Reason != "quota_exhausted" {
		t.Fatalf("upstream %+v, want paused for quota_exhausted", up)
	}
	expect(t, "another document", s.evaluate(t, "welcome-letter"), http.StatusServiceUnavailable, "upstream_cooling", "quota_exhausted")
	if exp, got := int64(1), s.stats(t).UpstreamCalls; exp != got {
		t.Fatalf("upstream calls %d, want %d", got, exp)
	}
	s.waitState(t, "board-minutes", "ready", 10*time.Second)
	if r := s.evaluate(t, "board-minutes"); r.code != http.StatusOK {
		t.Fatalf("after the pause: %d %s", r.code, r.raw)
	}
}

// Concurrent retries of one document make one model call.
func TestConcurrentRetriesMakeOneCall(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig())

	const n = 30
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes <- s.evaluate(t, "supplier-contract").code
		}()
	}
	wg.Wait()
	close(codes)
	count := map[int]int{}
	for c := range codes {
		count[c]++
	}
	st := s.stats(t)
	if exp, got := int64(1), st.UpstreamCalls; exp != got {
		t.Fatalf("upstream calls %d, want %d (statuses %v)", got, exp, count)
	}
	if exp, got := int64(n-1), st.Refused; exp != got {
		t.Fatalf("refused %d, want %d", got, exp)
	}
	if count[http.StatusTooManyRequests]+count[http.StatusConflict] != n {
		t.Fatalf("statuses %v, want only 429 (cooling down) and 409 (running)", count)
	}
}

func TestUnknownDocumentIs404WithoutTouchingTheGate(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig())
	for _, path := range []string{"/documents/nope/evaluate", "/documents/nope/retry-status", "/documents/nope"} {
		method := http.MethodGet
		if strings.HasSuffix(path, "evaluate") {
			method = http.MethodPost
		}
		if r := s.do(t, method, path); r.code != http.StatusNotFound {
			t.Errorf("%s %s: %d, want 404", method, path, r.code)
		}
	}
	if exp, got := int64(0), s.stats(t).UpstreamCalls; exp != got {
		t.Fatalf("upstream calls %d, want %d", got, exp)
	}
}

// No response carries the upstream's error text.
func TestUpstreamTextNeverReachesClients(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig())
	for _, id := range []string{"patient-history", "supplier-contract", "incident-report", "survey-answers"} {
		r := s.evaluate(t, id)
		for _, leak := range []string{"maximum context length", "Rate limit reached", "overloaded, please", "Sure!", "tokens"} {
			if strings.Contains(r.raw, leak) {
				t.Errorf("%s: body leaks upstream text %q: %s", id, leak, r.raw)
			}
		}
	}
}

func TestPageAndStartupBanner(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig())
	r := s.do(t, http.MethodGet, "/")
	if r.code != http.StatusOK || !strings.Contains(r.raw, "Document review") {
		t.Fatalf("page: %d", r.code)
	}
	out := s.out.String()
	for _, want := range []string{"open " + s.base, "embedded Redis", "fake OpenAI-compatible upstream", "curl -i -X POST " + s.base + "/documents/supplier-contract/evaluate"} {
		if !strings.Contains(out, want) {
			t.Errorf("startup output lacks %q:\n%s", want, out)
		}
	}
}

// SIGINT/SIGTERM cancel run's context: a call in flight finishes and its
// result is delivered before run returns.
func TestGracefulShutdownFinishesCallsInFlight(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig())

	done := make(chan reply, 1)
	go func() { done <- s.evaluate(t, "annual-filing") }()
	s.waitState(t, "annual-filing", "running", 10*time.Second)
	if err := s.stop(); err != nil {
		t.Fatalf("run after shutdown: %v", err)
	}
	select {
	case r := <-done:
		if r.code != http.StatusOK {
			t.Fatalf("call in flight during shutdown: %d %s", r.code, r.raw)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("call in flight did not finish")
	}
	if _, err := http.Get(s.base + "/api/stats"); err == nil {
		t.Fatal("server still answers after shutdown")
	}
}

func TestRealRedisURL(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.RedisURL = "redis://127.0.0.1:1/0" // nothing listens on port 1
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := run(ctx, cfg, &syncbuf.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "redis at 127.0.0.1:1") {
		t.Fatalf("run with an unreachable REDIS_URL: %v, want a connection error naming the address", err)
	}
}
