// Command server is retrygate's demo: a document-review service whose
// POST /documents/{id}/evaluate calls an LLM through the gate (httpmw), with
// a page that shows each job's state, a live "Retry available in 0:08"
// countdown, failed jobs that won't be retried, the upstream-wide pause, and
// how many model calls were made versus refused.
//
// With nothing configured it runs on an embedded Redis and a built-in fake
// OpenAI-compatible model whose behaviour per document shows every path
// (success, rate limit with retry-after-ms, 503, context too long, bad
// output until MaxAttempts, a slow call that renews its lease, and a
// provider-wide rate limit). REDIS_URL (redis:// or rediss://) selects a
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
