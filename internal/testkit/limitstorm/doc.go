// Package limitstorm is the harness that measures how close gates sharing
// one upstream keep to a provider's rate limit: Gates (in this process, or
// spread over worker processes) share one upstream (gate.Options.Upstream) and
// one Redis, each job calls go-openai through classify/goopenai's Transport
// against an internal/testkit/llmfake provider that enforces a requests-per-minute limit (and,
// with Config.TPM, a tokens-per-minute limit that binds first) as token
// buckets and answers every call with its dialect's rate-limit headers
// (OpenAI's or Anthropic's). Jobs arrive at Config.Offer times the limit and
// each refused job is retried when gate.RetryAfter says.
//
// A Result counts what a user of a queue cares about: the share of upstream
// calls that earned a 429 (the provider's own count), the goodput (jobs
// completed, or their tokens where tokens bind, ÷ the calls or tokens the
// limit allowed from the start of the storm to its last completion), and
// the jobs that never completed (Lost) or were marked Failed.
//
// The provider's buckets are drained when the storm starts, so the run
// measures the steady state at the limit, not a minute of a full bucket.
// Arrival times, prompt sizes and each call's answer time come from
// Config.Seed; how the goroutines, Redis and the machine's load time them
// does not, so two runs of one seed meet the same jobs, and their 429s
// and goodput differ by what timing moves (a few points of goodput on a
// quiet machine).
//
// A queue adapter's storm (asynq, River) sets Config.Through: Run hands
// it the Storm, whose jobs the queue's workers run under their own Gates,
// each making its call with Storm.Call.
//
// Worker processes are the running binary started again: a binary that
// runs storms with Config.Procs ≥ 2 calls RunWorker first thing, in its
// TestMain or main, which runs the worker when the process was started as
// one.
//
// With LIMITSTORM_TRACE set, Run prints each storm's answers to stderr,
// served and 429s per 100 ms (Tracing).
//
// It is a test and benchmark helper: nothing outside tests and bench
// imports it. Run is safe for concurrent use; storms run at once share the
// machine, and their measurements show it.
package limitstorm
