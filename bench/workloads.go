package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

// lockTTL is every lock's TTL on the per-op paths (the gate's default
// lease); no op holds a lock for more than a round trip.
const lockTTL = 60 * time.Second

// maxConc is the highest concurrency measured; keys and jobs exist per
// goroutine up to it.
const maxConc = 64

// Workload names: rows of the table, in its order.
const (
	wFloor     = "floor: SET NX + CAD script"
	wFenced    = "fenced: SET NX + INCR + CAD script"
	wRedislock = "bsm/redislock Obtain+Release"
	wRedsync   = "redsync Lock+Unlock"
	wSuccess   = "gate success (Do → nil)"
	wSuccess2  = "gate success, 2 upstreams"
	wSuccess4  = "gate success, 4 upstreams"
	wGet       = "single GET"
	wBlocked   = "gate blocked (cooling down)"
	wCoalesced = "gate coalesced (in flight here)"
)

// opFunc runs one operation as goroutine w; an error aborts the run.
type opFunc func(ctx context.Context, w int) error

// workload is one row of the per-op table.
type workload struct {
	name string
	rdb  *redis.Client
	rt   *tripCounter
	// op runs one operation; start (optional) prepares a measurement and
	// returns what undoes it.
	op    opFunc
	start func(ctx context.Context) (stop func(), err error)
	// srvCmds are the top-level commands this workload sends (lowercase);
	// their usec in INFO commandstats is the server's time. Commands that
	// scripts call inside are already counted in evalsha.
	srvCmds []string
}

// gateCmds are the top-level commands a gate sends: the acquire's
// pipeline (PTTL, SET NX GET, TIME) and the settle script.
var gateCmds = []string{"set", "pttl", "time", "get", "evalsha"}

var (
	errUpstream = classify.Transient(errors.New("upstream: 503 Service Unavailable"), 0)
	succeed     = func(context.Context, *gate.Lease) error { return nil }
	casDelete   = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
)

// refusals cools one job per goroutine down for an hour on a gate over
// rdb, and returns the op that retries it on a fresh Gate (one that never
// saw the cooldown): refused with ErrCoolingDown.
func refusals(ctx context.Context, rdb gate.Client, prefix string) (opFunc, error) {
	g, err := gate.New(rdb, gate.Options{Prefix: prefix, Cooldown: time.Hour, Backoff: gate.Backoff{Jitter: -1}})
	if err != nil {
		return nil, err
	}
	jobs := names("job-")
	for _, j := range jobs {
		err := g.Do(ctx, j, func(context.Context, *gate.Lease) error { return errUpstream })
		if !errors.Is(err, errUpstream) {
			return nil, fmt.Errorf("cool down %s: %v", j, err)
		}
	}
	if g, err = gate.New(rdb, gate.Options{Prefix: prefix, Cooldown: time.Hour, Backoff: gate.Backoff{Jitter: -1}}); err != nil {
		return nil, err
	}
	return func(ctx context.Context, w int) error {
		if err := g.Do(ctx, jobs[w], succeed); !errors.Is(err, gate.ErrCoolingDown) {
			return fmt.Errorf("exp ErrCoolingDown, got %v", err)
		}
		return nil
	}, nil
}

// token is a 128-bit random lock value, made as cheaply as the gate makes
// its own, so the floor is a fair hand-written lock.
func token() string {
	var b [32]byte
	const hex = "0123456789abcdef"
	a, c := rand.Uint64(), rand.Uint64()
	for i := range 16 {
		b[i] = hex[a>>(4*i)&0xf]
		b[16+i] = hex[c>>(4*i)&0xf]
	}
	return string(b[:])
}

func names(prefix string) []string {
	s := make([]string, maxConc)
	for i := range s {
		s[i] = prefix + strconv.Itoa(i)
	}
	return s
}

// newWorkloads builds every per-op workload, each on its own client as a
// user of that library would, and prepares their keys (cooling jobs).
func newWorkloads(ctx context.Context, addr string) ([]*workload, func(), error) {
	var clients []*redis.Client
	client := func() (*redis.Client, *tripCounter) {
		c, rt := newClient(addr)
		clients = append(clients, c)
		return c, rt
	}
	closeAll := func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}
	var ws []*workload

	{
		rdb, rt := client()
		keys := names("bench:floor:")
		ws = append(ws, &workload{name: wFloor, rdb: rdb, rt: rt, srvCmds: []string{"set", "evalsha"},
			op: func(ctx context.Context, w int) error {
				tok := token()
				ok, err := rdb.SetNX(ctx, keys[w], tok, lockTTL).Result()
				if err != nil || !ok {
					return fmt.Errorf("SET NX: %v, %v", ok, err)
				}
				n, err := casDelete.Run(ctx, rdb, keys[w:w+1], tok).Int()
				if err != nil || n != 1 {
					return fmt.Errorf("release: %d, %v", n, err)
				}
				return nil
			}})
	}
	{
		// The fenced lock a team writes by hand when the floor is not
		// enough: after SET NX, INCR a per-lock counter for the token that
		// guards writes against a stale owner. The counter must outlive
		// every lock it numbers, so it has no TTL. Three round trips; the
		// gate's acquire script returns its fence with the lock.
		rdb, rt := client()
		keys, fences := names("bench:fenced:"), names("bench:fence:")
		ws = append(ws, &workload{name: wFenced, rdb: rdb, rt: rt, srvCmds: []string{"set", "incr", "evalsha"},
			op: func(ctx context.Context, w int) error {
				tok := token()
				ok, err := rdb.SetNX(ctx, keys[w], tok, lockTTL).Result()
				if err != nil || !ok {
					return fmt.Errorf("SET NX: %v, %v", ok, err)
				}
				if fence, err := rdb.Incr(ctx, fences[w]).Result(); err != nil || fence < 1 {
					return fmt.Errorf("INCR fence: %d, %v", fence, err)
				}
				n, err := casDelete.Run(ctx, rdb, keys[w:w+1], tok).Int()
				if err != nil || n != 1 {
					return fmt.Errorf("release: %d, %v", n, err)
				}
				return nil
			}})
	}
	{
		rdb, rt := client()
		locker := redislock.New(rdb)
		keys := names("bench:redislock:")
		ws = append(ws, &workload{name: wRedislock, rdb: rdb, rt: rt, srvCmds: []string{"evalsha"},
			op: func(ctx context.Context, w int) error {
				l, err := locker.Obtain(ctx, keys[w], lockTTL, nil)
				if err != nil {
					return err
				}
				return l.Release(ctx)
			}})
	}
	{
		rdb, rt := client()
		rs := redsync.New(redsyncgoredis.NewPool(rdb))
		keys := names("bench:redsync:")
		// One try: distinct keys per goroutine, so it never has to wait.
		opts := []redsync.Option{redsync.WithExpiry(lockTTL), redsync.WithTries(1)}
		ws = append(ws, &workload{name: wRedsync, rdb: rdb, rt: rt, srvCmds: []string{"set", "evalsha"},
			op: func(ctx context.Context, w int) error {
				m := rs.NewMutex(keys[w], opts...)
				if err := m.LockContext(ctx); err != nil {
					return err
				}
				if ok, err := m.UnlockContext(ctx); !ok {
					return fmt.Errorf("unlock: %v", err)
				}
				return nil
			}})
	}
	{
		rdb, rt := client()
		g, err := gate.New(rdb, gate.Options{Prefix: "bench-s", Backoff: gate.Backoff{Jitter: -1}})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		jobs := names("job-")
		ws = append(ws, &workload{name: wSuccess, rdb: rdb, rt: rt, srvCmds: gateCmds,
			op: func(ctx context.Context, w int) error { return g.Do(ctx, jobs[w], succeed) }})
	}
	// The hidden cost of fallbacks (issue 24): each upstream is one more
	// GET in the acquire's pipeline, all of them open.
	for _, u := range []struct {
		name      string
		fallbacks []string
	}{
		{wSuccess2, []string{"backup"}},
		{wSuccess4, []string{"backup-1", "backup-2", "backup-3"}},
	} {
		rdb, rt := client()
		g, err := gate.New(rdb, gate.Options{Prefix: "bench-u" + strconv.Itoa(len(u.fallbacks)), Upstream: "primary", UpstreamPolicy: gate.UpstreamPolicy{Fallbacks: u.fallbacks}, Backoff: gate.Backoff{Jitter: -1}})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		jobs := names("job-")
		ws = append(ws, &workload{name: u.name, rdb: rdb, rt: rt, srvCmds: gateCmds,
			op: func(ctx context.Context, w int) error { return g.Do(ctx, jobs[w], succeed) }})
	}
	{
		rdb, rt := client()
		keys := names("bench:get:")
		for _, k := range keys {
			if err := rdb.Set(ctx, k, "c:transient", time.Hour).Err(); err != nil {
				closeAll()
				return nil, nil, err
			}
		}
		ws = append(ws, &workload{name: wGet, rdb: rdb, rt: rt, srvCmds: []string{"get"},
			op: func(ctx context.Context, w int) error { return rdb.Get(ctx, keys[w]).Err() }})
	}
	{
		// Retries of cooling jobs on a Gate that never saw them: what every
		// refusal costs, whatever a process has seen before.
		rdb, rt := client()
		op, err := refusals(ctx, rdb, "bench-b")
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("%s: %w", wBlocked, err)
		}
		ws = append(ws, &workload{name: wBlocked, rdb: rdb, rt: rt, srvCmds: gateCmds, op: op})
	}
	{
		rdb, rt := client()
		g, err := gate.New(rdb, gate.Options{Prefix: "bench-c", Backoff: gate.Backoff{Jitter: -1}})
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		// Every goroutine calls the one job a lease holds: duplicates of a
		// running call in one process.
		const job = "held"
		ws = append(ws, &workload{name: wCoalesced, rdb: rdb, rt: rt, srvCmds: gateCmds,
			op: func(ctx context.Context, w int) error {
				if err := g.Do(ctx, job, succeed); !errors.Is(err, gate.ErrInFlight) {
					return fmt.Errorf("coalesced: exp ErrInFlight, got %v", err)
				}
				return nil
			},
			start: func(ctx context.Context) (func(), error) {
				l, err := g.Acquire(ctx, job)
				if err != nil {
					return nil, err
				}
				return func() { _ = l.Succeed(ctx) }, nil
			}})
	}
	return ws, closeAll, nil
}
