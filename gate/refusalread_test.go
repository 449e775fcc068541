package gate_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// settleStates leaves job "cool" cooling for an hour, "failed" failed and
// "done" done through g, and "running" running under a lease of its own.
func settleStates(t *testing.T, g *gate.Gate) {
	t.Helper()
	ctx := context.Background()
	_ = failWith(t, g, "cool", errTransient)
	_ = failWith(t, g, "failed", classify.Permanent(errBoom))
	if err := g.Do(ctx, "done", func(context.Context, *gate.Lease) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Acquire(ctx, "running"); err != nil {
		t.Fatal(err)
	}
}

// refusalOpts cool for an hour and keep the done and failed marks as long.
func refusalOpts(prefix string) gate.Options {
	return gate.Options{Prefix: prefix, Cooldown: time.Hour, Retention: gate.Retention{Done: time.Hour}, Lease: time.Minute, Backoff: gate.Backoff{Jitter: -1},
		UpstreamPolicy: gate.UpstreamPolicy{Off: true}} // the job's own refusals
}

// checkReadRefusals asserts that g, over a Redis that refuses writes,
// refuses the jobs settleStates left with their states and waits, and
// (free set) fails closed on a free job.
func checkReadRefusals(t *testing.T, g *gate.Gate, free bool) {
	t.Helper()
	if b := blocked(t, g, "cool"); !errors.Is(b, gate.ErrCoolingDown) || b.RetryAfter <= 59*time.Minute || b.RetryAfter > time.Hour {
		t.Errorf("cooling job: %v (retry in %v), want ErrCoolingDown with its hour left", b, b.RetryAfter)
	}
	if b := blocked(t, g, "failed"); !errors.Is(b, gate.ErrFailed) {
		t.Errorf("failed job: %v, want ErrFailed", b)
	}
	if b := blocked(t, g, "done"); !errors.Is(b, gate.ErrDone) {
		t.Errorf("done job: %v, want ErrDone", b)
	}
	if b := blocked(t, g, "running"); !errors.Is(b, gate.ErrInFlight) || b.RetryAfter <= 0 || b.RetryAfter > time.Minute {
		t.Errorf("running job: %v (retry in %v), want ErrInFlight within its lease", b, b.RetryAfter)
	}
	if !free {
		return
	}
	err := g.Do(context.Background(), "free", func(context.Context, *gate.Lease) error {
		t.Error("fn ran on a Redis that refuses writes")
		return nil
	})
	if !errors.Is(err, gate.ErrRedisRefused) {
		t.Errorf("free job: %v, want ErrRedisRefused (fail closed)", err)
	}
}

// A refusal needs no write: on a full Redis (maxmemory reached,
// noeviction) the acquire's SET is refused with OOM, and a job cooling,
// failed, done or running since before is still refused with its state
// and wait, not ErrRedisRefused. A free job fails closed.
func TestRefusalOnFullRedis(t *testing.T) {
	srv := redistest.FullServer(t)
	opts := refusalOpts(redistest.UniqueKey(t))
	settleStates(t, newGate(t, srv.Client(t), opts))
	srv.Fill(t)
	checkReadRefusals(t, newGate(t, srv.Client(t), opts), true)
}

// The same on a read-only replica (a failover's demoted master answers
// READONLY alike).
func TestRefusalOnReadOnlyReplica(t *testing.T) {
	redistest.Require(t)
	primary := redistest.Server(t)
	replica := redistest.Server(t, redistest.WithArgs("--replicaof", "127.0.0.1", strconv.Itoa(primary.Port())))
	opts := refusalOpts(redistest.UniqueKey(t))
	settleStates(t, newGate(t, primary.Client(t), opts))
	rc := replica.Client(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if n, err := rc.Exists(context.Background(), keyspace.Job(opts.Prefix, "running")).Result(); err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica did not sync within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkReadRefusals(t, newGate(t, rc, opts), true)
}

// oomOnSet, while on, answers every SET NX with Redis's OOM reply without
// sending it, as a full noeviction Redis does, and counts the round trips.
type oomOnSet struct {
	roundTrips
	on atomic.Bool
}

var errOOM = replyErr("OOM command not allowed when used memory > 'maxmemory'.")

func (h *oomOnSet) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	count := h.roundTrips.ProcessPipelineHook(next)
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var sent []redis.Cmder
		for _, c := range cmds {
			if h.on.Load() && c.Name() == "set" && slices.ContainsFunc(c.Args(), func(a any) bool { return a == "nx" }) {
				c.SetErr(errOOM)
				continue
			}
			sent = append(sent, c)
		}
		return count(ctx, sent)
	}
}

// On every target: with the acquire's write refused, a job's refusal
// comes from a second trip that writes nothing. (A free job is not tried:
// the hook refuses only the SET, and a cluster's acquire then runs its
// script, whose write a real full Redis refuses too: TestRefusalOnFullRedis.)
func TestRefusalWithWritesRefused(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			opts := refusalOpts(redistest.UniqueKey(t))
			h := &oomOnSet{}
			hook(tg, h) // before the cluster client makes its nodes' clients
			settleStates(t, newGate(t, tg.Client, opts))
			h.on.Store(true)
			g := newGate(t, tg.Client, opts)
			checkReadRefusals(t, g, false)
			h.n.Store(0)
			_ = blocked(t, g, "cool")
			if n := h.n.Load(); n != 2 {
				t.Errorf("a refusal with writes refused: %d round trips, want 2 (the write, then the read)", n)
			}
		})
	}
}
