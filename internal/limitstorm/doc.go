// Package limitstorm is the harness that measures how close gates sharing
// one upstream keep to a provider's rate limit: Gates (in this process, or
// spread over worker processes) share one upstream (gate.Options.Scope) and
// one Redis, each job calls go-openai through classify.Transport against an
// internal/llmfake provider that enforces a requests-per-minute limit as a
// token bucket and answers every call with its dialect's rate-limit headers
// (OpenAI's or Anthropic's). Jobs arrive at Config.Offer times the limit and
// each refused job is retried when gate.RetryAfter says.
//
// A Result counts what a user of a queue cares about: the share of upstream
// calls that earned a 429 (the provider's own count), the goodput (calls
// served ÷ the calls the limit allowed from the start of the storm to its
// last completion), and the jobs that never completed (Lost) or were marked
// Failed.
//
// The provider's bucket is drained when the storm starts, so the run
// measures the steady state at the limit, not a minute of a full bucket.
// Arrival times, prompt sizes and each call's answer time come from
// Config.Seed; what the goroutines and Redis make of them does not, so two
// runs of one seed agree closely, not exactly.
//
// A queue adapter's storm (asynq, River) sets Config.Through: Run hands
// it the Storm, whose jobs the queue's workers run under their own Gates,
// each making its call with Storm.Call.
//
// Worker processes are the running binary started again: a binary that
// runs storms with Config.Procs ≥ 2 calls RunWorker first thing (a test's
// TestMain, bench's main), which runs the worker when the process was
// started as one.
//
// It is a test and benchmark helper: nothing outside tests and bench
// imports it. Run is safe for concurrent use; storms run at once share the
// machine, and their measurements show it.
package limitstorm
