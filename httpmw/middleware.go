package httpmw

import (
	"context"
	"errors"
	"net/http"

	"github.com/retrygate/retrygate/gate"
)

// New returns middleware that runs the handler under the request's job lease
// and answers refused requests itself (see the package doc for the
// status-code contract). It panics, naming the option, when g is nil,
// opts.Job is nil or a header name is invalid.
func New(g *gate.Gate, opts Options) func(http.Handler) http.Handler {
	c := newConfig("New", g, opts)
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("httpmw: New: nil next handler")
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c.serve(next, w, r)
		})
	}
}

// job resolves the request's job key, answering 400 itself when there is
// none (500 for a mounting mistake). A StatusHandler refuses a key built
// from its own route. JobOf's request stops here, with the key.
func (c *config) job(w http.ResponseWriter, r *http.Request) (string, bool) {
	jr, ownRoute := r, false
	if c.status {
		jr = r.WithContext(context.WithValue(r.Context(), routeKeyUse{}, &ownRoute))
	}
	job, err := c.opts.Job(jr)
	switch {
	case err == nil && ownRoute:
		err = ErrStatusOwnRoute
	case err == nil && job == "":
		err = invalidJob("empty")
	}
	if p := probeOf(r); p != nil {
		p.reached, p.job, p.err = true, job, err
		if err != nil {
			p.job = ""
		}
		return "", false
	}
	if err != nil {
		c.onError(r, err)
		ref, h := c.invalidFor(err)
		c.respond(w, r, ref, h)
		return "", false
	}
	if c.opts.Exists != nil {
		switch ok, err := c.opts.Exists(r); {
		case err != nil:
			c.onError(r, err)
			c.respond(w, r, c.unavailable(err, c.opts.UnavailableRetryAfter), c.opts.Unavailable)
			return "", false
		case !ok:
			ref := c.invalid(http.StatusNotFound, errNoSuchJob)
			c.respond(w, r, ref, c.opts.InvalidJob)
			return "", false
		}
	}
	return job, true
}

// errNoSuchJob is the Refusal.Err of a job Options.Exists does not know.
var errNoSuchJob = errors.New("httpmw: Options.Exists: no such job")

func (c *config) serve(next http.Handler, w http.ResponseWriter, r *http.Request) {
	job, ok := c.job(w, r)
	if !ok {
		return
	}

	ctx, ok := c.caller(w, r)
	if !ok {
		return
	}
	l, err := c.acquire(ctx, w, r, job)
	if err != nil {
		c.refuse(w, r, err)
		return
	}

	// Where Fail leaves the handler's failure: made only for a run, so a
	// refusal allocates nothing for it.
	st := &state{}

	rw := &writer{ResponseWriter: w}
	panicked := true
	defer func() {
		if panicked {
			// Settle without recovering, so the panic unwinds on with its
			// stack for chi's Recoverer or net/http.
			c.report(r, l.Fail(r.Context(), errHandlerPanic))
		}
	}()
	next.ServeHTTP(rw, r.WithContext(context.WithValue(l.Context(), stateKey{}, st)))
	panicked = false
	c.settle(rw, r, l, st)
}

// refuse answers a request the gate refused.
func (c *config) refuse(w http.ResponseWriter, r *http.Request, err error) {
	b := blockedOf(err)
	if b != nil && b.State == gate.Done && c.opts.Replay != nil {
		c.opts.Replay.ServeHTTP(w, r)
		return
	}
	if b == nil && r.Context().Err() == nil {
		// Redis or key errors: the client only sees 503/400. A request
		// whose own context ended (the client left, a timeout's
		// deadline) is the caller's, not an error of the app.
		c.onError(r, err)
	}
	ref, h := c.refusal(r, err, b)
	c.respond(w, r, ref, h)
}

// report passes a settle error to OnError.
func (c *config) report(r *http.Request, err error) {
	if err != nil {
		c.onError(r, err)
	}
}

// blockedOf returns the refusal err is or wraps, nil for another error.
// Acquire returns a *gate.BlockedError as is: the type assertion answers
// every refusal without errors.As's allocation.
func blockedOf(err error) *gate.BlockedError {
	if b, ok := err.(*gate.BlockedError); ok {
		return b
	}
	var b *gate.BlockedError
	errors.As(err, &b)
	return b
}
