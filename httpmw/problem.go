package httpmw

import (
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/code"
)

// stateUnknown is the job_state written when the gate could not reach
// Redis, so the job's state is not known; the others are gate.State's
// names.
const stateUnknown = "unknown"

// Refusal describes a response the middleware writes itself instead of
// running the handler. It holds no upstream or Redis text except in Err.
type Refusal struct {
	// Status is the HTTP status: 429, 409, 422, 503, 400, 404 or 500.
	Status int
	// State is the job_state member: a gate.State name or "unknown";
	// "" when the request names no valid job.
	State string
	// RetryAfter is the wait before a retry may run; 0 when waiting does
	// not help (failed, done, invalid job).
	RetryAfter time.Duration
	// RetryAt is when the wait ends, rounded up to the second; zero
	// without RetryAfter.
	RetryAt time.Time
	// Attempts counts the job's failures since its last success.
	Attempts int
	// Ahead is how many callers were ahead of this one in its upstream's
	// line when it was refused (gate.BlockedError.Ahead): its turn could
	// not come within the wait it had, and RetryAfter is the expected wait
	// for it. 0 when it was not in line.
	Ahead int
	// Reason is the classification code behind a cooldown, a failed mark
	// or an upstream cooldown (e.g. "rate_limited"); never upstream text.
	Reason string
	// Type, Title and Detail are the RFC 9457 members; Detail is the
	// human sentence, e.g. "Retry available in 4 min 12 s.".
	Type, Title, Detail string
	// StatusURL is Options.StatusURL's value, when configured.
	StatusURL string
	// Upstreams holds each of the gate's upstreams (Options.Upstream, then
	// Fallbacks) when every one refused the call (State
	// "upstream_cooling"); nil otherwise.
	Upstreams []gate.UpstreamStatus
	// Err is the cause (a *gate.BlockedError, an ErrUnavailable, a JobFunc
	// error), for logs only: never write its text to the client.
	Err error
}

// WriteProblem writes ref as an application/problem+json body (RFC 9457)
// with the extension members job_state, retry_after_seconds, retry_at
// (RFC 3339), ahead (the callers ahead of this one in its upstream's
// line), attempts (cooling_down), reason, status_url and upstreams
// (upstream_cooling: each upstream's State), each only when it
// applies. It is the default RefusalHandler.
func WriteProblem(w http.ResponseWriter, _ *http.Request, ref Refusal) {
	body := appendProblem(make([]byte, 0, 320), ref)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(ref.Status)
	_, _ = w.Write(body)
}

// appendProblem appends ref's problem document and a newline: the bytes
// encoding/json writes for it (HTML-safe escaping; optional members
// omitted when empty), built without reflection because every refusal
// writes one (FuzzProblemMatchesEncodingJSON holds the two equal).
func appendProblem(b []byte, ref Refusal) []byte {
	typ, title := ref.Type, ref.Title
	if typ == "" {
		typ = "about:blank"
	}
	if title == "" {
		title = http.StatusText(ref.Status)
	}
	b = appendMember(b, '{', "type", typ)
	b = appendMember(b, ',', "title", title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(ref.Status), 10)
	b = appendOptional(b, "detail", ref.Detail)
	b = appendOptional(b, "job_state", ref.State)
	if ref.RetryAfter > 0 {
		b = append(b, `,"retry_after_seconds":`...)
		b = strconv.AppendInt(b, retrySeconds(ref.RetryAfter), 10)
		if !ref.RetryAt.IsZero() {
			b = append(b, `,"retry_at":"`...)
			b = ref.RetryAt.UTC().AppendFormat(b, time.RFC3339)
			b = append(b, '"')
		}
	}
	if ref.Ahead > 0 {
		b = append(b, `,"ahead":`...)
		b = strconv.AppendInt(b, int64(ref.Ahead), 10)
	}
	if ref.State == gate.CoolingDown.String() || ref.Attempts > 0 {
		b = append(b, `,"attempts":`...)
		b = strconv.AppendInt(b, int64(ref.Attempts), 10)
	}
	b = appendOptional(b, "reason", safeReason(ref.Reason))
	b = appendOptional(b, "status_url", ref.StatusURL)
	ups := upstreamStates(ref.Upstreams)
	for i, u := range ups {
		if i == 0 {
			b = append(b, `,"upstreams":[`...)
		} else {
			b = append(b, ',')
		}
		b = appendMember(b, '{', "upstream", u.Upstream)
		b = appendMember(b, ',', "state", u.State)
		if u.Probing {
			b = append(b, `,"probing":true`...)
		}
		b = appendOptional(b, "reason", u.Reason)
		if u.RetryAfterSeconds != 0 {
			b = append(b, `,"retry_after_seconds":`...)
			b = strconv.AppendInt(b, u.RetryAfterSeconds, 10)
		}
		b = append(b, '}')
	}
	if len(ups) > 0 {
		b = append(b, ']')
	}
	return append(b, '}', '\n')
}

// appendMember appends sep and the member "name":value; name is a plain
// ASCII literal.
func appendMember(b []byte, sep byte, name, value string) []byte {
	b = append(b, sep, '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendJSONString(b, value)
}

// appendOptional appends the member unless value is empty (omitempty).
func appendOptional(b []byte, name, value string) []byte {
	if value == "" {
		return b
	}
	return appendMember(b, ',', name, value)
}

// appendJSONString appends s as a JSON string the way encoding/json writes
// it with HTML escaping: '"' and '\' escaped, control bytes as \b, \f, \n,
// \r, \t or \u00XX, '<', '>' and '&' as \u00XX, U+2028 and U+2029 as
// \u2028 and \u2029, and each byte of invalid UTF-8 as \ufffd.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// titles are the descriptive titles used with Options.ProblemTypeBase.
var titles = map[string]string{
	"cooling_down":     "Job is cooling down",
	"running":          "Job is already running",
	"failed":           "Job failed permanently",
	"done":             "Job is already done",
	"upstream_cooling": "Upstream is cooling down",
	"ready":            "Upstream failed, retry now",
	stateUnknown:       "Retry gate unavailable",
	"":                 "Invalid job",
}

// refusal builds the Refusal for an error of gate.Acquire (b: its
// refusal, if it is one) and picks its handler.
func (c *config) refusal(r *http.Request, err error, b *gate.BlockedError) (Refusal, RefusalHandler) {
	switch {
	case b != nil:
		return c.blocked(r, b), c.opts.Blocked
	case errors.Is(err, gate.ErrInvalidJob):
		return c.invalid(http.StatusBadRequest, err), c.opts.InvalidJob
	}
	return c.unavailable(err, c.opts.UnavailableRetryAfter), c.opts.Unavailable
}

// blocked maps a gate refusal onto the status-code contract.
func (c *config) blocked(r *http.Request, b *gate.BlockedError) Refusal {
	ref := Refusal{Err: b, Attempts: b.Attempts, Reason: b.Reason}
	wait := b.RetryAfter
	switch {
	case b.State == gate.UpstreamCooling:
		ref.Status, ref.State, ref.Upstreams = http.StatusServiceUnavailable, gate.UpstreamCooling.String(), b.Upstreams
		if wait <= 0 { // a pause without a known end
			wait = c.opts.UnavailableRetryAfter
		}
		ref.Detail = "The upstream service is temporarily unavailable. " + c.opts.RetryIn(wait)
	case b.State == gate.CoolingDown:
		ref.Status, ref.State = http.StatusTooManyRequests, gate.CoolingDown.String()
		ref.Detail = c.opts.RetryIn(max(wait, time.Second))
	case b.State == gate.Failed:
		ref.Status, ref.State, wait = http.StatusUnprocessableEntity, gate.Failed.String(), 0
		ref.Detail = "This job failed and will not be retried automatically."
	case b.State == gate.Done:
		ref.Status, ref.State, wait = http.StatusConflict, gate.Done.String(), 0
		ref.Detail = "This job is already done."
	default: // Running
		ref.Status, ref.State = http.StatusConflict, gate.Running.String()
		if wait <= 0 { // the gate always says; a refusal built by hand may not
			wait = c.opts.UnavailableRetryAfter
		}
		ref.Detail = "This job is already running. " + c.opts.RetryIn(wait)
	}
	if b.Ahead > 0 && wait > 0 && b.State != gate.Failed && b.State != gate.Done {
		ref.Ahead = b.Ahead
		ref.Detail = aheadSentence(b.Ahead) + " " + c.opts.RetryIn(wait)
	}
	c.setWait(&ref, wait)
	if c.opts.StatusURL != nil {
		ref.StatusURL = c.opts.StatusURL(r)
	}
	c.typeAndTitle(&ref)
	return ref
}

// aheadSentence says how many callers were ahead of a refused one.
func aheadSentence(n int) string {
	if n == 1 {
		return "1 caller is ahead of this one in line."
	}
	return strconv.Itoa(n) + " callers are ahead of this one in line."
}

// settled builds the refusal for a handler that reported a failure with
// Fail and wrote nothing: the outcome the gate just recorded (ce).
func (c *config) settled(r *http.Request, l *gate.Lease, ce *gate.CallError) (Refusal, RefusalHandler) {
	switch {
	case !l.Gated():
		// Redis.FailOpen ran it ungated: nothing was recorded.
	case ce.SettleErr != nil:
		// The lock's own TTL is the cooldown now.
		return c.unavailable(ce.SettleErr, ce.RetryAfter), c.opts.Unavailable
	case ce.State == gate.CoolingDown || ce.State == gate.Failed:
		b := &gate.BlockedError{Job: l.Job(), State: ce.State, RetryAfter: ce.RetryAfter,
			Attempts: ce.Attempts, Reason: ce.Verdict.Reason}
		return c.blocked(r, b), c.opts.Blocked
	case ce.State == gate.Ready && ce.Verdict.Reason != "" && ce.Verdict.Class != classify.ClassCanceled:
		// A provider-wide failure with another upstream ready (the gate's
		// Fallbacks): the job may run again at once, on that upstream.
		ref := Refusal{Status: http.StatusServiceUnavailable, State: gate.Ready.String(), Attempts: ce.Attempts,
			Reason: ce.Verdict.Reason, Detail: "The upstream service failed. " + c.opts.RetryIn(0)}
		if c.opts.StatusURL != nil {
			ref.StatusURL = c.opts.StatusURL(r)
		}
		c.typeAndTitle(&ref)
		return ref, c.opts.Blocked
	}
	// Released (the client went away) or ungated (Redis.FailOpen).
	return c.unavailable(nil, c.opts.UnavailableRetryAfter), c.opts.Unavailable
}

func (c *config) unavailable(err error, wait time.Duration) Refusal {
	ref := Refusal{Status: http.StatusServiceUnavailable, State: stateUnknown, Err: err}
	ref.Detail = "The service cannot check this job right now. " + c.opts.RetryIn(wait)
	c.setWait(&ref, wait)
	c.typeAndTitle(&ref)
	return ref
}

// invalid is the refusal of a request that names no valid job: 400, or 500
// for a mounting mistake.
func (c *config) invalid(status int, err error) Refusal {
	ref := Refusal{Status: status, Err: err, Detail: "The request does not name a valid job."}
	switch status {
	case http.StatusInternalServerError:
		ref.Detail = "The server could not tell which job this request is for."
	case http.StatusNotFound:
		ref.Detail = "The request names nothing that exists."
	}
	c.typeAndTitle(&ref)
	return ref
}

func (c *config) invalidFor(err error) (Refusal, RefusalHandler) {
	if errors.Is(err, ErrNotRouted) || errors.Is(err, ErrStatusOwnRoute) {
		return c.invalid(http.StatusInternalServerError, err), c.opts.InvalidJob
	}
	return c.invalid(http.StatusBadRequest, err), c.opts.InvalidJob
}

func (c *config) setWait(ref *Refusal, wait time.Duration) {
	if wait <= 0 {
		return
	}
	ref.RetryAfter = wait
	at := time.Now().Add(wait)
	if t := at.Truncate(time.Second); t.Before(at) {
		at = t.Add(time.Second)
	}
	ref.RetryAt = at
}

func (c *config) typeAndTitle(ref *Refusal) {
	if c.opts.ProblemTypeBase == "" {
		return
	}
	name := ref.State
	if name == "" {
		name = "invalid_job"
	}
	ref.Type = c.opts.ProblemTypeBase + name
	ref.Title = titles[ref.State]
}

// respond sets the refusal's headers and calls h.
func (c *config) respond(w http.ResponseWriter, r *http.Request, ref Refusal, h RefusalHandler) {
	hd := w.Header()
	hd.Set("Cache-Control", "no-store")
	if ref.RetryAfter > 0 {
		s := strconv.FormatInt(retrySeconds(ref.RetryAfter), 10)
		if c.retryAfter != "" {
			hd.Set(c.retryAfter, s)
		}
		if c.rateLimit != "" {
			hd.Set(c.rateLimit, `"retry";r=0;t=`+s)
		}
	}
	h(w, r, ref)
}

// safeReason keeps reason codes to the gate's form (internal/code), as
// the gate writes them; anything else (a custom classifier's text) is
// dropped rather than shown to a client.
func safeReason(r string) string {
	if !code.Reason(r) {
		return ""
	}
	return r
}
