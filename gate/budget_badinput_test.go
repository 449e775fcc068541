package gate_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// observe runs a call of job through g whose response said h: whatever
// ParseBudget makes of it is told to the lease (nothing, when it reads no
// limit).
func observe(t *testing.T, g *gate.Gate, job string, h http.Header) {
	t.Helper()
	err := g.Do(context.Background(), job, func(_ context.Context, l *gate.Lease) error {
		if b, ok := classify.ParseBudget(h, time.Now()); ok {
			l.ObserveBudget(b)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Do(%q): %v", job, err)
	}
}

// inFlight acquires job on g, for a call whose response comes later
// (settled by answer).
func inFlight(t *testing.T, g *gate.Gate, job string) *gate.Lease {
	t.Helper()
	l, err := g.Acquire(context.Background(), job)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", job, err)
	}
	return l
}

// answer settles l's call, whose response said h.
func answer(t *testing.T, l *gate.Lease, h http.Header) {
	t.Helper()
	if b, ok := classify.ParseBudget(h, time.Now()); ok {
		l.ObserveBudget(b)
	}
	if err := l.Succeed(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// header is a response header with the fields given, written out.
func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// Bad rate-limit headers (issue 37, Must show): after a reading that says
// the requests limit is spent (0 of 600, whole in a minute), a response
// whose headers contradict it, are garbage, negative or too large to be a
// count never lets a call through that the spent limit refuses; and no
// header makes a caller wait past classify.MaxHint.
func TestBudgetBadHeaders(t *testing.T) {
	spent := openAIHeader(0, 600, "1m0s")
	tokensSpent := header("x-ratelimit-limit-tokens", "12000", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "1m0s")
	for _, tc := range []struct {
		name  string
		bad   http.Header
		spent http.Header // nil: the requests limit's
	}{
		{name: "tokens: remaining above the limit", spent: tokensSpent,
			bad: header("x-ratelimit-limit-tokens", "12000", "x-ratelimit-remaining-tokens", "90000", "x-ratelimit-reset-tokens", "1s")},
		{name: "tokens: a negative reset", spent: tokensSpent,
			bad: header("x-ratelimit-limit-tokens", "12000", "x-ratelimit-remaining-tokens", "11000", "x-ratelimit-reset-tokens", "-5s")},
		// More left than the limit's size: no bucket holds that.
		{name: "remaining above the limit", bad: header("x-ratelimit-limit-requests", "600", "x-ratelimit-remaining-requests", "5000", "x-ratelimit-reset-requests", "1s")},
		{name: "garbage counts", bad: header("x-ratelimit-limit-requests", "six hundred", "x-ratelimit-remaining-requests", "lots", "x-ratelimit-reset-requests", "soon")},
		// Azure OpenAI sends -1 when it does not know (classify.ParseBudget's doc).
		{name: "negative remaining", bad: header("x-ratelimit-limit-requests", "600", "x-ratelimit-remaining-requests", "-1", "x-ratelimit-reset-requests", "1s")},
		{name: "counts past int64", bad: header("x-ratelimit-limit-requests", "99999999999999999999999", "x-ratelimit-remaining-requests", "99999999999999999999999", "x-ratelimit-reset-requests", "1s")},
		{name: "a negative reset", bad: header("x-ratelimit-limit-requests", "600", "x-ratelimit-remaining-requests", "599", "x-ratelimit-reset-requests", "-5s")},
		{name: "a control byte", bad: header("x-ratelimit-limit-requests", "600", "x-ratelimit-remaining-requests", "59\x009", "x-ratelimit-reset-requests", "1s")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, tg := range redistest.Targets(t) {
				t.Run(tg.Name, func(t *testing.T) {
					g := newGate(t, tg.Client, budgetOptions(t))
					knownUpstream(t, g)        // calls beside one in flight: not one at a time
					l := inFlight(t, g, "bad") // its answer comes after the spent one
					if tc.spent != nil {
						observe(t, g, "spent", tc.spent)
					} else {
						observe(t, g, "spent", spent)
					}
					answer(t, l, tc.bad)
					bl := blocked(t, g, "next")
					if !errors.Is(bl, gate.ErrUpstreamCooling) || !bl.Upstreams[0].Budget.Spent {
						t.Fatalf("after %v: %+v, want the spent limit to refuse the call", tc.bad, bl)
					}
					// Two requests' refill at 600 a minute (about 203 ms), or
					// 120 tokens' (1 %) at 12,000 (about 610 ms).
					if bl.RetryAfter <= 0 || bl.RetryAfter > time.Second {
						t.Fatalf("refused for %v, want the refill of what the spent limit lacks, under a second", bl.RetryAfter)
					}
				})
			}
		})
	}
}

// Resets far away, in every form classify reads (a Go duration, seconds,
// Unix seconds and milliseconds, an RFC 3339 instant, Retry-After), never
// make a caller wait past classify.MaxHint.
func TestBudgetHugeResetsStopAtMaxHint(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.Header
	}{
		{"a duration of 11 years", openAIHeader(0, 600, "99999h")},
		{"seconds", openAIHeader(0, 600, "999999999")},
		{"Unix seconds in 2286", openAIHeader(0, 600, "9999999999")},
		{"Unix milliseconds in 2286", openAIHeader(0, 600, "9999999999999")},
		{"an instant in 9999", header("anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "0",
			"anthropic-ratelimit-requests-reset", "9999-12-31T23:59:59Z")},
		{"tokens whole in 11 years", header("x-ratelimit-limit-tokens", "12000", "x-ratelimit-remaining-tokens", "0", "x-ratelimit-reset-tokens", "99999h")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rdb := redistest.Miniredis(t)
			g := newGate(t, rdb, budgetOptions(t))
			observe(t, g, "first", tc.h)
			for i := range 3 {
				bl := blocked(t, g, "waiting-"+itoa(i))
				if !bl.Upstreams[0].Budget.Spent || bl.RetryAfter <= 0 || bl.RetryAfter > classify.MaxHint {
					t.Fatalf("caller %d after %v: %+v (retry after %v), want a budget refusal within MaxHint (%v)", i, tc.h, bl, bl.RetryAfter, classify.MaxHint)
				}
			}
		})
	}
}

// A provider whose dialect changes midway is followed: OpenAI's headers
// then Anthropic's (a proxy that now routes to Claude), each judged as it
// says; and headers then none: the last reading holds until its reset,
// then the limit is whole and calls go again.
func TestBudgetFollowsADialectSwitch(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			g := newGate(t, tg.Client, budgetOptions(t))
			observe(t, g, "openai", openAIHeader(59, 60, "1s"))
			if err := g.Do(ctx, "plenty", okFn); err != nil {
				t.Fatalf("OpenAI said 59 of 60 left: %v, want the call to run", err)
			}
			// https://docs.anthropic.com/en/api/rate-limits#response-headers
			observe(t, g, "anthropic", header("anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "0",
				"anthropic-ratelimit-requests-reset", time.Now().Add(time.Minute).UTC().Format(time.RFC3339)))
			if bl := blocked(t, g, "spent"); !bl.Upstreams[0].Budget.Spent {
				t.Fatalf("Anthropic said 0 of 50 left: %+v, want a budget refusal", bl)
			}

			// Headers, then none: a spent limit whole in 3 s (long beside
			// the steps between, on a loaded machine).
			h := newGate(t, tg.Client, budgetOptions(t))
			knownUpstream(t, h) // calls beside one in flight: not one at a time
			l := inFlight(t, h, "silent")
			observe(t, h, "spent", openAIHeader(0, 60, "3s"))
			answer(t, l, http.Header{"Content-Type": {"application/json"}})
			if bl := blocked(t, h, "during"); !bl.Upstreams[0].Budget.Spent {
				t.Fatalf("a response with no headers after a spent limit: %+v, want the limit still spent", bl)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				pass(tg, 100*time.Millisecond)
				err := h.Do(ctx, "after", okFn)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("30 s after a limit whole in 3 s, with no headers since: %v, want the call to run", err)
				}
			}
		})
	}
}
