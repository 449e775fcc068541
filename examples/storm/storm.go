package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

// errModel is the upstream's failure in every scenario: the model call
// fails the same way on every retry (an outage, a bad prompt).
var errModel = classify.Transient(errors.New("model call failed"), 0)

// upstream counts the calls that reach the model.
type upstream struct{ calls atomic.Int64 }

func (u *upstream) call() error {
	u.calls.Add(1)
	return errModel
}

// run plays every scenario with both approaches, prints a markdown table to
// w and returns the measurements.
func run(w io.Writer, scenarios []scenario) ([]result, error) {
	ctx := context.Background()
	var out []result
	for _, s := range scenarios {
		start := time.Now()
		r := result{Scenario: s, Retries: int64(s.Jobs * s.retries())}
		var err error
		if r.FinallyCalls, err = playFinally(ctx, s); err != nil {
			return nil, fmt.Errorf("%s, finally lock: %w", s.Name, err)
		}
		if r.GateCalls, r.GateRefused, err = playGate(ctx, s); err != nil {
			return nil, fmt.Errorf("%s, retrygate: %w", s.Name, err)
		}
		r.Took = time.Since(start)
		out = append(out, r)
	}
	printTable(w, out)
	return out, nil
}

// instances starts an embedded Redis and one client per app instance.
func instances(n int) (*miniredis.Miniredis, []*redis.Client, func(), error) {
	m := miniredis.NewMiniRedis()
	if err := m.Start(); err != nil {
		return nil, nil, nil, err
	}
	clients := make([]*redis.Client, n)
	for i := range clients {
		clients[i] = redis.NewClient(&redis.Options{Addr: m.Addr(), PoolSize: 32})
	}
	return m, clients, func() {
		for _, c := range clients {
			_ = c.Close()
		}
		m.Close()
	}, nil
}

// storm sends every job's retry once per tick, all jobs at once, and moves
// the Redis clock forward by s.Every between ticks: the TTLs and the time
// TIME reports, which the gate writes its cooldowns' ends in.
func storm(m *miniredis.Miniredis, s scenario, retry func(job, instance int) error) error {
	now := time.Now()
	m.SetTime(now)
	for tick := 0; tick < s.retries(); tick++ {
		var wg sync.WaitGroup
		errs := make(chan error, s.Jobs)
		for job := 0; job < s.Jobs; job++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := retry(job, job%s.Instances); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		m.FastForward(s.Every)
		now = now.Add(s.Every)
		m.SetTime(now)
	}
	return nil
}

// playFinally is the usual distributed lock: SET NX with a TTL before the
// call, DEL in a finally (Go's defer) after it. A retry that finds the lock
// taken gives up; one that finds it free calls the model.
func playFinally(ctx context.Context, s scenario) (int64, error) {
	m, clients, stop, err := instances(s.Instances)
	if err != nil {
		return 0, err
	}
	defer stop()
	var up upstream
	err = storm(m, s, func(job, inst int) error {
		rdb := clients[inst]
		key := "finally:lock:" + strconv.Itoa(job)
		ok, err := rdb.SetNX(ctx, key, "owner", time.Minute).Result()
		if err != nil || !ok {
			return err
		}
		defer rdb.Del(ctx, key) // finally: released whatever the outcome
		_ = up.call()
		return nil
	})
	return up.calls.Load(), err
}

// playGate runs the same retries through one gate per instance.
func playGate(ctx context.Context, s scenario) (calls, refused int64, err error) {
	m, clients, stop, err := instances(s.Instances)
	if err != nil {
		return 0, 0, err
	}
	defer stop()
	gates := make([]*gate.Gate, len(clients))
	for i, c := range clients {
		if gates[i], err = gate.New(c, s.Gate); err != nil {
			return 0, 0, err
		}
	}
	var up upstream
	var refusals atomic.Int64
	err = storm(m, s, func(job, inst int) error {
		err := gates[inst].Do(ctx, "job-"+strconv.Itoa(job), func(context.Context, *gate.Lease) error {
			return up.call()
		})
		var blocked *gate.BlockedError
		switch {
		case errors.As(err, &blocked):
			refusals.Add(1)
		case err != nil && !errors.Is(err, errModel):
			return err // Redis trouble: the measurement would be wrong
		}
		return nil
	})
	return up.calls.Load(), refusals.Load(), err
}

// printTable writes the results as a markdown table.
func printTable(w io.Writer, rs []result) {
	fmt.Fprintln(w, "| scenario | retries sent | model calls, lock released in `finally` | model calls, retrygate |")
	fmt.Fprintln(w, "|---|--:|--:|--:|")
	var took time.Duration
	for _, r := range rs {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.Scenario.Name, thousands(r.Retries), thousands(r.FinallyCalls), thousands(r.GateCalls))
		took += r.Took
	}
	fmt.Fprintf(w, "\nretrygate with its default cooldown (5 min after a first failure); simulated time on an embedded Redis, played in %.1f s.\n",
		took.Seconds())
}

// thousands formats n with comma separators: 20000 → "20,000".
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
