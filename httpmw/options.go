package httpmw

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/retrygate/retrygate/gate"
)

// JobFunc returns the job key of a request. An error, an empty key or a key
// longer than 1024 bytes (the gate's limit) is answered 400 (500 for ErrNotRouted, a
// mounting mistake); the error text never reaches the client.
type JobFunc func(r *http.Request) (string, error)

// RefusalHandler writes the response to a request the middleware answers
// itself. The Cache-Control, Retry-After and RateLimit headers are already
// set when it is called; it writes the status and the body. WriteProblem is
// the default.
type RefusalHandler func(w http.ResponseWriter, r *http.Request, ref Refusal)

// Options configures New and StatusHandler. Only Job is required; every other
// zero value means the documented default.
type Options struct {
	// Job returns the request's job key. Required. See URLParam, URLParamAs
	// and PerTenant.
	Job JobFunc

	// Exists reports whether the request names something the app has
	// (the document of POST /documents/{id}/evaluate). It runs after Job,
	// before the gate reads or writes anything: a request for an id that
	// does not exist gets the 404 problem and costs Redis nothing, so a
	// flood of made-up ids leaves no key behind (a job whose call failed
	// keeps its key for the gate's Retention.Attempts, a day by default).
	// An error gets the 503 problem and goes to OnError. Nil = every id
	// exists: check ids in a middleware before this one, or each id a
	// client makes up may cost Redis a key (docs/operating.md, "Under
	// abuse").
	Exists func(r *http.Request) (bool, error)

	// Priority returns the request's class when its upstream's budget
	// cannot serve every caller (gate.WithPriority): a person at a screen
	// PriorityInteractive, a script PriorityBatch. Read it from what you
	// trust (the route, the authenticated key), not from a header the
	// client picks. An error is answered 400 (500 for ErrNotRouted) and
	// goes to OnError. Nil = gate.PriorityNormal.
	Priority func(r *http.Request) (gate.Priority, error)
	// Tenant returns the customer the request is made for
	// (gate.WithTenant): within a class, the tenants asking share the
	// upstream's turns fairly. URLParamValue reads it from the URL, as for
	// PerTenant. A tenant over MaxTenantLen bytes, not UTF-8 or holding a
	// control character, or an error, is answered 400 (500 for
	// ErrNotRouted) and goes to OnError. Nil = every request is the
	// tenant "".
	Tenant func(r *http.Request) (string, error)
	// TenantWeight is a tenant's share relative to the others' (a paid
	// plan's 2 takes two turns for each of a free plan's 1; see
	// gate.WithTenant). Nil = 1 for all. It needs Tenant.
	TenantWeight func(tenant string) float64

	// StatusURL returns the URL of the job's retry-status endpoint, written
	// as status_url in refusals that name a job. Nil = not written. See
	// SiblingURL.
	StatusURL func(r *http.Request) string

	// Replay answers requests for a job kept Done (gate.Options.Retention.Done)
	// instead of the 409 problem, e.g. with the stored result. It runs
	// without a lease. Nil = the 409 problem.
	Replay http.Handler

	// MaxWait caps the wait a request may ask for with Prefer: wait=N
	// (RFC 7240) when its job is running: the request then waits, at most
	// N seconds and MaxWait, for the running call to settle, and runs, or
	// gets its result through Replay (the job is Done), or the refusal
	// with its true Retry-After. A response that waited carries
	// Preference-Applied: wait=N. Without the header nothing waits unless
	// the gate's Options.Wait says so. Prefer fields over 1 KB together
	// are ignored. Negative = the header is ignored. Default: 10s.
	MaxWait time.Duration

	// MaxStreams bounds the live status streams a StatusHandler serves at
	// once (requests with Accept: text/event-stream); one more is answered
	// with the 503 problem. Negative = no streams: such requests get the
	// plain JSON answer. Default: 256.
	MaxStreams int
	// MaxStreamsPerClient bounds the live status streams one client
	// (StreamClient) has open at once; one more gets the 503 problem.
	// Default: MaxStreams/8, at least 1.
	MaxStreamsPerClient int
	// StreamClient names a stream's client for MaxStreamsPerClient.
	// Default: ClientAddr (the remote IP address). Behind a proxy, return
	// the address it vouches for, or put chi's middleware.RealIP in front.
	StreamClient func(r *http.Request) string

	// RetryIn turns a wait into the human sentence of a refusal's detail
	// and a status's message; it is called with 0 when a retry may run now.
	// Default: "Retry available now." for 0, else "Retry available in " +
	// FormatWait(d) + ".", e.g. "Retry available in 4 min 12 s.".
	RetryIn func(d time.Duration) string

	// ProblemTypeBase, when set, makes a refusal's problem type
	// ProblemTypeBase + job state (e.g. "https://example.com/problems/" +
	// "cooling_down") with a descriptive title. Default: type "about:blank"
	// with the HTTP status text as title, as RFC 9457 asks.
	ProblemTypeBase string

	// Headers names the headers of refusals.
	Headers Headers

	// UnavailableRetryAfter is the Retry-After of the 503 sent when Redis
	// cannot be reached (the gate fails closed). Default: 5s.
	UnavailableRetryAfter time.Duration

	// Blocked writes refusals of a job that may not run now (cooling down,
	// running, failed, done without Replay, upstream cooling).
	// Default: WriteProblem.
	Blocked RefusalHandler
	// Unavailable writes the 503 sent when the gate cannot reach Redis.
	// Default: WriteProblem.
	Unavailable RefusalHandler
	// InvalidJob writes the 400 sent when the request names no valid job,
	// the 404 of a job Exists does not know, and the 500 of ErrNotRouted.
	// Default: WriteProblem.
	InvalidJob RefusalHandler

	// OnError receives the errors the client never sees: why a job key was
	// rejected, Redis errors, and settles that could not be recorded. Use
	// it for logs: the errors carry none of the request's bytes, but a
	// path or header you log with them is the client's, so escape its
	// control bytes (%q, or the demo's logTo in examples/server). Nil =
	// dropped. It must be safe for concurrent use.
	OnError func(r *http.Request, err error)
}

// Headers names the headers a refusal carries.
type Headers struct {
	// RetryAfter names the header holding the whole seconds to wait.
	// Default: "Retry-After"; "-" = not sent.
	RetryAfter string
	// RateLimit names the IETF RateLimit header ("retry";r=0;t=<seconds>),
	// sent alongside RetryAfter. Default: "" = not sent; set it to
	// RateLimitHeader to send it.
	RateLimit string
}

// RateLimitHeader is the header name of the IETF RateLimit fields draft.
const RateLimitHeader = "RateLimit"

// config is a validated Options with defaults filled in.
type config struct {
	g    *gate.Gate
	opts Options
	// Header names; "" = not sent.
	retryAfter, rateLimit string
	// maxWait caps Prefer: wait; ≤ 0 = the header is ignored.
	maxWait time.Duration
	// streams shares live event streams (StatusHandler); nil = none.
	streams *Streams
	// status: this is a StatusHandler's (it refuses keys built from its
	// own route).
	status bool
}

// newConfig validates opts and panics naming every invalid option, as
// chi's middleware constructors do.
func newConfig(fn string, g *gate.Gate, opts Options) *config {
	var bad []string
	if g == nil {
		bad = append(bad, "gate: nil *gate.Gate")
	}
	if opts.Job == nil {
		bad = append(bad, "Options.Job: required")
	}
	if opts.TenantWeight != nil && opts.Tenant == nil {
		bad = append(bad, "Options.TenantWeight: set without Options.Tenant, it weighs nobody")
	}
	if opts.UnavailableRetryAfter < 0 {
		bad = append(bad, fmt.Sprintf("Options.UnavailableRetryAfter: negative duration %v", opts.UnavailableRetryAfter))
	}
	c := &config{g: g, opts: opts}
	switch h := opts.Headers.RetryAfter; {
	case h == "":
		c.retryAfter = "Retry-After"
	case h == "-":
	case !validHeaderName(h):
		bad = append(bad, fmt.Sprintf("Options.Headers.RetryAfter: %q is not a valid header name", h))
	default:
		c.retryAfter = h
	}
	if h := opts.Headers.RateLimit; h != "" {
		if !validHeaderName(h) {
			bad = append(bad, fmt.Sprintf("Options.Headers.RateLimit: %q is not a valid header name", h))
		}
		c.rateLimit = h
	}
	if c.retryAfter != "" && c.rateLimit != "" && http.CanonicalHeaderKey(c.retryAfter) == http.CanonicalHeaderKey(c.rateLimit) {
		bad = append(bad, "Options.Headers: RetryAfter and RateLimit name the same header")
	}
	if len(bad) > 0 {
		panic("httpmw: " + fn + ": invalid options: " + strings.Join(bad, "; "))
	}
	if c.opts.RetryIn == nil {
		c.opts.RetryIn = defaultRetryIn
	}
	if opts.MaxStreams >= 0 {
		c.streams = &Streams{Max: opts.MaxStreams, PerClient: opts.MaxStreamsPerClient, Client: opts.StreamClient}
	}
	switch {
	case opts.MaxWait == 0:
		c.maxWait = 10 * time.Second
	case opts.MaxWait > 0:
		c.maxWait = opts.MaxWait
	}
	if c.opts.UnavailableRetryAfter == 0 {
		c.opts.UnavailableRetryAfter = 5 * time.Second
	}
	if c.opts.Blocked == nil {
		c.opts.Blocked = WriteProblem
	}
	if c.opts.Unavailable == nil {
		c.opts.Unavailable = WriteProblem
	}
	if c.opts.InvalidJob == nil {
		c.opts.InvalidJob = WriteProblem
	}
	return c
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

func (c *config) onError(r *http.Request, err error) {
	if c.opts.OnError != nil && err != nil {
		c.opts.OnError(r, err)
	}
}
