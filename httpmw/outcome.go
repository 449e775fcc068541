package httpmw

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

// state is the per-request holder the handler reaches through its context.
type state struct {
	mu  sync.Mutex
	err error
}

type stateKey struct{}

func stateOf(ctx context.Context) *state {
	st, _ := ctx.Value(stateKey{}).(*state)
	return st
}

// Lease returns the lease the handler runs under (its Fence token guards
// writes against a stale owner), or nil outside the middleware. With
// gate.Options.Redis.FailOpen and Redis down it is an ungated lease (Gated false,
// Fence 0).
func Lease(ctx context.Context) *gate.Lease { return gate.LeaseFromContext(ctx) }

// Fail reports the handler's failure. It wins over the response status: the
// lease is failed with err, which the gate's classifier judges (cooldown,
// failed mark, upstream cooldown) exactly as gate.Do would. The first
// non-nil error reported wins. If the handler then writes nothing, the
// middleware answers with the state just recorded, e.g. 429 "Retry
// available in 5 min." Fail returns false, and does nothing, for a nil err
// or outside the middleware. It is safe for concurrent use.
func Fail(r *http.Request, err error) bool {
	st := stateOf(r.Context())
	if st == nil || err == nil {
		return false
	}
	st.mu.Lock()
	if st.err == nil {
		st.err = err
	}
	st.mu.Unlock()
	return true
}

// handlerStatus is the failure the middleware records for a handler that
// answered 429 or 5xx without calling Fail. It implements
// classify.StatusError, so classifiers see the status.
type handlerStatus struct {
	code int
}

func (e *handlerStatus) Error() string {
	return "httpmw: handler answered " + strconv.Itoa(e.code)
}

// HTTPStatusCode implements classify.StatusError.
func (e *handlerStatus) HTTPStatusCode() int { return e.code }

var errHandlerPanic = classify.WithReason(errors.New("httpmw: handler panicked"),
	classify.ClassTransient, classify.ReasonPanic, 0)

// settle records the handler's outcome:
//
//   - an error reported with Fail: l.Settle(err), whatever the status;
//   - nothing written and the client gone: a caller cancellation (released
//     with no cooldown, or gate.Options.Backoff.Canceled);
//   - 1xx (101), 2xx, 3xx, nothing written, or a hijacked connection:
//     success;
//   - 429, 503, 529 and other 5xx: a transient failure, see statusError;
//   - other 4xx: released with no cooldown and no attempt counted (the
//     request was wrong, not the job).
func (c *config) settle(rw *writer, r *http.Request, l *gate.Lease, st *state) {
	ctx := r.Context()
	st.mu.Lock()
	ferr := st.err
	st.mu.Unlock()
	switch {
	case ferr != nil:
		var ce *gate.CallError
		errors.As(l.Settle(ctx, ferr), &ce) // a failure settles as a *CallError
		c.report(r, ce.SettleErr)
		if !rw.wrote() {
			ref, h := c.settled(r, l, ce)
			c.respond(rw, r, ref, h)
		}
	case !rw.wrote() && ctx.Err() != nil:
		// The client went away: the gate decides (released, or
		// gate.Options.Backoff.Canceled).
		c.report(r, l.Fail(ctx, ctx.Err()))
	case rw.hijacked || rw.code < 400:
		c.report(r, l.Succeed(ctx))
	case rw.code == http.StatusTooManyRequests || rw.code >= 500:
		c.report(r, l.Fail(ctx, statusError(rw.code, rw.Header())))
	default:
		c.report(r, l.Release(ctx))
	}
}

// statusError is the failure recorded for a 429 or 5xx answer. 429, 503 and
// 529 mean the provider behind the handler is rate-limited or overloaded:
// they reach the gate's classifier as a response with that status and the
// handler's retry headers (classify.Default: transient, provider-wide, the
// handler's Retry-After as hint). Other 5xx are marked transient
// (upstream_5xx) with the handler's Retry-After or retry-after-ms as hint.
func statusError(code int, h http.Header) error {
	err := &handlerStatus{code: code}
	hints := http.Header{}
	for _, k := range [...]string{"Retry-After", "Retry-After-Ms", "Date"} {
		if v := h.Values(k); len(v) > 0 {
			hints[k] = v
		}
	}
	switch code {
	case http.StatusTooManyRequests, http.StatusServiceUnavailable, 529:
		return classify.WithHeader(err, hints)
	}
	hint, _ := classify.ParseRetryHint(hints, time.Now())
	return classify.WithReason(err, classify.ClassTransient, classify.ReasonUpstream5xx, hint)
}
