package httpmw

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/retrygate/retrygate/gate"
)

// RetryStatus is the body StatusHandler answers with, for a page that shows
// a countdown.
type RetryStatus struct {
	// JobState is a gate.State name: "ready", "running", "cooling_down",
	// "failed", "done" or "upstream_cooling".
	JobState string `json:"job_state"`
	// RetryAfterSeconds is the whole seconds, rounded up, until a retry
	// may run; 0 when it may run now or waiting does not help.
	RetryAfterSeconds int64 `json:"retry_after_seconds"`
	// RetryAt is when the wait ends (RFC 3339); omitted without a wait.
	RetryAt string `json:"retry_at,omitempty"`
	// Attempts counts failures since the last success.
	Attempts int `json:"attempts"`
	// InLine is set while the job's call waits in its upstream's line (in
	// any process) for the budget to serve it; Ahead is then how many
	// callers are ahead of it (gate.Status.Ahead), RetryAfterSeconds the
	// expected wait for its turn, and Message says both, e.g. "In line: 3
	// ahead, about 4 s." ("next" for none ahead). Both omitted when it
	// does not wait.
	InLine bool `json:"in_line,omitempty"`
	Ahead  int  `json:"ahead,omitempty"`
	// Reason is the classification code behind the state; never upstream
	// text.
	Reason string `json:"reason,omitempty"`
	// Message is the human sentence, e.g. "Retry available in 45 s.".
	Message string `json:"message"`
	// Upstream names the upstream the job's next call would use (the
	// gate's Upstream or a Fallback: the first ready one, else the one that
	// recovers soonest); omitted with gate.UpstreamPolicy.Off.
	Upstream string `json:"upstream,omitempty"`
	// Upstreams holds each of the gate's upstreams in order; omitted
	// without an Upstream.
	Upstreams []State `json:"upstreams,omitempty"`
}

// State is one upstream's state, in a RetryStatus and in the
// problem of a call every upstream refused. Upstream is the upstream's name
// as the gate's Options give it: name upstreams for what a user may see.
type State struct {
	Upstream string `json:"upstream"`
	// State is "ready", "cooling_down" or "paused" (gate.State).
	State string `json:"state"`
	// Probing is set while one call tests the upstream after its wait:
	// the others are refused until it answers.
	Probing bool `json:"probing,omitempty"`
	// Reason is the classification code that cooled or paused it.
	Reason string `json:"reason,omitempty"`
	// RetryAfterSeconds is the whole seconds, rounded up, until it takes
	// calls again; omitted when open, or when its end is not known (a
	// pause without a TTL, set by hand).
	RetryAfterSeconds int64 `json:"retry_after_seconds,omitempty"`
}

// upstreamStates is ups as a client may see them; nil for none.
func upstreamStates(ups []gate.UpstreamStatus) []State {
	if len(ups) == 0 {
		return nil
	}
	out := make([]State, len(ups))
	for i, u := range ups {
		out[i] = State{Upstream: u.Upstream, State: u.State.String(), Probing: u.Probing, Reason: safeReason(u.Reason)}
		if (u.State == gate.CoolingDown || u.State == gate.Paused || u.Probing) && u.RetryAfter > 0 {
			out[i].RetryAfterSeconds = retrySeconds(u.RetryAfter)
		}
	}
	return out
}

// StatusHandler returns a handler (an http.HandlerFunc, so chi's r.Get takes
// it) that answers GET requests for a job's retry status with 200 and a
// RetryStatus JSON body, read with g.Status (it never changes the job).
// While every upstream of the gate cools down or is paused the state is
// "upstream_cooling" (a failed or done job keeps its own state). A request
// naming no valid job gets the 400 problem, and a Redis error the 503
// problem with job_state "unknown" and no internals.
//
// A request with Accept: text/event-stream gets a stream of server-sent
// events instead (a page's countdown without polling): an event "status"
// whose data is the RetryStatus JSON, sent at once and after each change
// of the job from any process (a settle, a reset from the CLI, an upstream
// change, a cooldown's end; see gate.Watch; while its call waits in its
// upstream's line, its place, read again every second), a comment line every 15 s
// when idle, event ids that count up and continue from Last-Event-ID on a
// reconnection (which gets the current state at once), and at most
// Options.MaxStreams streams at once and MaxStreamsPerClient per client
// (503 beyond); a stream ends after 5 min and the client reconnects.
//
// opts.Job must compute the key the middleware computes: pass it the
// Options given to New, whose Job is URLParamAs with the retry route's
// pattern. A key built from the status route's own pattern (URLParam) is
// answered 500 and passed to OnError as ErrStatusOwnRoute, never "ready";
// JobOf checks the two routes agree in a test. Of the other options it
// uses Exists, MaxStreams, MaxStreamsPerClient, StreamClient, RetryIn, ProblemTypeBase, Headers,
// UnavailableRetryAfter, Unavailable, InvalidJob and OnError.
// StatusHandler panics when g or opts.Job is nil.
func StatusHandler(g *gate.Gate, opts Options) http.HandlerFunc {
	c := newConfig("StatusHandler", g, opts)
	c.status = true
	return c.serveStatus
}

func (c *config) serveStatus(w http.ResponseWriter, r *http.Request) {
	job, ok := c.job(w, r)
	if !ok {
		return
	}
	if c.streams != nil && wantsEvents(r) {
		c.serveEvents(w, r, job)
		return
	}
	st, err := c.g.Status(r.Context(), job)
	if err != nil {
		c.statusError(w, r, err)
		return
	}
	body, _ := json.Marshal(RetryStatusOf(st, c.opts.RetryIn))
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(body, '\n'))
}

// statusError answers a failed status read: 400 for an invalid job, else
// the 503 problem without internals.
func (c *config) statusError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, gate.ErrInvalidJob) {
		ref, h := c.invalidFor(err)
		c.respond(w, r, ref, h)
		return
	}
	c.onError(r, err)
	c.respond(w, r, c.unavailable(err, c.opts.UnavailableRetryAfter), c.opts.Unavailable)
}

// RetryStatusOf is the body StatusHandler answers for st, for a handler
// that reports many jobs at once (a page of documents watching each with
// gate.Watch over one stream: browsers open at most six HTTP/1.1
// connections per host). retryIn writes the message; nil means the
// default, as for Options.RetryIn. While every upstream of the gate cools
// down or is paused the state is "upstream_cooling" (a failed or done job
// keeps its own).
func RetryStatusOf(st gate.Status, retryIn func(time.Duration) string) RetryStatus {
	if retryIn == nil {
		retryIn = defaultRetryIn
	}
	out := RetryStatus{JobState: st.State.String(), Attempts: st.Attempts, Reason: st.Reason,
		Upstream: st.Upstream.Upstream, Upstreams: upstreamStates(st.Upstreams)}
	wait := st.RetryAfter
	if up := st.Upstream; (up.State == gate.CoolingDown || up.State == gate.Paused) && st.State != gate.Failed && st.State != gate.Done {
		out.JobState, out.Reason = gate.UpstreamCooling.String(), up.Reason
		wait = max(wait, up.RetryAfter)
	}
	out.Reason = safeReason(out.Reason)
	switch {
	case st.State == gate.Failed:
		out.Message = "This job failed and will not be retried automatically."
	case st.State == gate.Done:
		out.Message = "This job is already done."
	case st.InLine:
		out.InLine, out.Ahead = true, st.Ahead
		out.Message = "In line: next"
		if st.Ahead > 0 {
			out.Message = "In line: " + strconv.Itoa(st.Ahead) + " ahead"
		}
		if wait > 0 {
			out.Message += ", about " + FormatWait(wait)
		}
		out.Message += "."
	default:
		out.Message = retryIn(wait)
	}
	if wait > 0 && st.State != gate.Failed && st.State != gate.Done {
		out.RetryAfterSeconds = retrySeconds(wait)
		at := time.Now().Add(wait)
		if t := at.Truncate(time.Second); t.Before(at) {
			at = t.Add(time.Second)
		}
		out.RetryAt = at.UTC().Format(time.RFC3339)
	}
	return out
}
