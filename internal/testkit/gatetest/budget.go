package gatetest

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

// OpenAIRequests is a response's rate-limit headers in the form OpenAI
// documents them (https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers:
// x-ratelimit-limit-requests 60, x-ratelimit-remaining-requests 59,
// x-ratelimit-reset-requests 1s, "the time until the rate limit (based on
// requests) resets to its initial state"), for the requests limit; the
// counts are the test's.
func OpenAIRequests(remaining, limit int, reset string) http.Header {
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", strconv.Itoa(limit))
	h.Set("x-ratelimit-remaining-requests", strconv.Itoa(remaining))
	h.Set("x-ratelimit-reset-requests", reset)
	return h
}

// Report runs a call of job through g whose response said h, read as
// classify.ParseBudget reads it and told to the lease. It fails t if h
// holds no budget or the call does not settle.
func Report(t testing.TB, g *gate.Gate, job string, h http.Header) {
	t.Helper()
	err := g.Do(context.Background(), job, func(_ context.Context, l *gate.Lease) error {
		b, ok := classify.ParseBudget(h, time.Now())
		if !ok {
			t.Fatalf("no budget in %v", h)
		}
		l.ObserveBudget(b)
		return nil
	})
	if err != nil {
		t.Fatalf("Do(%q): %v", job, err)
	}
}

// Hold acquires each of jobs through g, and releases them when t ends.
func Hold(t testing.TB, g *gate.Gate, jobs ...string) []*gate.Lease {
	t.Helper()
	leases := make([]*gate.Lease, 0, len(jobs))
	for _, job := range jobs {
		l, err := g.Acquire(context.Background(), job)
		if err != nil {
			t.Fatalf("Acquire(%q): %v", job, err)
		}
		t.Cleanup(func() { _ = l.Release(context.Background()) })
		leases = append(leases, l)
	}
	return leases
}
