package gate_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/redistest"
)

func TestInvalidJobKeys(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{})
	for name, job := range map[string]string{
		"empty":    "",
		"too long": strings.Repeat("x", gate.MaxJobLen+1),
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
		"retrygate:{doc-1}:lock", strings.Repeat("x", gate.MaxJobLen), strings.Repeat("{", gate.MaxJobLen),
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
				lock := keyspace.Job(g.Options().Prefix, job)
				if got, ok := keyspace.JobFromKey(g.Options().Prefix, lock); !ok || got != job {
					t.Errorf("JobFromLock(%q) = %q, %v", lock, got, ok)
				}
			}
		})
	}
}

func TestOptionsValidation(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	tests := []struct {
		name  string
		opts  gate.Options
		field []string // every field the error must name
	}{
		{"negative lease", gate.Options{Lease: -time.Second}, []string{"Lease"}},
		{"lease too short", gate.Options{Lease: 5 * time.Millisecond}, []string{"Lease"}},
		{"max below cooldown", gate.Options{Cooldown: time.Hour, MaxCooldown: time.Minute}, []string{"MaxCooldown"}},
		{"factor below 1", gate.Options{BackoffFactor: 0.5}, []string{"BackoffFactor"}},
		{"jitter 1", gate.Options{Jitter: 1}, []string{"Jitter"}},
		{"negative attempts", gate.Options{MaxAttempts: -1}, []string{"MaxAttempts"}},
		{"brace in prefix", gate.Options{Prefix: "a{b}"}, []string{"Prefix"}},
		{"every bad field at once", gate.Options{Lease: -1, Cooldown: -1, FailedTTL: -1, DoneTTL: -1, Jitter: 2, BackoffFactor: -3, UpstreamPolicy: gate.UpstreamPolicy{PauseTTL: -1}},
			[]string{"Lease", "Cooldown", "FailedTTL", "DoneTTL", "Jitter", "BackoffFactor", "UpstreamPolicy.PauseTTL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := gate.New(rdb, tt.opts)
			if !errors.Is(err, gate.ErrInvalidOptions) {
				t.Fatalf("New: %v, want ErrInvalidOptions", err)
			}
			for _, f := range tt.field {
				if !strings.Contains(err.Error(), f+":") {
					t.Errorf("error %q does not name %s", err, f)
				}
			}
		})
	}
	if _, err := gate.New(nil, gate.Options{}); !errors.Is(err, gate.ErrInvalidOptions) {
		t.Fatalf("nil client: %v", err)
	}
}

func TestOptionsDefaultsAndShortValues(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g, err := gate.New(rdb, gate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := g.Options()
	if o.Lease != time.Minute || o.Cooldown != 5*time.Minute || o.MaxCooldown != time.Hour || o.BackoffFactor != 2 ||
		o.Jitter != 0.1 || o.UpstreamPolicy.AllowedFails != 3 || o.FailedTTL != 7*24*time.Hour || o.Prefix != "retrygate" || o.Classify == nil {
		t.Fatalf("defaults: %+v", o)
	}
	// Tests and demos use very short values.
	if _, err := gate.New(rdb, gate.Options{Lease: 100 * time.Millisecond, Cooldown: 10 * time.Millisecond}); err != nil {
		t.Fatalf("short values rejected: %v", err)
	}
	// MaxCooldown follows a Cooldown above the default cap.
	g, err = gate.New(rdb, gate.Options{Cooldown: 2 * time.Hour})
	if err != nil || g.Options().MaxCooldown != 2*time.Hour {
		t.Fatalf("Cooldown 2h: %v %v", err, g.Options().MaxCooldown)
	}
}

func FuzzOptions(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0), 0.0, 0.0, 0, "")
	f.Add(int64(time.Millisecond), int64(-1), int64(time.Hour), 0.5, 1.5, -2, "a{")
	f.Add(int64(100*time.Millisecond), int64(10*time.Millisecond), int64(0), 2.0, 0.99, 3, "p")
	f.Add(int64(100*time.Millisecond), int64(10*time.Millisecond), int64(0), 77.0, -37.01, 3, "0") // negative Jitter: none
	_, rdb := redistest.Miniredis(f)
	f.Fuzz(func(t *testing.T, lease, cooldown, maxCooldown int64, factor, jitter float64, attempts int, prefix string) {
		g, err := gate.New(rdb, gate.Options{Lease: time.Duration(lease), Cooldown: time.Duration(cooldown),
			MaxCooldown: time.Duration(maxCooldown), BackoffFactor: factor, Jitter: jitter, MaxAttempts: attempts, Prefix: prefix})
		if err != nil {
			if !errors.Is(err, gate.ErrInvalidOptions) {
				t.Fatalf("error %v is not ErrInvalidOptions", err)
			}
			return
		}
		o := g.Options()
		if o.Lease < gate.MinLease || o.Cooldown <= 0 || o.MaxCooldown < o.Cooldown || o.BackoffFactor < 1 || !(o.Jitter < 1) { // a negative Jitter means none
			t.Fatalf("accepted invalid options: %+v", o)
		}
	})
}

func TestRedisUnreachable(t *testing.T) {
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 100 * time.Millisecond, MaxRetries: 1})
	t.Cleanup(func() { rdb.Close() })

	t.Run("fail closed", func(t *testing.T) {
		rec := newRecorder()
		g := newGate(t, rdb, gate.Options{Observer: rec})
		ran := false
		start := time.Now()
		err := g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error { ran = true; return nil })
		if !errors.Is(err, gate.ErrUnavailable) || ran {
			t.Fatalf("Do: %v (ran %v), want ErrUnavailable", err, ran)
		}
		var ne net.Error
		if !errors.As(err, &ne) {
			t.Fatalf("cause not wrapped: %v", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("took %v", took)
		}
		if countKind(rec.drain(), gate.EventRedisError) != 1 {
			t.Fatal("redis error not reported")
		}
		if _, err := g.Status(context.Background(), "job"); !errors.Is(err, gate.ErrUnavailable) {
			t.Fatalf("Status: %v", err)
		}
		if err := g.Reset(context.Background(), "job"); !errors.Is(err, gate.ErrUnavailable) {
			t.Fatalf("Reset: %v", err)
		}
	})
	t.Run("fail open", func(t *testing.T) {
		rec := newRecorder()
		g := newGate(t, rdb, gate.Options{FailOpen: true, Observer: rec})
		calls := 0
		err := g.Do(context.Background(), "job", func(ctx context.Context, l *gate.Lease) error {
			calls++
			if l.Gated() || l.Fence() != 0 {
				t.Errorf("ungated lease: Gated %v, Fence %d", l.Gated(), l.Fence())
			}
			return nil
		})
		if err != nil || calls != 1 {
			t.Fatalf("Do: %v, calls %d", err, calls)
		}
		if countKind(rec.drain(), gate.EventFailOpen) != 1 {
			t.Fatal("fail-open call not reported")
		}
		// A failure while ungated is returned as is, classified.
		err = g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error { return errBoom })
		var ce *gate.CallError
		if !errors.As(err, &ce) || !errors.Is(err, errBoom) {
			t.Fatalf("ungated failure: %v", err)
		}
	})
	t.Run("caller cancelled is not unavailable", func(t *testing.T) {
		g := newGate(t, rdb, gate.Options{})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := g.Do(ctx, "job", func(context.Context, *gate.Lease) error { return nil })
		if !errors.Is(err, context.Canceled) || errors.Is(err, gate.ErrUnavailable) {
			t.Fatalf("Do on a cancelled ctx: %v, want context.Canceled only", err)
		}
	})
}

func TestCallerDeadlineWhileRedisHangs(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	f := &flaky{Client: rdb}
	f.Hang.Store(true)
	g := newGate(t, f, gate.Options{FailOpen: true})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	ran := false
	err := g.Do(ctx, "job", func(context.Context, *gate.Lease) error { ran = true; return nil })
	if !errors.Is(err, gate.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || ran {
		t.Fatalf("Do: %v (ran %v), want ErrUnavailable and DeadlineExceeded, fn not run", err, ran)
	}
}

// Every key the gate writes has a TTL, whatever path wrote it.
func TestEveryKeyHasTTL(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g := newGate(t, tg.Client, gate.Options{DoneTTL: time.Minute, MaxAttempts: 2, Upstream: "up",
				Cooldown: time.Minute, Jitter: -1})
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
			_ = failWith(t, g, "systemic", errQuota) // pauses the scope: last
			_ = g.Reset(ctx, "transient")

			prefix := g.Options().Prefix
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
