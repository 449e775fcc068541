// Command server is retrygate's demo: a document-review service whose
// POST /documents/{id}/evaluate calls an LLM through the gate (httpmw), with
// a page that shows each job's state: a button that turns into a live
// "Retry in 0:08" countdown while the job cools down, the last failure once
// it may run again, failed jobs that won't be retried, a success kept
// done for a few seconds (the button says until when), the upstream-wide
// cooldown or pause with the time of its next probe, and how many model
// calls were made versus refused, updated as each refusal happens. The
// page learns of changes from one event stream (GET /api/events); where
// the stream is cut or silent (a proxy that buffers it, a blocked
// request), it reads GET /api/status instead, on a schedule that backs off
// to every 8 s.
//
// With nothing configured it runs on an embedded Redis and a built-in fake
// OpenAI-compatible model whose behaviour per document shows every path
// (success, rate limit with retry-after-ms, 503, context too long, bad
// output until MaxAttempts, a slow call that renews its lease, a
// provider-wide rate limit and an empty credit balance). A second fake
// model behind another key is the gate's fallback (Options.UpstreamPolicy.Fallbacks):
// while the first key is rate-limited or out of credits, jobs run on it and
// their results say "via backup" (-backup=false: one upstream, and every
// job waits for it). With -budget N (and -backup=false) each fake key
// allows N requests at once and one more every -budget-refill (2 s),
// reported in OpenAI's x-ratelimit headers: once they run short, a click
// takes a place in the gate's line (a click is PriorityInteractive) and
// its card shows "In line: 3 ahead, about 12 s" with a countdown to its
// turn, then runs. REDIS_URL (redis:// or rediss://) selects a
// real Redis; OPENAI_API_KEY (with OPENAI_BASE_URL and OPENAI_MODEL) the
// real API. Run with -h for the flags.
//
// POST /documents/{id}/reset (the page's Reset button on a failed
// document) clears a failed mark or cooldown for anyone who asks: fine on a
// demo that listens on 127.0.0.1, not in a service. A user who can reset a
// job can retry it as often as they like, which is the retry storm the gate
// stops. There, reset is an operator's action: the retrygate CLI, or a route
// behind your own authorisation.
//
//	go run ./examples/server
package main
