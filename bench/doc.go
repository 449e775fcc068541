// Command bench measures retrygate's gate head to head with bsm/redislock,
// go-redsync/redsync and hand-written SET NX locks (with and without a
// fence), and its HTTP middleware's refusals against a bare 429 handler,
// one Redis GET and go-chi/httprate over real loopback HTTP, against one
// redis-server it starts for the run, and writes a markdown report. It
// also storms a fake provider's rate limit through four Gates sharing one
// upstream (internal/limitstorm) and reports the share of calls that
// earned a 429 and the goodput, each gate against each provider, seed by
// seed (issue 31).
//
//	go run . -out RESULTS.md   # the full run, about three and a half minutes
//	go run . -quick            # a smoke test of the harness
package main
