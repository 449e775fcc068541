package limitstorm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

// Run runs one storm: it starts the provider, drains its bucket, runs
// the jobs (in this process, in Config.Procs worker processes, or through
// Config.Through), and returns what they came to. The error is for a
// storm that could not run (a bad Config, a worker that did not start);
// what the jobs met is in the Result.
func Run(ctx context.Context, c Config) (Result, error) {
	if os.Getenv(workerEnv) != "" {
		return Result{}, errors.New("limitstorm: Run in a worker process: its binary does not call RunWorker first")
	}
	c, err := c.withDefaults()
	if err != nil {
		return Result{}, err
	}
	up, err := newUpstream(c)
	if err != nil {
		return Result{}, err
	}
	defer up.close()

	var out Outcome
	switch {
	case c.Through != nil:
		s := newStorm(c, up.url())
		defer s.close()
		up.drain()
		s.begin(c, up.drained.Add(c.firstFits(s.Jobs[0])))
		out = c.Through(ctx, s)
		out.Tokens = s.tokens.Load()
	case c.procs() == 1:
		s, err := newShare(c, up.url(), 0)
		if err != nil {
			return Result{}, err
		}
		defer s.close()
		up.drain()
		start := up.drained.Add(c.firstFits(s.storm.Jobs[0]))
		defer faults(c, start, nil)()
		out = s.run(ctx, start)
	default:
		ws, err := startWorkers(ctx, c, up.url())
		if err != nil {
			return Result{}, err
		}
		up.drain()
		if out, err = ws.run(c, up.drained.Add(c.firstFits(schedule(c)[0]))); err != nil {
			return Result{}, fmt.Errorf("limitstorm: %w", err)
		}
	}
	return result(c, up, out), nil
}

func result(c Config, up *upstream, out Outcome) Result {
	st := up.stats()
	r := Result{
		Jobs: len(schedule(c)) - out.killed, Outcome: out, Killed: out.killed,
		Served: st.Served, Refused: st.Refused, Refill: c.Window / time.Duration(c.RPM),
	}
	r.Bursts, r.LargestBurst, r.LargestAt = up.bursts()
	up.printTrace(os.Stderr)
	// A lost job waited to the end: the storm lasted the whole run.
	switch {
	case out.Lost > 0:
		r.Elapsed = c.Arrivals + c.Drain
	case !out.Last.IsZero():
		r.Elapsed = out.Last.Sub(up.drained)
	}
	r.Allowed = c.allowed(r.Elapsed)
	r.AllowedTokens = float64(c.tpm()) * c.windows(r.Elapsed)
	return r
}
