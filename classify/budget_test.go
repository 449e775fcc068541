package classify_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
)

// budgetNow is the local clock of the budget tests.
var budgetNow = time.Date(2026, 4, 21, 14, 38, 7, 0, time.UTC)

// quota builds an expected Quota; reset is after budgetNow, 0 for none.
func quota(remaining, limit int64, reset time.Duration) classify.Quota {
	q := classify.Quota{Reported: true, Remaining: remaining, Limit: limit}
	if reset != 0 {
		q.Reset = budgetNow.Add(reset)
	}
	return q
}

// header builds an http.Header with canonical keys, as net/http delivers it.
func header(kv ...string) http.Header {
	h := make(http.Header, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// The expectations come from what each source says the header means, never
// from ParseBudget.
var budgetCases = []struct {
	name, source     string
	header           http.Header
	requests, tokens classify.Quota
	ok               bool
}{
	{
		name:   "OpenAI's documented example",
		source: "https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers (\"x-ratelimit-reset-requests 1s: the time until the rate limit (based on requests) resets to its initial state\")",
		header: header(
			"x-ratelimit-limit-requests", "60", "x-ratelimit-limit-tokens", "150000",
			"x-ratelimit-remaining-requests", "59", "x-ratelimit-remaining-tokens", "149984",
			"x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"),
		requests: quota(59, 60, time.Second+time.Second), // stated to the second: one more
		tokens:   quota(149984, 150000, 6*time.Minute+time.Second),
		ok:       true,
	},
	{
		name:   "OpenAI millisecond resets, with the usage-based variant beside them",
		source: "https://community.openai.com/t/how-to-get-rate-limit-reset-time-for-response-api/1268905",
		header: header(
			"x-ratelimit-limit-requests", "5000", "x-ratelimit-limit-tokens", "160000",
			"x-ratelimit-limit-tokens_usage_based", "160000",
			"x-ratelimit-remaining-requests", "4999", "x-ratelimit-remaining-tokens", "159976",
			"x-ratelimit-remaining-tokens_usage_based", "159976",
			"x-ratelimit-reset-requests", "12ms", "x-ratelimit-reset-tokens", "9ms",
			"x-ratelimit-reset-tokens_usage_based", "9ms"),
		requests: quota(4999, 5000, 13*time.Millisecond), // stated to the millisecond: one more
		tokens:   quota(159976, 160000, 10*time.Millisecond),
		ok:       true,
	},
	{
		name:   "Groq's documented example: requests per day, tokens per minute",
		source: "https://console.groq.com/docs/rate-limits (Handling Rate Limits: the example headers)",
		header: header(
			"retry-after", "2",
			"x-ratelimit-limit-requests", "14400", "x-ratelimit-limit-tokens", "18000",
			"x-ratelimit-remaining-requests", "14370", "x-ratelimit-remaining-tokens", "17997",
			"x-ratelimit-reset-requests", "2m59.56s", "x-ratelimit-reset-tokens", "7.66s"),
		requests: quota(14370, 14400, 2*time.Minute+59570*time.Millisecond), // stated to 10 ms: 10 ms more
		tokens:   quota(17997, 18000, 7670*time.Millisecond),
		ok:       true,
	},
	{
		name:   "Azure OpenAI: remaining and limits, no reset",
		source: "https://github.com/microsoft/copilot-camp/issues/551 (headers the reporter captured on a 429)",
		header: header(
			"date", "Thu, 03 Apr 2025 14:12:23 GMT",
			"x-ratelimit-limit-requests", "8", "x-ratelimit-limit-tokens", "8000",
			"x-ratelimit-remaining-requests", "7", "x-ratelimit-remaining-tokens", "1014"),
		requests: quota(7, 8, 0),
		tokens:   quota(1014, 8000, 0),
		ok:       true,
	},
	{
		name:   "Azure OpenAI's -1 for a limit it does not know is no budget",
		source: "https://github.com/openai/openai-dotnet/issues/838 ([x-ratelimit-limit-tokens, -1], [x-ratelimit-remaining-tokens, -1], [x-ratelimit-reset-tokens, 0])",
		header: header("x-ratelimit-limit-tokens", "-1", "x-ratelimit-remaining-tokens", "-1", "x-ratelimit-reset-tokens", "0"),
	},
	{
		name:   "Cerebras' documented example: seconds with a fraction",
		source: "https://inference-docs.cerebras.ai/support/rate-limits (\"x-ratelimit-reset-requests-day: Time (in seconds) until your daily request limit resets\")",
		header: header(
			"x-ratelimit-limit-requests-day", "1000000000", "x-ratelimit-limit-tokens-minute", "1000000000",
			"x-ratelimit-remaining-requests-day", "999997455", "x-ratelimit-remaining-tokens-minute", "999998298",
			"x-ratelimit-reset-requests-day", "33011.382867097855", "x-ratelimit-reset-tokens-minute", "11.382867097854614"),
		requests: quota(999997455, 1000000000, 33011*time.Second+382867098*time.Nanosecond),
		tokens:   quota(999998298, 1000000000, 11*time.Second+382867098*time.Nanosecond),
		ok:       true,
	},
	{
		name:   "Fireworks: requests, and prompt and generated tokens; the tighter token limit is kept",
		source: "https://docs.fireworks.ai/guides/quotas_usage/rate-limits (x-ratelimit-limit-requests, x-ratelimit-limit-tokens-prompt, x-ratelimit-limit-tokens-generated and their remaining counterparts; example starting limits 60 RPM, 60000 prompt and 6000 generated TPM)",
		header: header(
			"x-ratelimit-limit-requests", "60", "x-ratelimit-remaining-requests", "59",
			"x-ratelimit-limit-tokens-prompt", "60000", "x-ratelimit-remaining-tokens-prompt", "59000",
			"x-ratelimit-limit-tokens-generated", "6000", "x-ratelimit-remaining-tokens-generated", "5800",
			"x-ratelimit-over-limit", "no"),
		requests: quota(59, 60, 0),
		tokens:   quota(5800, 6000, 0),
		ok:       true,
	},
	{
		name:   "Together: requests with a reset in seconds, tokens without",
		source: "https://support.together.ai/en/articles/8988956-rate-limits (x-ratelimit-limit, x-ratelimit-remaining, x-ratelimit-reset: \"the time until the rate limit (based on requests) resets\"); https://docs.together.ai/docs/rate-limits (x-tokenlimit-*). Values illustrative.",
		header: header(
			"x-ratelimit-limit", "10", "x-ratelimit-remaining", "9", "x-ratelimit-reset", "1",
			"x-tokenlimit-limit", "20000", "x-tokenlimit-remaining", "19000"),
		requests: quota(9, 10, 2*time.Second), // "1", to the second
		tokens:   quota(19000, 20000, 0),
		ok:       true,
	},
	{
		name:   "OpenRouter: the reset is Unix time in milliseconds",
		source: "https://openrouter.ai/docs/api-reference/limits (X-RateLimit-Limit, -Remaining and -Reset, the reset a Unix timestamp in milliseconds, as OpenRouter reports them in a 429's error.metadata.headers; read here as response headers)",
		header: header(
			"Date", "Tue, 21 Apr 2026 14:38:07 GMT",
			"X-RateLimit-Limit", "20", "X-RateLimit-Remaining", "0",
			"X-RateLimit-Reset", "1776782297000"), // 14:38:17 UTC
		requests: quota(0, 20, 10*time.Second+time.Millisecond),
		ok:       true,
	},
	{
		name:   "Mistral: tokens by size, reset in seconds",
		source: "https://github.com/prism-php/prism (tests: Mistral rate limits ratelimitbysize-limit 500000, -remaining 499900, -reset 28); https://github.com/tidyverse/ellmer (ProviderMistral retries after ratelimitbysize-reset seconds)",
		header: header("ratelimitbysize-limit", "500000", "ratelimitbysize-remaining", "499900", "ratelimitbysize-reset", "28"),
		tokens: quota(499900, 500000, 29*time.Second),
		ok:     true,
	},
	{
		name:   "Anthropic: an RFC 3339 reset is read against the response's Date, not the local clock",
		source: "Anthropic's Compliance API error reference, 429 example (platform.claude.com/docs/id/manage-claude, \"anthropic-ratelimit-requests-reset is an RFC 3339 timestamp\"): date 14:38:02, reset 14:38:25; the local clock here runs 5 s ahead",
		header: header(
			"date", "Tue, 21 Apr 2026 14:38:02 GMT", "retry-after", "25",
			"anthropic-ratelimit-requests-limit", "600", "anthropic-ratelimit-requests-remaining", "0",
			"anthropic-ratelimit-requests-reset", "2026-04-21T14:38:25Z"),
		requests: quota(0, 600, 24*time.Second), // to the second: one more
		ok:       true,
	},
	{
		name:   "Anthropic: of tokens, input and output tokens the one with fewest left is kept",
		source: "https://docs.anthropic.com/en/api/rate-limits#response-headers (anthropic-ratelimit-{tokens,input-tokens,output-tokens}-{limit,remaining,reset}; tokens-*: the most restrictive limit currently in effect). Values illustrative.",
		header: header(
			"date", "Tue, 21 Apr 2026 14:38:07 GMT",
			"anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "49",
			"anthropic-ratelimit-requests-reset", "2026-04-21T14:38:08Z",
			"anthropic-ratelimit-tokens-limit", "48000", "anthropic-ratelimit-tokens-remaining", "7000",
			"anthropic-ratelimit-tokens-reset", "2026-04-21T14:38:20Z",
			"anthropic-ratelimit-input-tokens-limit", "40000", "anthropic-ratelimit-input-tokens-remaining", "39000",
			"anthropic-ratelimit-input-tokens-reset", "2026-04-21T14:38:09Z",
			"anthropic-ratelimit-output-tokens-limit", "8000", "anthropic-ratelimit-output-tokens-remaining", "7000",
			"anthropic-ratelimit-output-tokens-reset", "2026-04-21T14:38:15Z"),
		requests: quota(49, 50, 2*time.Second),
		tokens:   quota(7000, 48000, 14*time.Second), // a tie at 7000: the later reset wins
		ok:       true,
	},
	{
		name:     "IETF RateLimit with the policy's quota",
		source:   "https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/10/ (3.2: RateLimit-Policy: \"default\";q=100;w=10; 4.2: RateLimit: \"default\";r=50;t=30)",
		header:   header("RateLimit-Policy", `"default";q=100;w=10`, "RateLimit", `"default";r=50;t=30`),
		requests: quota(50, 100, 31*time.Second), // t is delta-seconds: one more
		ok:       true,
	},
	{
		name:     "IETF RateLimit with a partition key and no reset",
		source:   "https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/10/ (4.2: RateLimit: \"default\";r=999;pk=:dHJpYWwxMjEzMjM=:)",
		header:   header("RateLimit", `"default";r=999;pk=:dHJpYWwxMjEzMjM=:`),
		requests: quota(999, 0, 0),
		ok:       true,
	},
	{
		name:   "IETF: two policies split over two fields, the tighter kept",
		source: "https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/10/ (3: lists can be split over multiple fields; 3.2: \"permin\";q=50;w=60,\"perhr\";q=1000;w=3600)",
		header: header(
			"RateLimit-Policy", `"permin";q=50;w=60`, "RateLimit-Policy", `"perhr";q=1000;w=3600`,
			"RateLimit", `"permin";r=20;t=40, "perhr";r=12;t=1800`),
		requests: quota(12, 1000, 30*time.Minute+time.Second),
		ok:       true,
	},
	{
		name:   "IETF: a policy counted in content bytes is not a request limit",
		source: "https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/10/ (3.2: \"peruser\";q=65535;qu=\"content-bytes\";w=10)",
		header: header("RateLimit-Policy", `"peruser";q=65535;qu="content-bytes";w=10;pk=:sdfjLJUOUH==:`, "RateLimit", `"peruser";r=300;t=10`),
	},
	{
		name:     "IETF: parameters it does not define are ignored, a boolean one too",
		source:   "https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/10/ (4: unknown parameters MUST be ignored); RFC 8941 3.1.2: a key is lcalpha or *, then lcalpha, digits, _ - . *; a parameter without a value is Boolean true",
		header:   header("RateLimit", `"default";r=50;t=30;za.b-09_*=1;x`),
		requests: quota(50, 0, 31*time.Second),
		ok:       true,
	},
	{
		name:   "IETF: a parameter without a key makes the field malformed",
		source: "RFC 8941 4.2.3.2: parsing a key fails unless it starts with lcalpha or *",
		header: header("RateLimit", `"default";r=50;t=30;`),
	},
	{
		name:     "IETF: a policy name with escapes",
		source:   "RFC 8941 3.3.3: a string escapes \" and \\ with a backslash",
		header:   header("RateLimit", `"de\"fa\\ult";r=50;t=30`),
		requests: quota(50, 0, 31*time.Second),
		ok:       true,
	},
	{
		name:   "IETF: a string ending in a backslash makes the field malformed",
		source: "RFC 8941 4.2.5: parsing fails when a backslash is the last character",
		header: header("RateLimit", `"default\`),
	},
	{
		name:   "IETF: a string without its closing quote makes the field malformed",
		source: "RFC 8941 4.2.5: parsing a string fails at the end of input",
		header: header("RateLimit", `"default`),
	},
	{
		name:   "IETF: a malformed field is ignored",
		source: "https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/10/ (7: \"Malformed RateLimit header fields MUST be ignored\"); the dictionary form of draft 07",
		header: header("RateLimit", `limit=100, remaining=50, reset=5`),
	},
	{name: "no rate-limit header at all", source: "a 200 from a server without limits", header: header("content-type", "application/json")},
}

func TestParseBudget(t *testing.T) {
	for _, tc := range budgetCases {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := classify.ParseBudget(tc.header, budgetNow)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v (%s)", ok, tc.ok, tc.source)
			}
			exp := classify.Budget{At: budgetNow, Requests: tc.requests, Tokens: tc.tokens}
			if !b.At.Equal(exp.At) || !sameQuota(b.Requests, exp.Requests) || !sameQuota(b.Tokens, exp.Tokens) || b.RetryIn != 0 {
				t.Fatalf("got %+v\nwant %+v\nsource: %s", b, exp, tc.source)
			}
		})
	}
}

func sameQuota(a, b classify.Quota) bool {
	return a.Reported == b.Reported && a.Remaining == b.Remaining && a.Limit == b.Limit && a.Reset.Equal(b.Reset)
}

func TestParseBudgetResetForms(t *testing.T) {
	date := "Tue, 21 Apr 2026 14:38:07 GMT" // budgetNow on the server's clock
	for _, tc := range []struct {
		name, reset, date string
		exp               time.Duration // after budgetNow; -1 for none
	}{
		// Each is rounded up by the resolution it is stated in: the last
		// digit's unit (a second for whole seconds, as Anthropic's RFC 3339
		// resets are, https://docs.anthropic.com/en/api/rate-limits#response-headers,
		// and OpenAI's "1s" and "6m0s",
		// https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers).
		{"Go duration", "1m30s", "", 91 * time.Second},
		{"Go duration in milliseconds", "85ms", "", 86 * time.Millisecond},
		{"Go duration with a fraction", "2m59.56s", "", 2*time.Minute + 59570*time.Millisecond},
		{"Go duration with a fraction of its largest unit", "1.5m", "", 96 * time.Second},
		{"Go duration in microseconds", "850µs", "", 851 * time.Microsecond},
		{"seconds", "7", "", 8 * time.Second},
		{"fractional seconds", "0.25", "", 260 * time.Millisecond},
		{"fractional seconds without a leading zero", ".5", "", 600 * time.Millisecond},
		{"Unix seconds against Date", "1776782347", date, 61 * time.Second},
		{"Unix milliseconds against Date", "1776782287500", date, 501 * time.Millisecond},
		{"fractional Unix seconds against Date", "1776782287.5", date, 600 * time.Millisecond},
		{"Unix milliseconds beyond any clock are MaxHint", "99999999999999999999", date, classify.MaxHint},
		{"RFC 3339 against the local clock without Date", "2026-04-21T14:38:10Z", "", 4 * time.Second},
		{"RFC 3339 with an offset", "2026-04-21T16:38:10+02:00", date, 4 * time.Second},
		{"RFC 3339 with milliseconds", "2026-04-21T14:38:10.250Z", date, 3251 * time.Millisecond},
		{"an instant in the past is now", "2026-04-21T14:00:00Z", date, 0},
		{"the second of the Date is now, to the second", "2026-04-21T14:38:07Z", date, time.Second},
		{"beyond MaxHint is MaxHint", "100h", "", classify.MaxHint},
		{"a duration that overflows is no reset", "9000000h", "", -1},
		{"seconds beyond MaxHint", "999999999", "", classify.MaxHint},
		{"a zero duration is within a second", "0s", "", time.Second},
		{"a negative duration is no reset", "-1s", "", -1},
		{"words are no reset", "soon", "", -1},
		{"a garbage Date falls back to the local clock", "2026-04-21T14:38:10Z", "yesterday", 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := header("x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", tc.reset)
			if tc.date != "" {
				h.Set("Date", tc.date)
			}
			b, ok := classify.ParseBudget(h, budgetNow)
			if !ok || !b.Requests.Reported {
				t.Fatalf("want the remaining count reported whatever the reset, got %+v", b)
			}
			if tc.exp < 0 {
				if !b.Requests.Reset.IsZero() {
					t.Fatalf("want no reset, got %v", b.Requests.Reset)
				}
				return
			}
			if exp, got := budgetNow.Add(tc.exp), b.Requests.Reset; !got.Equal(exp) {
				t.Fatalf("reset %v, want %v", got, exp)
			}
		})
	}
}

func TestParseBudgetGarbageCounts(t *testing.T) {
	for _, v := range []string{"-1", "1.5", "1e3", "0x10", "NaN", "+5", "99999999999999999999", "five", " "} {
		h := header("x-ratelimit-remaining-requests", v, "x-ratelimit-limit-requests", "60", "x-ratelimit-reset-requests", "1s")
		if b, ok := classify.ParseBudget(h, budgetNow); ok || b.Requests.Reported {
			t.Errorf("remaining %q: want no budget, got %+v", v, b)
		}
	}
	// The longest count read: 18 digits.
	b, ok := classify.ParseBudget(header("x-ratelimit-remaining-requests", "999999999999999999"), budgetNow)
	if !ok || !sameQuota(b.Requests, quota(999999999999999999, 0, 0)) {
		t.Fatalf("18 digits: got %+v, want them read", b)
	}
	// A garbage limit leaves the remaining count standing.
	b, ok = classify.ParseBudget(header("x-ratelimit-remaining-requests", "5", "x-ratelimit-limit-requests", "lots"), budgetNow)
	if !ok || !sameQuota(b.Requests, quota(5, 0, 0)) {
		t.Fatalf("got %+v", b)
	}
}

func TestBudgetFits(t *testing.T) {
	at := budgetNow
	for _, tc := range []struct {
		name   string
		b      classify.Budget
		tokens int64
		exp    time.Duration // after at
		expOK  bool
	}{
		{"nothing reported fits now", classify.Budget{}, 100, 0, true},
		{"room in both fits now", classify.Budget{Requests: quota(3, 60, time.Second), Tokens: quota(500, 1000, time.Second)}, 500, 0, true},
		// A token bucket of 60 per minute empty for 1 s refills one request in 1 s:
		// 60 short of 60 take 60 s, so 1 takes 1 s.
		{"one request of an empty 60/min bucket", classify.Budget{Requests: quota(0, 60, time.Minute)}, 0, time.Second, true},
		// 1000 tokens, 200 left, whole in 8 s: 100/s; 700 needs 500 more: 5 s.
		{"tokens refill at the bucket's rate", classify.Budget{Requests: quota(5, 60, time.Second), Tokens: quota(200, 1000, 8*time.Second)}, 700, 5 * time.Second, true},
		{"the later of the two limits", classify.Budget{Requests: quota(0, 60, time.Minute), Tokens: quota(0, 1000, 500*time.Millisecond)}, 1, time.Second, true},
		{"no limit known: the reset", classify.Budget{Requests: quota(0, 0, 3*time.Second)}, 0, 3 * time.Second, true},
		{"more than the limit holds: the reset", classify.Budget{Tokens: quota(10, 100, 4*time.Second)}, 500, 4 * time.Second, true},
		{"short and no reset: cannot tell", classify.Budget{Tokens: quota(10, 100, 0)}, 50, 0, false},
		{"exactly what is left fits now, reset or not", classify.Budget{Requests: quota(1, 60, 0), Tokens: quota(50, 100, 0)}, 50, 0, true},
		{"the provider's word wins", classify.Budget{Requests: quota(0, 60, time.Minute), RetryIn: 85 * time.Millisecond}, 0, 85 * time.Millisecond, true},
		{"negative tokens count as none", classify.Budget{Tokens: quota(0, 100, time.Second)}, -5, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.b.At = at
			got, ok := tc.b.Fits(tc.tokens)
			if ok != tc.expOK {
				t.Fatalf("ok = %v, want %v", ok, tc.expOK)
			}
			if exp := at.Add(tc.exp); ok && !got.Equal(exp) {
				t.Fatalf("fits at +%v, want +%v", got.Sub(at), tc.exp)
			}
		})
	}
}

func FuzzParseBudget(f *testing.F) {
	f.Add("59", "60", "1s", "Tue, 21 Apr 2026 14:38:02 GMT", `"default";r=50;t=30`, `"default";q=100;w=10`)
	f.Add("0", "600", "2026-04-21T14:38:25Z", "Tue, 21 Apr 2026 14:38:02 GMT", "", "")
	f.Add("-1", "-1", "0", "", `limit=100, remaining=50, reset=5`, "")
	f.Add("999997455", "1000000000", "33011.382867097855", "yesterday", `"a";r=1;t=99999999999999999`, `"a";q=;qu="requests"`)
	f.Add("1", "2", "1776782297000", "Fri, 31 Dec 9999 23:59:59 GMT", `"x\"y";r=1,`, `"x";q=1;qu=?1`)
	f.Add("3", "", "9999999999999999999h", "Mon, 01 Jan 0001 00:00:00 GMT", `:abc:;r=1, *t;r=2;t=3`, `"é";q=1`)
	f.Fuzz(func(t *testing.T, remaining, limit, reset, date, ratelimit, policy string) {
		h := http.Header{
			"Date":                                 {date},
			"X-Ratelimit-Remaining-Requests":       {remaining},
			"X-Ratelimit-Limit-Requests":           {limit},
			"X-Ratelimit-Reset-Requests":           {reset},
			"Anthropic-Ratelimit-Tokens-Remaining": {remaining},
			"Anthropic-Ratelimit-Tokens-Limit":     {limit},
			"Anthropic-Ratelimit-Tokens-Reset":     {reset},
			"X-Ratelimit-Reset":                    {reset},
			"X-Ratelimit-Remaining":                {limit},
			"Ratelimit":                            {ratelimit},
			"Ratelimit-Policy":                     {policy},
		}
		b, ok := classify.ParseBudget(h, budgetNow)
		if ok != (b.Requests.Reported || b.Tokens.Reported) || !b.At.Equal(budgetNow) || b.RetryIn != 0 {
			t.Fatalf("ParseBudget(%v) = %+v, %v", h, b, ok)
		}
		for _, q := range []classify.Quota{b.Requests, b.Tokens} {
			if !q.Reported && q != (classify.Quota{}) || q.Remaining < 0 || q.Limit < 0 {
				t.Fatalf("quota %+v", q)
			}
			if !q.Reset.IsZero() && (q.Reset.Before(budgetNow) || q.Reset.After(budgetNow.Add(classify.MaxHint))) {
				t.Fatalf("reset %v outside [now, now+MaxHint]", q.Reset)
			}
		}
		for _, n := range []int64{0, 1, 1 << 40} {
			if at, ok := b.Fits(n); ok && (at.Before(budgetNow) || at.After(budgetNow.Add(classify.MaxHint))) {
				t.Fatalf("Fits(%d) = %v", n, at)
			}
		}
	})
}

// A response's headers say how much of the provider's limits is left; Fits
// says when the next call fits if nothing else spends them.
func ExampleParseBudget() {
	h := http.Header{}
	h.Set("X-Ratelimit-Limit-Requests", "60")
	h.Set("X-Ratelimit-Remaining-Requests", "0")
	h.Set("X-Ratelimit-Reset-Requests", "1m0s")
	h.Set("X-Ratelimit-Limit-Tokens", "150000")
	h.Set("X-Ratelimit-Remaining-Tokens", "149984")
	h.Set("X-Ratelimit-Reset-Tokens", "6ms")

	now := time.Date(2026, 4, 21, 14, 38, 7, 0, time.UTC)
	b, ok := classify.ParseBudget(h, now)
	fmt.Println(ok, b.Requests.Remaining, b.Requests.Reset.Sub(now), b.Tokens.Remaining)
	at, _ := b.Fits(1000)
	fmt.Println("next call in", at.Sub(now).Round(time.Millisecond))
	// A reset said to the second may come up to a second later: it is
	// read as 1m1s, and the requests refill one every 61/60 s.
	// Output:
	// true 0 1m1s 149984
	// next call in 1.017s
}

// TestParseBudgetStructuredFields covers the RateLimit field's syntax at
// its edges (RFC 8941, which draft-ietf-httpapi-ratelimit-headers uses):
// what is read, and what makes the whole field malformed, so ignored.
func TestParseBudgetStructuredFields(t *testing.T) {
	for _, tc := range []struct {
		name, field string
		remaining   int64 // -1: ignored
	}{
		{"a token name (3.3.4: ALPHA or * first)", `a;r=5`, 5},
		{"a token name ending the alphabet", `z;r=5`, 5},
		{"an upper-case token name", `A;r=5`, 5},
		{"an upper-case token name ending the alphabet", `Z;r=5`, 5},
		{"a token name of *", `*;r=5`, 5},
		{"a remaining count of 0 (3.3.1: DIGIT first)", `"x";r=0`, 0},
		{"a remaining count of 9", `"x";r=9`, 9},
		{"Boolean parameters (3.3.6: ?1, ?0)", `"x";b=?1;r=5;c=?0`, 5},
		{"an empty byte sequence (3.3.5)", `"x";r=5;pk=::`, 5},
		{"a space and a ~ in a string (3.3.3: %x20-7E)", `"a b~";r=5`, 5},
		{"members without a space after the comma", `"a";r=5,"b";r=10`, 5},
		{"a tab after the comma", "\"a\";r=5,\t\"b\";r=10", 5},
		{"spaces around the field", `  "a";r=5  `, 5},
		{"a Boolean other than ?0 and ?1", `"x";r=5;b=?2`, -1},
		{"a ? alone", `"x";r=5;b=?`, -1},
		{"a byte sequence not closed", `"x";r=5;pk=:abc`, -1},
		{"a control character in a string", "\"x\x01\";r=5", -1},
		{"DEL in a string", "\"x\x7f\";r=5", -1},
		{"DEL in a token", "x\x7f;r=5", -1},
		{"an inner list (not read)", `("a" "b");r=5`, -1},
		{"a trailing comma", `"a";r=5,`, -1},
		{"members without a comma", `"a";r=5 "b";r=10`, -1},
		{"an item that starts with none of its types' characters", `@a;r=5`, -1},
		{"an empty field", `   `, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := classify.ParseBudget(header("RateLimit", tc.field), budgetNow)
			switch {
			case tc.remaining < 0 && (ok || b.Requests.Reported):
				t.Fatalf("%q: read %+v, want the field ignored", tc.field, b.Requests)
			case tc.remaining >= 0 && (!ok || b.Requests.Remaining != tc.remaining):
				t.Fatalf("%q: read %+v (%v), want %d remaining", tc.field, b.Requests, ok, tc.remaining)
			}
		})
	}
}
