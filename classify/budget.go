package classify

import (
	"context"
	"math"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Budget is what one response said about the caller's rate limits at the
// provider: how many requests and tokens are left and when they refill.
// Providers send it on every response, successes included. So a caller
// that reads it can stop before the limit, instead of learning it from a
// 429.
//
// Read it with ParseBudget, or receive it from a Transport (or
// classify/goopenai's) with WithBudgetFunc.
type Budget struct {
	// At is when the response was read (ParseBudget's now). Reset instants
	// and Fits are relative to it.
	At time.Time
	// Requests is the tightest request limit the response reported.
	Requests Quota
	// Tokens is the tightest token limit the response reported, of total,
	// input (prompt) or output (generated) tokens.
	Tokens Quota
	// RetryIn is, for a refused call, the time until one call fits again.
	// It is what the provider's error message said ("Please try again in
	// 85ms", "Please retry after 37 seconds"). It is 0 when the message
	// said none. It is not the time until the limit is whole again: that is
	// Reset. OpenAI's x-ratelimit-reset-requests may say a minute where the
	// message says 85 ms. ParseBudget reads headers only and leaves it 0. A
	// Transport fills it from a failed response's body.
	RetryIn time.Duration
}

// Quota is one rate limit as a response reported it. The zero Quota is a
// limit the response did not report.
type Quota struct {
	// Reported is whether the response said how much of this limit is left.
	Reported bool
	// Remaining is how many requests or tokens the provider would still
	// accept at Budget.At.
	Remaining int64
	// Limit is the limit's size when the response said it, else 0.
	Limit int64
	// Reset is when the limit is whole again. OpenAI, Anthropic and most
	// others say "resets to its initial state" or "fully replenished". The
	// IETF RateLimit field says when more quota is made available. Reset
	// is zero when the response did not say. It is at most MaxHint after
	// Budget.At.
	Reset time.Time
}

// ParseBudget reads the rate limits a response's header reports, in any of
// these dialects (header names are case-insensitive):
//
//	OpenAI, Azure OpenAI, Groq, Fireworks     x-ratelimit-{remaining,limit,reset}-{requests,tokens}
//	Fireworks (split token limits)            x-ratelimit-{remaining,limit}-tokens-{prompt,generated}
//	Cerebras                                  x-ratelimit-{remaining,limit,reset}-{requests-day,tokens-minute}
//	Together, OpenRouter (requests)           x-ratelimit-{remaining,limit,reset}
//	Together (tokens)                         x-tokenlimit-{remaining,limit}
//	Mistral (tokens)                          ratelimitbysize-{remaining,limit,reset}
//	Anthropic                                 anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{remaining,limit,reset}
//	IETF draft-ietf-httpapi-ratelimit-headers RateLimit: "name";r=…;t=…, with RateLimit-Policy: "name";q=…;qu=…
//
// A reset is read in whichever form it comes:
//   - a Go duration ("6m0s", "1s", "85ms", "2m59.56s");
//   - seconds ("7", "11.38");
//   - Unix time in seconds or milliseconds: a number of at least 10⁹ or
//     10¹², which no delay reaches;
//   - an RFC 3339 instant.
//
// An instant is taken relative to the response's Date header when it
// parses, so the two clocks need not agree. Else it is taken relative to
// now. An IETF item counts as requests when its policy's unit (qu) is
// "requests" or not given. Other units are skipped.
//
// Several limits of one kind may be reported: Anthropic's tokens, input
// and output tokens; Cerebras' requests per day and per minute; several
// IETF policies. The one with the fewest left is kept. Of equals, the one
// that resets later is kept. A remaining count that is not a non-negative
// integer is skipped with its limit and reset. Azure sends -1 when it
// does not know. Garbage never panics. ok is false when no limit was
// reported.
func ParseBudget(h http.Header, now time.Time) (b Budget, ok bool) {
	b.At = now
	serverNow := now
	if t, err := http.ParseTime(h.Get("Date")); err == nil {
		serverNow = t
	}
	for _, d := range dialects {
		q, ok := d.read(h, now, serverNow)
		switch {
		case !ok:
		case d.tokens:
			b.Tokens = tighter(b.Tokens, q)
		default:
			b.Requests = tighter(b.Requests, q)
		}
	}
	for _, q := range ietfQuotas(h, now) {
		b.Requests = tighter(b.Requests, q)
	}
	return b, b.Requests.Reported || b.Tokens.Reported
}

// Fits returns the earliest instant at which one more request and tokens
// more tokens fit in b. It assumes each limit refills at an even rate
// from Remaining at b.At to Limit at Reset. A token bucket does so
// (OpenAI, Anthropic). Fits returns b.At when they fit already. A wait
// the provider said (RetryIn) is about the very call it refused. It wins
// over the estimate. A limit whose Limit is unknown, or too small for the
// amount, fits only at its Reset. ok is false when b cannot tell: a limit
// is short and has no Reset.
func (b Budget) Fits(tokens int64) (at time.Time, ok bool) {
	if b.RetryIn > 0 {
		return b.At.Add(b.RetryIn), true
	}
	at = b.At
	for _, need := range [...]struct {
		q Quota
		n int64
	}{{b.Requests, 1}, {b.Tokens, max(tokens, 0)}} {
		t, ok := need.q.fits(b.At, need.n)
		if !ok {
			return time.Time{}, false
		}
		at = later(at, t)
	}
	return at, true
}

// fits is Fits for one limit.
func (q Quota) fits(at time.Time, n int64) (time.Time, bool) {
	if !q.Reported || q.Remaining >= n {
		return at, true
	}
	if q.Reset.IsZero() {
		return time.Time{}, false
	}
	refill := q.Reset.Sub(at)
	if q.Limit < n || q.Limit <= q.Remaining || refill <= 0 {
		return later(at, q.Reset), true
	}
	// (n-Remaining)/(Limit-Remaining) of the refill, rounded up so the
	// estimate is never early. Both counts are below Limit. The product
	// is computed in float64 to avoid overflowing a Duration's int64.
	frac := float64(n-q.Remaining) / float64(q.Limit-q.Remaining)
	return at.Add(time.Duration(math.Ceil(frac * float64(refill)))), true
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// tighter returns whichever of a and b leaves less room. That is the one
// reported, else the one with fewer left, else the one that resets later.
func tighter(a, b Quota) Quota {
	switch {
	case !a.Reported:
		return b
	case !b.Reported:
		return a
	case b.Remaining != a.Remaining:
		if b.Remaining < a.Remaining {
			return b
		}
		return a
	case b.Reset.After(a.Reset):
		return b
	}
	return a
}

// dialect names one provider's headers for one limit. An empty reset
// means the dialect sends none.
type dialect struct {
	remaining, limit, reset string
	tokens                  bool
}

// dialects lists the header families ParseBudget reads. Sources, with
// examples of each form, are in budget_test.go.
var dialects = [...]dialect{
	{"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Limit-Requests", "X-Ratelimit-Reset-Requests", false},
	{"X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Limit-Tokens", "X-Ratelimit-Reset-Tokens", true},
	{"X-Ratelimit-Remaining-Tokens-Prompt", "X-Ratelimit-Limit-Tokens-Prompt", "", true},
	{"X-Ratelimit-Remaining-Tokens-Generated", "X-Ratelimit-Limit-Tokens-Generated", "", true},
	{"X-Ratelimit-Remaining-Requests-Day", "X-Ratelimit-Limit-Requests-Day", "X-Ratelimit-Reset-Requests-Day", false},
	{"X-Ratelimit-Remaining-Tokens-Minute", "X-Ratelimit-Limit-Tokens-Minute", "X-Ratelimit-Reset-Tokens-Minute", true},
	{"X-Ratelimit-Remaining", "X-Ratelimit-Limit", "X-Ratelimit-Reset", false},
	{"X-Tokenlimit-Remaining", "X-Tokenlimit-Limit", "", true},
	{"Ratelimitbysize-Remaining", "Ratelimitbysize-Limit", "Ratelimitbysize-Reset", true},
	{"Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Reset", false},
	{"Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Limit", "Anthropic-Ratelimit-Tokens-Reset", true},
	{"Anthropic-Ratelimit-Input-Tokens-Remaining", "Anthropic-Ratelimit-Input-Tokens-Limit", "Anthropic-Ratelimit-Input-Tokens-Reset", true},
	{"Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Limit", "Anthropic-Ratelimit-Output-Tokens-Reset", true},
}

// read reads one dialect's limit from h. ok is false when its remaining
// count is absent or garbage.
func (d dialect) read(h http.Header, now, serverNow time.Time) (q Quota, ok bool) {
	q.Remaining, ok = parseCount(h.Get(d.remaining))
	if !ok {
		return Quota{}, false
	}
	q.Reported = true
	q.Limit, _ = parseCount(h.Get(d.limit))
	if d.reset != "" {
		q.Reset, _ = parseResetAt(h.Get(d.reset), now, serverNow)
	}
	return q, true
}

// parseCount accepts only a plain non-negative integer that fits an int64.
func parseCount(v string) (int64, bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 18 {
		return 0, false
	}
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

// Numbers at least this large are Unix times, not delays: 10⁹ seconds is
// 31 years, 10¹² milliseconds is 2001.
const (
	unixSeconds = 1e9
	unixMillis  = 1e12
)

// parseResetAt reads a reset in any of the forms ParseBudget lists. It
// returns the instant on the local clock, at most MaxHint after now and
// never before it. The instant is rounded up by the resolution the value
// is stated in (resolution). A reset said to the second may come up to a
// second after what it says. Anthropic's RFC 3339 instants and OpenAI's
// "1s" or "6m0s" are said so. A reset is never early.
func parseResetAt(v string, now, serverNow time.Time) (time.Time, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, false
	}
	res := resolution(v)
	if n, ok := parseDecimal(v); ok {
		switch {
		case n >= unixMillis:
			return fromServer(time.UnixMilli(int64(min(n, math.MaxInt64/2))).Add(res), now, serverNow), true
		case n >= unixSeconds:
			return fromServer(time.Unix(int64(n), int64((n-math.Floor(n))*1e9)).Add(res), now, serverNow), true
		}
		return now.Add(clampHint(secondsToHint(n) + res)), true
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, false
		}
		return now.Add(clampHint(clampHint(d) + res)), true
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return fromServer(t.Add(res), now, serverNow), true
	}
	return time.Time{}, false
}

// resolution is the unit of the last digit a reset is stated in:
//   - a second for "7", "1s", "6m0s", a whole Unix second or an RFC 3339
//     instant without a fraction;
//   - a millisecond for "85ms" or Unix milliseconds;
//   - 10 ms for "2m59.56s" or "11.38";
//   - 0 for a value it cannot read.
func resolution(v string) time.Duration {
	unit := time.Second
	switch {
	case strings.ContainsAny(v, "TZ"): // RFC 3339: the fraction of its seconds
		if i := strings.IndexByte(v, '.'); i >= 0 {
			return fraction(unit, v[i+1:])
		}
		return unit
	case len(v) > 0 && v[len(v)-1] >= 'a' && v[len(v)-1] <= 'z': // a Go duration: its last number and unit
		end := len(v)
		for end > 0 && (v[end-1] < '0' || v[end-1] > '9') {
			end--
		}
		var ok bool
		if unit, ok = durationUnits[strings.ReplaceAll(v[end:], "µ", "u")]; !ok {
			return 0
		}
		v = v[:end]
	}
	if n, ok := parseDecimal(v[max(strings.LastIndexAny(v, "hmsuµn")+1, 0):]); ok && n >= unixMillis && !strings.Contains(v, ".") {
		return time.Millisecond
	}
	if i := strings.LastIndexByte(v, '.'); i >= 0 && strings.IndexAny(v[i:], "hmsun") < 0 {
		return fraction(unit, v[i+1:])
	}
	return unit
}

// durationUnits are time.ParseDuration's units.
var durationUnits = map[string]time.Duration{"ns": time.Nanosecond, "us": time.Microsecond, "ms": time.Millisecond,
	"s": time.Second, "m": time.Minute, "h": time.Hour}

// fraction is unit divided by ten per digit of the fraction digits, at
// least a nanosecond.
func fraction(unit time.Duration, digits string) time.Duration {
	for i := 0; i < len(digits) && digits[i] >= '0' && digits[i] <= '9'; i++ {
		unit /= 10
	}
	return max(unit, time.Nanosecond)
}

// fromServer moves an instant on the server's clock to the local one. It
// is as far after now as it is after serverNow. It is clamped to [now,
// now+MaxHint].
func fromServer(at, now, serverNow time.Time) time.Time {
	return now.Add(clampHint(at.Sub(serverNow)))
}

// ietfQuotas reads the RateLimit field of draft-ietf-httpapi-ratelimit-headers
// (items "name";r=remaining;t=seconds). It reads the limits of its
// RateLimit-Policy (items "name";q=quota;qu=unit). A field that is not a
// valid Structured Field list is ignored, as the draft says. So is an item
// without a valid r.
func ietfQuotas(h http.Header, now time.Time) []Quota {
	limits, ok := parseSFList(strings.Join(h.Values("RateLimit"), ","))
	if !ok {
		return nil
	}
	policies, _ := parseSFList(strings.Join(h.Values("RateLimit-Policy"), ","))
	var out []Quota
	for _, l := range limits {
		var unit, quota string
		for _, p := range policies {
			if p.name == l.name {
				unit, quota = p.params["qu"], p.params["q"]
				break
			}
		}
		if unit != "" && unit != "requests" {
			continue
		}
		remaining, ok := parseCount(l.params["r"])
		if !ok {
			continue
		}
		q := Quota{Reported: true, Remaining: remaining}
		q.Limit, _ = parseCount(quota)
		if t, ok := parseCount(l.params["t"]); ok {
			q.Reset = now.Add(clampHint(secondsToHint(float64(t)) + time.Second)) // whole seconds: rounded up by one
		}
		out = append(out, q)
	}
	return out
}

// sfMember is one member of a Structured Field list (RFC 9651): its bare
// item and its parameters, strings unquoted and other values as written.
type sfMember struct {
	name   string
	params map[string]string
}

// parseSFList parses a Structured Field list of items far enough for the
// RateLimit fields. Inner lists and any syntax error fail the whole field.
func parseSFList(s string) ([]sfMember, bool) {
	s = strings.Trim(s, " \t")
	if s == "" {
		return nil, false
	}
	var out []sfMember
	for {
		var m sfMember
		var ok bool
		if m.name, s, ok = sfBareItem(s); !ok {
			return nil, false
		}
		for len(s) > 0 && s[0] == ';' {
			var key, val string
			if key, s, ok = sfKey(strings.TrimLeft(s[1:], " ")); !ok {
				return nil, false
			}
			val = "?1" // a parameter without a value is boolean true
			if len(s) > 0 && s[0] == '=' {
				if val, s, ok = sfBareItem(s[1:]); !ok {
					return nil, false
				}
			}
			if m.params == nil {
				m.params = make(map[string]string)
			}
			m.params[key] = val
		}
		out = append(out, m)
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return out, true
		}
		if s[0] != ',' {
			return nil, false
		}
		if s = strings.TrimLeft(s[1:], " \t"); s == "" {
			return nil, false // a trailing comma
		}
	}
}

// sfKey reads a parameter key: lcalpha or "*", then lcalpha, digits, "_",
// "-", "." or "*".
func sfKey(s string) (key, rest string, ok bool) {
	i := 0
	for ; i < len(s); i++ {
		c := s[i]
		lower := c >= 'a' && c <= 'z' || c == '*'
		if !lower && (i == 0 || !(c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.')) {
			break
		}
	}
	return s[:i], s[i:], i > 0
}

// sfBareItem reads a string, token, number, byte sequence or boolean.
func sfBareItem(s string) (item, rest string, ok bool) {
	if s == "" {
		return "", "", false
	}
	switch c := s[0]; {
	case c == '"':
		var b strings.Builder
		for i := 1; i < len(s); i++ {
			switch c := s[i]; {
			case c == '\\':
				if i+1 == len(s) || s[i+1] != '"' && s[i+1] != '\\' {
					return "", "", false
				}
				i++
				b.WriteByte(s[i])
			case c == '"':
				return b.String(), s[i+1:], true
			case c < 0x20 || c > 0x7e:
				return "", "", false
			default:
				b.WriteByte(c)
			}
		}
		return "", "", false
	case c == ':':
		end := strings.IndexByte(s[1:], ':')
		if end < 0 {
			return "", "", false
		}
		return s[:end+2], s[end+2:], true
	case c == '?':
		if len(s) < 2 || s[1] != '0' && s[1] != '1' {
			return "", "", false
		}
		return s[:2], s[2:], true
	case c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '*':
		i := 1
		for i < len(s) && strings.IndexByte(",; \t=\"()<>@[]{}\\", s[i]) < 0 && s[i] > 0x20 && s[i] < 0x7f {
			i++
		}
		return s[:i], s[i:], true
	}
	return "", "", false
}

// retryInPattern finds a wait in a rate-limit message:
//   - a Go duration after "try again in" or "retry in" (OpenAI, Groq,
//     Gemini: "3.89s", "6ms", "53.016342224s");
//   - a number of seconds after "retry after" or "try again in" (Azure:
//     "37 seconds", "2 seconds").
var retryInPattern = regexp.MustCompile(`(?i)\b(?:try again|retry) (?:in|after) (?:((?:\d+(?:\.\d+)?(?:h|ms|m|s|us|µs|ns))+)\b|(\d+(?:\.\d+)?) ?(?:seconds?|secs?)\b)`)

// retryIn reads the wait a failed response's error message states. ok is
// false when it states none. Waits above MaxHint are capped.
func retryIn(message string) (time.Duration, bool) {
	m := retryInPattern.FindStringSubmatch(message)
	switch {
	case m == nil:
		return 0, false
	case m[1] != "":
		d, err := time.ParseDuration(m[1])
		if err != nil { // only an overflow gets here
			return MaxHint, true
		}
		return clampHint(d), true
	}
	s, ok := parseDecimal(m[2])
	return secondsToHint(s), ok
}

// budgetKey is the context key of WithBudgetFunc.
type budgetKey struct{}

// WithBudgetFunc returns a copy of ctx under which a Transport reports
// budgets to f. classify/goopenai's Transport does too. It reports the
// Budget of every response to a request made with that context, success
// or failure. It calls f before it returns the response. A response that
// reports no limit, and if it failed states no wait, is not reported. f
// runs on the caller's goroutine, and concurrently for concurrent
// requests. It must be safe for concurrent use and must not block.
//
// The innermost call wins: a request belongs to the innermost gated call
// around it. A nil f turns reporting off for ctx.
func WithBudgetFunc(ctx context.Context, f func(Budget)) context.Context {
	return context.WithValue(ctx, budgetKey{}, f)
}

// budgetFunc returns the function WithBudgetFunc put on ctx, or nil.
func budgetFunc(ctx context.Context) func(Budget) {
	f, _ := ctx.Value(budgetKey{}).(func(Budget))
	return f
}

// reportBudget hands the budget of a response to f, if any. message is a
// failed response's error message, "" for a success.
func reportBudget(f func(Budget), h http.Header, message string) {
	if f == nil {
		return
	}
	b, ok := ParseBudget(h, time.Now())
	if d, said := retryIn(message); said {
		b.RetryIn, ok = d, true
	}
	if ok {
		f(b)
	}
}
