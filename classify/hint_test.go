package classify_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
)

func TestParseRetryHint(t *testing.T) {
	now := time.Date(2006, 1, 2, 15, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		exp    time.Duration
		expOK  bool
	}{
		{"none", nil, 0, false},
		{"retry-after-ms", h("retry-after-ms", "2500"), 2500 * time.Millisecond, true},
		{"retry-after-ms decimal", h("retry-after-ms", "12.5"), 12500 * time.Microsecond, true},
		{"retry-after-ms wins over Retry-After", h("retry-after-ms", "100", "Retry-After", "9"), 100 * time.Millisecond, true},
		{"Retry-After integer", h("Retry-After", "3"), 3 * time.Second, true},
		{"Retry-After float", h("Retry-After", " 1.25 "), 1250 * time.Millisecond, true},
		{"Retry-After zero", h("Retry-After", "0"), 0, true},
		{"Retry-After date relative to Date", h("Date", fixedDate, "Retry-After", "Mon, 02 Jan 2006 15:05:05 GMT"), time.Minute, true},
		{"Retry-After date relative to now", h("Retry-After", "Mon, 02 Jan 2006 15:04:15 GMT"), 10 * time.Second, true},
		{"Retry-After date with garbage Date", h("Date", "soon", "Retry-After", "Mon, 02 Jan 2006 15:04:15 GMT"), 10 * time.Second, true},
		{"Retry-After RFC 850 date", h("Retry-After", "Monday, 02-Jan-06 15:04:25 GMT"), 20 * time.Second, true},
		{"Retry-After date in the past", h("Retry-After", "Mon, 02 Jan 2006 15:00:00 GMT"), 0, true},
		{"Retry-After date years ahead is capped", h("Retry-After", "Fri, 02 Jan 2099 15:04:05 GMT"), classify.MaxHint, true},
		{"seconds above MaxHint are capped", h("Retry-After", "86401"), classify.MaxHint, true},
		{"huge number is capped", h("retry-after-ms", "1"+strings.Repeat("0", 400)), classify.MaxHint, true},
		{"reset requests", h("x-ratelimit-reset-requests", "20ms"), 20 * time.Millisecond, true},
		{"reset tokens", h("x-ratelimit-reset-tokens", "6m0s"), 6 * time.Minute, true},
		{"both resets: the larger", h("x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"), 6 * time.Minute, true},
		{"Retry-After wins over resets", h("Retry-After", "2", "x-ratelimit-reset-tokens", "6m0s"), 2 * time.Second, true},
		{"reset zero: the limit already refilled", h("x-ratelimit-reset-tokens", "0s"), 0, true},
		{"reset fractional", h("x-ratelimit-reset-tokens", "7.66s"), 7660 * time.Millisecond, true},
		{"reset above MaxHint is capped", h("x-ratelimit-reset-tokens", "48h"), classify.MaxHint, true},
		// Anthropic's reset headers: RFC 3339 times
		// (https://docs.anthropic.com/en/api/rate-limits#response-headers).
		{"anthropic requests reset, from now", h("anthropic-ratelimit-requests-reset", "2006-01-02T15:04:35Z"), 30 * time.Second, true},
		{"anthropic reset from Date", h("Date", fixedDate, "anthropic-ratelimit-tokens-reset", "2006-01-02T15:04:50Z"), 45 * time.Second, true},
		{"anthropic resets: the latest", h("anthropic-ratelimit-requests-reset", "2006-01-02T15:04:15Z", "anthropic-ratelimit-output-tokens-reset", "2006-01-02T15:05:05Z",
			"anthropic-ratelimit-input-tokens-reset", "2006-01-02T15:04:25Z"), time.Minute, true},
		{"anthropic reset in the past", h("anthropic-ratelimit-requests-reset", "2006-01-02T15:00:00Z"), 0, true},
		{"anthropic reset years ahead is capped", h("anthropic-ratelimit-requests-reset", "2099-01-02T15:04:05Z"), classify.MaxHint, true},
		{"anthropic reset with an offset", h("anthropic-ratelimit-requests-reset", "2006-01-02T16:04:15+01:00"), 10 * time.Second, true},
		{"Retry-After wins over anthropic resets", h("Retry-After", "2", "anthropic-ratelimit-requests-reset", "2006-01-02T15:05:05Z"), 2 * time.Second, true},
		{"x-ratelimit resets win over anthropic resets", h("x-ratelimit-reset-tokens", "3s", "anthropic-ratelimit-requests-reset", "2006-01-02T15:05:05Z"), 3 * time.Second, true},
		{"garbage anthropic reset", h("anthropic-ratelimit-requests-reset", "in a minute"), 0, false},
		{"garbage anthropic reset, good one", h("anthropic-ratelimit-requests-reset", "soon", "anthropic-ratelimit-tokens-reset", "2006-01-02T15:04:15Z"), 10 * time.Second, true},

		// Garbage is skipped and the next header gets its turn.
		{"negative ms falls through", h("retry-after-ms", "-5", "Retry-After", "4"), 4 * time.Second, true},
		{"NaN", h("retry-after-ms", "NaN"), 0, false},
		{"Inf", h("Retry-After", "Inf"), 0, false},
		{"+Inf", h("Retry-After", "+Inf"), 0, false},
		{"negative seconds", h("Retry-After", "-1"), 0, false},
		{"exponent", h("Retry-After", "1e3"), 0, false},
		{"hex", h("Retry-After", "0x10"), 0, false},
		{"two dots", h("Retry-After", "1.2.3"), 0, false},
		{"lone dot", h("Retry-After", "."), 0, false},
		{"text", h("Retry-After", "later"), 0, false},
		{"negative reset", h("x-ratelimit-reset-tokens", "-1s"), 0, false},
		{"overflowing reset", h("x-ratelimit-reset-tokens", "9999999999999999999h"), 0, false},
		{"garbage reset, good reset", h("x-ratelimit-reset-requests", "soon", "x-ratelimit-reset-tokens", "2s"), 2 * time.Second, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hd := http.Header{}
			for k, v := range tc.header {
				hd.Set(k, v)
			}
			got, gotOK := classify.ParseRetryHint(hd, now)
			if exp := tc.exp; exp != got || tc.expOK != gotOK {
				t.Errorf("ParseRetryHint(%v): exp %v %v, got %v %v", tc.header, exp, tc.expOK, got, gotOK)
			}
		})
	}
}

// TestAnthropicResetHint: an Anthropic 429 that reaches the client
// without retry-after (a gateway stripped it) still waits until the limit
// refills, read from the anthropic-ratelimit-*-reset headers Transport
// keeps; an overload is not a rate limit and takes no reset as its hint.
// Bodies and headers as https://docs.anthropic.com/en/api/errors and
// https://docs.anthropic.com/en/api/rate-limits#response-headers give them.
func TestAnthropicResetHint(t *testing.T) {
	reset := time.Now().Add(40 * time.Second).UTC().Format(time.RFC3339)
	tests := []struct {
		name   string
		status int
		body   string
		exp    classify.Verdict
	}{
		{"rate limit", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed your account's rate limit. Please try again later."}}`,
			transient(classify.ReasonRateLimited, true, 40*time.Second)},
		{"overloaded", 529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			transient(classify.ReasonOverloaded, true, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
				reply{status: tc.status, header: map[string]string{"anthropic-ratelimit-requests-reset": reset}, body: tc.body}.write(w)
			})
			err := callChat(t, newClient(t, srv.URL+"/v1", srv.Client(), false))
			got := classify.Default(err)
			// The reset is whole seconds from now: allow the second it
			// was rounded down to.
			if d := tc.exp.RetryAfter - got.RetryAfter; d >= 0 && d <= time.Second {
				got.RetryAfter = tc.exp.RetryAfter
			}
			assertVerdict(t, tc.exp, got, err)
		})
	}
}
