package classify

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ParseRetryHint reads the server's retry hint from a failed response's
// header, in this order:
//
//  1. retry-after-ms: milliseconds, integer or decimal;
//  2. Retry-After: seconds (integer or decimal) or an HTTP-date, taken
//     relative to the response's Date header when it parses, else to now;
//  3. x-ratelimit-reset-requests and x-ratelimit-reset-tokens: Go durations
//     such as "6m0s", "1s" or "20ms". When both are present the larger
//     wins. The header alone does not say which limit was hit. Only after
//     the later reset is neither limit in the way;
//  4. Anthropic's anthropic-ratelimit-requests-reset, -tokens-reset,
//     -input-tokens-reset and -output-tokens-reset: RFC 3339 times, taken
//     relative to the Date header when it parses, else to now. The latest
//     wins, for the same reason.
//
// A header that is negative, NaN, infinite, overflowing or otherwise garbage
// is skipped. The next one in the order then gets its turn. A date in the
// past yields 0 (retry now). Hints above MaxHint are capped at MaxHint. ok
// is false when no header holds a usable hint.
func ParseRetryHint(h http.Header, now time.Time) (d time.Duration, ok bool) {
	if d, ok := parseRetryAfter(h, now); ok {
		return d, true
	}
	if d, ok := parseRateLimitReset(h, ""); ok {
		return d, true
	}
	return parseAnthropicReset(h, now)
}

// anthropicResets are Anthropic's rate-limit reset headers
// (docs.anthropic.com/en/api/rate-limits, "Response headers").
var anthropicResets = [...]string{
	"Anthropic-Ratelimit-Requests-Reset",
	"Anthropic-Ratelimit-Tokens-Reset",
	"Anthropic-Ratelimit-Input-Tokens-Reset",
	"Anthropic-Ratelimit-Output-Tokens-Reset",
}

// parseAnthropicReset reads the latest of Anthropic's reset times, as a
// wait from the response's Date (else now). Like x-ratelimit-reset-*, they
// say when a limit refills. That answers only a rate-limit failure. A
// gateway that strips retry-after leaves them the only hint.
func parseAnthropicReset(h http.Header, now time.Time) (time.Duration, bool) {
	var (
		latest time.Time
		found  bool
	)
	for _, k := range anthropicResets {
		at, err := time.Parse(time.RFC3339, strings.TrimSpace(h.Get(k)))
		if err != nil {
			continue
		}
		if !found || at.After(latest) {
			latest, found = at, true
		}
	}
	if !found {
		return 0, false
	}
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		now = date
	}
	return clampHint(latest.Sub(now)), true
}

// parseRetryAfter reads the explicit hints (retry-after-ms, Retry-After).
// OpenAI sends the rate-limit reset headers on every response. These are
// an instruction about this failure instead. So they apply to any
// transient verdict.
func parseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if ms, ok := parseDecimal(h.Get("Retry-After-Ms")); ok {
		return secondsToHint(ms / 1000), true
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, ok := parseDecimal(v); ok {
		return secondsToHint(s), true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		now = date
	}
	return clampHint(at.Sub(now)), true
}

// parseRateLimitReset reads the x-ratelimit-reset-* headers. which is
// OpenAI's error type for a 429 ("requests" or "tokens"). It selects the
// matching header. Any other value takes the larger of the two.
func parseRateLimitReset(h http.Header, which string) (time.Duration, bool) {
	req, reqOK := parseReset(h.Get("X-Ratelimit-Reset-Requests"))
	tok, tokOK := parseReset(h.Get("X-Ratelimit-Reset-Tokens"))
	switch {
	case which == "requests" && reqOK:
		return req, true
	case which == "tokens" && tokOK:
		return tok, true
	case reqOK && tokOK:
		return max(req, tok), true
	case reqOK:
		return req, true
	case tokOK:
		return tok, true
	}
	return 0, false
}

func parseReset(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, false
	}
	return clampHint(d), true
}

// parseDecimal accepts only plain non-negative decimals ("3", "1.5"). It
// refuses the signs, exponents, hex, "Inf" or "NaN" strconv.ParseFloat
// would take.
func parseDecimal(v string) (float64, bool) {
	v = strings.TrimSpace(v)
	if v == "" || v == "." {
		return 0, false
	}
	dot := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '.' && !dot:
			dot = true
		case c < '0' || c > '9':
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil && f != math.Inf(1) { // a huge number is still a hint: cap it
		return 0, false
	}
	return f, true
}

func secondsToHint(s float64) time.Duration {
	if s >= MaxHint.Seconds() {
		return MaxHint
	}
	return time.Duration(s * float64(time.Second))
}
