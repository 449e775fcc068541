// Package httpmw gates HTTP retry endpoints, such as
// POST /documents/{id}/evaluate, with a gate.Gate: one job per request key,
// and a user who clicks again while the job cools down gets an answer at
// once, without the model being called, saying how long to wait in seconds
// and in words.
//
// New returns plain func(http.Handler) http.Handler middleware. Mount it on
// a chi route with r.With, where the URL parameters are known, and give
// the route's StatusHandler the same Options, so both compute one key:
//
//	opts := httpmw.Options{
//		Job:       httpmw.URLParamAs("/documents/{id}/evaluate", "id"),
//		StatusURL: httpmw.SiblingURL("retry-status"),
//	}
//	r.Route("/documents/{id}", func(r chi.Router) {
//		r.With(httpmw.New(g, opts)).Post("/evaluate", evaluate)
//		r.Get("/retry-status", httpmw.StatusHandler(g, opts))
//	})
//
// URLParamAs names the job by the retry route's pattern wherever it runs;
// URLParam would name it by the route it runs on, which on the status
// route is a job no retry has. A StatusHandler answers such a key with a
// 500 (ErrStatusOwnRoute to OnError), never a "ready" that is not true,
// and JobOf checks in a test that the two routes name the same job.
//
// # Status-code contract
//
// A request whose job may not run now is answered by the middleware with
// Content-Type application/problem+json (RFC 9457: type, title, status,
// detail, plus the extension members below) and Cache-Control: no-store:
//
//	state                     status  Retry-After               extension members
//	cooling down              429     ceil(cooldown left), ≥ 1  job_state "cooling_down", retry_after_seconds, retry_at, attempts, reason
//	running                   409     ceil(call estimate), ≥ 1  job_state "running", retry_after_seconds, retry_at, status_url
//	                                  (past the estimate: its overrun, so polls back off 1, 2, 4 s… to the lease)
//	failed permanently        422     none                      job_state "failed", reason, attempts
//	done (gate Retention.Done)       409     none                      job_state "done"; or Options.Replay answers
//	every upstream refusing   503     ceil(soonest recovery)    job_state "upstream_cooling", retry_after_seconds, retry_at, reason, upstreams
//	failed, a fallback ready  503     none                      job_state "ready", reason (the next call runs on the next upstream)
//	gate unavailable          503     UnavailableRetryAfter     job_state "unknown", retry_after_seconds, retry_at
//	no valid job key          400     none                      (no job_state)
//	unknown to Options.Exists 404     none                      (no job_state; Redis not touched)
//	ErrNotRouted (mounting)   500     none                      (no job_state)
//
// A duplicate request that sends Prefer: wait=N (RFC 7240) while its job
// runs is not refused at once: it waits, at most N seconds capped by
// Options.MaxWait (default 10 s), for the running call to settle (woken by
// Redis pub/sub, see gate.AcquireWait), and its response carries
// Preference-Applied: wait=<the seconds it could wait> (also when its job
// was not running: the preference was applied):
//
//	after the wait            answer
//	job free (released)       the handler runs: the request's own call
//	done (succeeded)          Options.Replay (the first call's result), else 409 done,
//	                          whatever the gate's Retention.Done: a waiter never runs a job twice
//	cooling down, failed...   the row above, with the true Retry-After
//	still running             409 running, Retry-After = when its call should end (gate.Acquire)
//
// Without the header, or with an invalid one (negative, not digits, not
// the first wait preference, Prefer fields over 1 KB together), nothing
// waits unless the gate's Options.Wait says so; MaxWait < 0 ignores the
// header. The scan stops at the first wait and allocates nothing, so a
// giant header costs no more than none.
//
// With Options.StatusURL set, status_url is written in the first six rows
// (the gate's answers). Members that do not apply are left out: attempts
// when no failure was counted, reason when none is known. detail is the human sentence from
// Options.RetryIn, e.g. "Retry available in 4 min 12 s." (see FormatWait for
// the rounding). reason is the gate's classification code, never upstream
// text; no Redis error, upstream error or stack ever reaches a body (pass
// Options.OnError to log them). Options.Headers renames or turns off
// Retry-After and turns on the IETF RateLimit header
// ("retry";r=0;t=<seconds>). Teams with their own error format set
// Options.Blocked, Unavailable and InvalidJob.
//
// A gate with upstreams (gate.Options.Upstream, then Fallbacks) runs a job on
// the first that takes calls, so a cooling primary costs the user nothing
// while a backup is ready. Only when every upstream refuses is the request
// refused with upstream_cooling, whose upstreams member lists each in
// order (State: its name, "cooling_down" or "paused", probing, reason,
// retry_after_seconds); StatusHandler's body names the upstream the next
// call would use (upstream) and lists the same (upstreams). The names are
// the gate's upstream names: name upstreams for what a user may see. A call
// whose upstream failed provider-wide while another is ready is answered
// 503 with job_state "ready" and no Retry-After: the job is not cooling,
// and a retry now runs on the next upstream. The middleware never makes
// that second call itself (a request body is read once); a client that
// wants one click to reach the backup retries once on this answer.
//
// # Outcome
//
// The handler runs under the job's lease (Lease gives it the fence token;
// its request context is cancelled if the lease is lost). When it returns:
//
//   - an error reported with Fail wins and is judged by the gate's
//     classifier; if the handler wrote nothing, the middleware answers with
//     the state just recorded (429 cooling down, 422 failed);
//   - 2xx, 3xx, a hijacked connection, or nothing written: success;
//   - 429 and 5xx: a transient failure; a Retry-After the handler set is the
//     cooldown's hint, and 429, 503 and 529 are provider-wide under
//     classify.Default (they cool the gate's upstream);
//   - other 4xx: released, no cooldown and no attempt counted (the request
//     was wrong, not the job);
//   - nothing written and the client gone: released, as gate.Do does for a
//     cancelled caller;
//   - a panic: a transient failure, then the panic goes on (chi's Recoverer
//     still sees it).
//
// The response writer the handler gets keeps http.Flusher (server-sent
// events from a streaming call flush as they come), http.Hijacker, and
// Unwrap for http.ResponseController.
//
// # Live status
//
// StatusHandler answers a request with Accept: text/event-stream with
// server-sent events instead of one JSON body: the job's RetryStatus at
// once and after every change made by any process (a settle, a reset from
// the CLI, the upstream cooling or recovering, a cooldown's end), pushed
// through Redis pub/sub within a round trip (gate.Watch); a comment line
// every 15 s; ids that continue from Last-Event-ID. Streams are shared
// fairly: at most Options.MaxStreams per handler and MaxStreamsPerClient
// per client (its remote IP, or StreamClient behind a proxy; 503 beyond);
// each event or heartbeat has 10 s to reach the client's socket, and a
// stream ends after 5 min, when the client's EventSource reconnects by
// itself (retry: 1000, Last-Event-ID), so a client that stops reading
// holds its place at most 5 min 10 s. Streams of your own (many jobs on
// one page) share with a Streams. A page's countdown needs no polling,
// and its button comes back the moment the job may run.
// http.Server.Shutdown waits for open streams: end them with the request
// context (the demo in examples/server cancels streams on shutdown).
//
// # A place in line
//
// When an upstream's budget cannot serve every caller, the gate's line
// orders them: class first, then the tenants' fair shares, then arrival
// (gate.WithPriority, gate.WithTenant). Options.Priority and
// Options.Tenant read them from the request (from what you trust: the
// route, the authenticated key; URLParamValue for a tenant in the URL),
// Options.TenantWeight a tenant's share. A tenant over MaxTenantLen
// bytes, not UTF-8 or containing a control character, and an error of
// either function, is the 400 problem (ErrNotRouted the 500), the cause
// to OnError. A request with Prefer: wait=N waits for its turn as for a
// running job, at most N seconds and MaxWait. One whose turn cannot come
// in that time is refused at once with the place it had and the
// expected wait: the extension member ahead (the callers ahead of it),
// retry_after_seconds and Retry-After the expected wait, and a detail
// such as "3 callers are ahead of this one in line. Retry available in
// 4 s.". While a job's call waits in line, StatusHandler's RetryStatus
// (JSON and each event of the stream) carries in_line, ahead, the
// expected wait as retry_after_seconds and the message "In line: 3
// ahead, about 4 s." ("In line: next, ..." first in line).
//
// # Job keys
//
// URLParam keys a job by the chi route pattern and a URL parameter, decoded
// once, so every spelling of an id is one job and two routes never share
// one; URLParamAs does the same with a pattern given once, for a retry
// route and its status route; PerTenant adds a tenant or user, read from
// the URL with URLParamValue, which decodes it the same way. Two spellings
// are one job exactly when they percent-decode, once, to the same bytes:
// /documents/%61bc and /documents/abc are one, and so are a%2Fb and
// a%2fb; %2561 is "%61", not "a". Nothing else is folded: case, "+"
// (a plus, not a space), and Unicode forms ("café" in NFC and in NFD are
// two jobs; normalize in your JobFunc if your ids need it). Keys are
// joined so that distinct inputs never collide, and the gate stores any
// byte safely. A request naming no job, an empty parameter or a key over
// 1024 bytes (the gate's limit) gets 400; an id Options.Exists does not know gets
// 404 before Redis is asked, so ids a client makes up cost Redis nothing
// (give every public route one). The middleware never resets, releases or
// shortens a cooldown: only a handler run it let through settles the job.
//
// The middleware and StatusHandler are safe for concurrent use.
package httpmw
