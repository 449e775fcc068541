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
