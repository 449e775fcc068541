// Command bench measures retrygate's gate head to head with bsm/redislock,
// go-redsync/redsync and a hand-written SET NX lock, against one
// redis-server it starts for the run, and writes a markdown report.
//
//	go run . -out RESULTS.md   # the full run, about two minutes
//	go run . -quick            # a smoke test of the harness
package main
