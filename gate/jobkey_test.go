package gate_test

import (
	"context"
	"errors"
	"github.com/retrygate/retrygate/internal/limits"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

func TestInvalidJobKeys(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{})
	for name, job := range map[string]string{
		"empty":    "",
		"too long": strings.Repeat("x", limits.MaxJobLen+1),
	} {
		t.Run(name, func(t *testing.T) {
			ran := false
			err := g.Do(context.Background(), job, func(context.Context, *gate.Lease) error { ran = true; return nil })
			if !errors.Is(err, gate.ErrInvalidJob) || ran {
				t.Fatalf("Do: %v (ran %v), want ErrInvalidJob", err, ran)
			}
			if _, err := g.Status(context.Background(), job); !errors.Is(err, gate.ErrInvalidJob) {
				t.Fatalf("Status: %v", err)
			}
			if err := g.Reset(context.Background(), job); !errors.Is(err, gate.ErrInvalidJob) {
				t.Fatalf("Reset: %v", err)
			}
			if _, err := g.Acquire(context.Background(), job); !errors.Is(err, gate.ErrInvalidJob) {
				t.Fatalf("Acquire: %v", err)
			}
		})
	}
}

// Hostile job keys are stored safely: each is its own job, none breaks the
// cluster hash tag (a CROSSSLOT error would fail the scripts) and none
// collides with another.
func TestHostileJobKeysAreDistinct(t *testing.T) {
	jobs := []string{
		"doc-1", "{doc-1}", "doc-1}", "{", "}", "}{", "a}:lock", "~ZG9jLTE", "~",
		"doc 1", "doc\x00", "\x00", "\xff\xfe", "ünïcødé", "../../etc/passwd", "*", "[a-z]?",
		"retrygate:{doc-1}:lock", strings.Repeat("x", limits.MaxJobLen), strings.Repeat("{", limits.MaxJobLen),
	}
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{Cooldown: time.Minute})
			// Fail every other job; the rest must stay untouched.
			for i, job := range jobs {
				if i%2 == 0 {
					var ce *gate.CallError
					if err := failWith(t, g, job, errBoom); !errors.As(err, &ce) || ce.State != gate.CoolingDown {
						t.Fatalf("job %q: %v", job, err)
					}
				}
			}
			for i, job := range jobs {
				st := mustStatus(t, g, job)
				want := gate.Ready
				if i%2 == 0 {
					want = gate.CoolingDown
				}
				if st.State != want {
					t.Errorf("job %q: state %v, want %v (keys collide)", job, st.State, want)
				}
				lock := keyspace.Job(gatetest.Prefix(g), job)
				if got, ok := keyspace.JobFromKey(gatetest.Prefix(g), lock); !ok || got != job {
					t.Errorf("JobFromLock(%q) = %q, %v", lock, got, ok)
				}
			}
		})
	}
}

// Every key the gate writes has a TTL, whatever path wrote it.
func TestEveryKeyHasTTL(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{Retention: gate.Retention{Done: time.Minute}, Backoff: gate.Backoff{MaxAttempts: 2, Jitter: -1}, Upstream: "up",
				Cooldown: time.Minute,
			})
			ctx := context.Background()
			_ = g.Do(ctx, "ok", func(context.Context, *gate.Lease) error { return nil })
			_ = failWith(t, g, "transient", errBoom)
			_ = failWith(t, g, "permanent", classify.Permanent(errBoom))
			_ = failWith(t, g, "provider", classify.WithReason(errBoom, classify.ClassTransient, classify.ReasonUpstream5xx, 0))
			l, err := g.Acquire(ctx, "running")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Succeed(ctx)
			_ = failWith(t, g, "systemic", errQuota) // pauses the upstream: last
			_ = g.Reset(ctx, "transient")

			prefix := gatetest.Prefix(g)
			n := 0
			check := func(ctx context.Context, c redis.UniversalClient) error {
				iter := c.Scan(ctx, 0, prefix+":*", 100).Iterator()
				for iter.Next(ctx) {
					n++
					if d := c.PTTL(ctx, iter.Val()).Val(); d <= 0 {
						t.Errorf("key %q has no TTL (%v)", iter.Val(), d)
					}
				}
				return iter.Err()
			}
			if cc, ok := tg.Client.(*redis.ClusterClient); ok {
				var mu = make(chan struct{}, 1)
				mu <- struct{}{}
				err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
					<-mu
					defer func() { mu <- struct{}{} }()
					return check(ctx, c)
				})
			} else {
				err = check(ctx, tg.Client)
			}
			if err != nil {
				t.Fatal(err)
			}
			// One key per job that holds a state (ok, permanent, provider,
			// running, systemic), the upstream's key and its 5xx window.
			if n < 7 {
				t.Fatalf("found only %d keys", n)
			}
		})
	}
}
