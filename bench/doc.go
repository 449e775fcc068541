// Command bench measures retrygate's gate head to head with bsm/redislock,
// go-redsync/redsync and hand-written SET NX locks (with and without a
// fence), and its HTTP middleware's refusals against a bare 429 handler,
// one Redis GET and go-chi/httprate over real loopback HTTP, against one
// redis-server it starts for the run, and writes a markdown report. It
// also storms a fake provider's rate limit through four Gates, each in a
// worker process (this binary, started again), sharing the default
// upstream (internal/testkit/limitstorm), and reports the share of calls
// that earned a 429, the goodput and the Redis round trips a finished
// job, each gate against each provider (issues 31 and 37).
//
//	go run . -out RESULTS.md   # the full run, about 17 minutes
//	go run . -quick            # a smoke test of the harness
//	go run . -scripts 1000     # where a success's Redis time goes, per script
package main
