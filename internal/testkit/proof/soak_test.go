package proof_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/faultproxy"
	"github.com/retrygate/retrygate/internal/testkit/proof"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// soakDuration is 5s, 1.5s with -short, or $RETRYGATE_SOAK (a Go
// duration) for a longer local run.
func soakDuration(t *testing.T) time.Duration {
	if s := os.Getenv("RETRYGATE_SOAK"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("RETRYGATE_SOAK: %v", err)
		}
		return d
	}
	if testing.Short() {
		return 1500 * time.Millisecond
	}
	return 5 * time.Second
}

// TestSoak runs 8 workers (two per gate, as two goroutines of one process
// share a gate) issuing random calls, statuses and resets on a few jobs
// through a proxy that randomly adds latency, blackholes and resets
// connections, then checks the invariants over every execution (see
// history.check), that fn only ever saw its own job Running, and that
// every key the gate wrote carries a TTL.
func TestSoak(t *testing.T) {
	srv := redistest.Server(t)
	p := faultproxy.New(t, srv.Addr())
	o := gate.Options{
		Lease:    120 * time.Millisecond,
		Cooldown: 40 * time.Millisecond,
		Backoff:  gate.Backoff{MaxAttempts: 5, Max: 150 * time.Millisecond, Jitter: 0.1},
		// history.check reads them
		Retention: gate.Retention{Failed: 150 * time.Millisecond, Attempts: time.Second},
		Redis:     gate.RedisPolicy{Timeout: 300 * time.Millisecond},
	}
	const (
		gates         = 4
		workersPerGat = 2
		jobs          = 4
	)
	o.Prefix = redistest.UniqueKey(t)
	gs := make([]*gate.Gate, gates)
	for i := range gs {
		gs[i] = newGate(t, faultClient(t, p.Addr(), 150*time.Millisecond, 1), o)
	}

	var (
		h        history
		store    proof.FenceStore
		wg       sync.WaitGroup
		mu       sync.Mutex
		opCounts = map[string]int{}
	)
	count := func(op string) { mu.Lock(); opCounts[op]++; mu.Unlock() }
	ctx, stop := context.WithTimeout(context.Background(), soakDuration(t))
	defer stop()

	// Chaos: every 50ms pick a network condition.
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() { p.Blackhole(false); p.SetLatency(0) }()
		rng := rand.New(rand.NewPCG(rand.Uint64(), 1))
		for ctx.Err() == nil {
			p.Blackhole(false)
			switch r := rng.IntN(100); {
			case r < 40:
				p.SetLatency(0)
			case r < 80:
				p.SetLatency(time.Duration(1+rng.IntN(15)) * time.Millisecond)
			case r < 90:
				p.SetLatency(time.Duration(60+rng.IntN(60)) * time.Millisecond) // renewals time out
				count("chaos:slow")
			case r < 95:
				p.Blackhole(true)
				count("chaos:blackhole")
			default:
				p.ResetAll()
				count("chaos:reset")
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()

	for w := range gates * workersPerGat {
		g := gs[w/workersPerGat]
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(rand.Uint64(), uint64(w)))
			bg := context.Background()
			for ctx.Err() == nil {
				job := "job-" + strconv.Itoa(rng.IntN(jobs))
				switch r := rng.IntN(100); {
				case r < 85:
					hold := time.Duration(rng.IntN(40)) * time.Millisecond
					if rng.IntN(10) == 0 {
						hold = time.Duration(100+rng.IntN(150)) * time.Millisecond // past Lease/3, maybe past Lease
					}
					out := succeed
					if r := rng.IntN(10); r < 3 {
						out = failTransient
					} else if r == 3 {
						out = failPermanent
					}
					err := runChecked(bg, t, &h, &store, g, w, job, hold, out)
					switch {
					case err == nil:
						count("ran")
					case errors.Is(err, gate.ErrUnavailable):
						count("unavailable")
					default:
						var b *gate.BlockedError
						if errors.As(err, &b) {
							count("refused:" + b.State.String())
						} else {
							count("ran")
						}
					}
				case r < 99:
					if _, err := g.Status(bg, job); err != nil && !errors.Is(err, gate.ErrUnavailable) {
						t.Errorf("Status: %v", err)
					}
					count("status")
				default:
					s := span{job: job, call: time.Now()}
					err := g.Reset(bg, job)
					s.ret = time.Now()
					if err != nil {
						// Given up on, it may still land: the proxy forwards
						// a chunk it held until it sees the client close the
						// connection, which a loaded machine delays.
						s.ret = s.ret.Add(slack)
					}
					h.reset(s)
					if err != nil && !errors.Is(err, gate.ErrInFlight) && !errors.Is(err, gate.ErrUnavailable) {
						t.Errorf("Reset: %v", err)
					}
					count("reset")
				}
				time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
			}
		}()
	}
	wg.Wait()

	st := h.check(t, o)
	t.Logf("soak: ops %v", opCounts)
	t.Logf("soak: %d executions, %d overlaps (%d stale writes rejected, store rejected %d in all), %d cooldowns, %d failed marks, %d settles not recorded, %d runs that took the job before a failure's settle was answered, %d that saw its write after their lease ended; shortest wait after a cooldown %v",
		st.execs, st.overlaps, st.staleRejected, store.Rejected(), st.cooldowns, st.failedMarks, st.unrecorded, st.settledLate, st.olderShown, st.minCooldownGap)
	if st.execs < 50 || st.cooldowns == 0 || st.failedMarks == 0 || opCounts["refused:cooling_down"] == 0 {
		t.Errorf("the soak exercised too little: %+v, ops %v", st, opCounts)
	}

	// Invariant 5: every key the gate wrote expires.
	direct := srv.Client(t)
	// A job's key and its done key per job, the gate's calls key (the
	// shared call durations, written by renewals), and its default
	// upstream's: the budget (where it notes that no rate-limit headers
	// came back), the permanent wave of "bad_request", its failure window.
	checkAllExpire(t, direct, o.Prefix, 2*jobs+1+3)
	bytesPerCoolingJob(t, srv)
}

// runChecked is run plus a check from inside fn: while fn runs, Status
// never shows the job cooling down or failed under fn's own fence (only
// fn's own settle could write that), and an older lease's fence only as
// history.check allows (invariant 4: an older run's failure written once
// the chaos let this lease expire; 0 is a fence forgotten, the expired
// lease leaving no key).
func runChecked(ctx context.Context, t *testing.T, h *history, store *proof.FenceStore, g *gate.Gate, worker int, job string, hold time.Duration, out outcome) error {
	return run(ctx, h, store, g, worker, job, hold, out, func(l *gate.Lease, e *execution) {
		st, err := g.Status(ctx, job)
		if err != nil {
			return // unreachable now; nothing to check
		}
		if st.Fence != 0 && st.Fence < l.Fence() {
			e.older, e.olderState, e.olderAt = st.Fence, st.State, time.Now()
		}
		if st.Fence == l.Fence() && st.State != gate.Running && st.State != gate.Ready {
			t.Errorf("%s: Status %v under the running lease's fence %d", job, st.State, l.Fence())
		}
	})
}

// checkAllExpire SCANs every key under prefix and fails on one without a
// TTL, or on more keys than expected.
func checkAllExpire(t *testing.T, rdb *redis.Client, prefix string, maxKeys int) {
	t.Helper()
	ctx := context.Background()
	var keys []string
	iter := rdb.Scan(ctx, 0, prefix+":*", 100).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("SCAN: %v", err)
	}
	for _, k := range keys {
		p, err := rdb.PTTL(ctx, k).Result()
		if err != nil {
			t.Fatalf("PTTL %s: %v", k, err)
		}
		if p == -1 { // -2: expired between SCAN and PTTL
			t.Errorf("key %s has no TTL", k)
		}
	}
	if len(keys) > maxKeys {
		t.Errorf("%d keys under %q, want at most %d: %v", len(keys), prefix, maxKeys, keys)
	}
	t.Logf("%d keys left under the prefix, all with a TTL", len(keys))
}

// bytesPerCoolingJob reports the Redis memory one cooling job costs
// (lock + meta, MEMORY USAGE with every field sampled) with the default
// prefix and a realistic job key. Target: ≤ 200 bytes.
func bytesPerCoolingJob(t *testing.T, srv *redistest.Srv) {
	t.Helper()
	ctx := context.Background()
	rdb := srv.Client(t)
	g, err := gate.New(rdb, gate.Options{Classify: classifyTest}) // default prefix, 5m cooldown
	if err != nil {
		t.Fatal(err)
	}
	const job = "tenant-42:doc-7f3a9c21:evaluate"
	if err := g.Do(ctx, job, func(context.Context, *gate.Lease) error { return errTransient }); !errors.Is(err, errTransient) {
		t.Fatalf("Do: %v", err)
	}
	if st, _ := g.Status(ctx, job); st.State != gate.CoolingDown {
		t.Fatalf("job not cooling: %+v", st)
	}
	key := keyspace.Job(keyspace.DefaultPrefix, job)
	total, err := rdb.MemoryUsage(ctx, key, 0).Result()
	if err != nil {
		t.Fatalf("MEMORY USAGE %s: %v", key, err)
	}
	t.Logf("Redis bytes per cooling job (MEMORY USAGE of %q, %d-byte job key): %d (target ≤ 300)", key, len(job), total)
	if total > 300 {
		t.Errorf("a cooling job costs %d bytes of Redis memory, want ≤ 300", total)
	}
}
