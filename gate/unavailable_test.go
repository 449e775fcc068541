package gate_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

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
		g := newGate(t, rdb, gate.Options{Observer: rec, Redis: gate.RedisPolicy{FailOpen: true}})
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

// replyErr is an error reply from Redis, as go-redis returns them.
type replyErr string

func (e replyErr) Error() string { return string(e) }
func (replyErr) RedisError()     {}

// FailOpen is for a Redis that cannot be reached. A Redis that answers
// with an error is a configuration problem: the gate fails closed with
// ErrRedisRefused, FailOpen or not, and never runs fn ungated. A reply
// that passes by itself (a slot moving) is unavailability, and still not
// a reason to run ungated: Redis was reached.
func TestFailOpenOnlyWhenUnreachable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		want    error
		ungated bool
	}{
		{"connection refused", gatetest.ErrDown, gate.ErrUnavailable, true},
		{"NOPERM", replyErr("NOPERM User gate has no permissions to run the 'evalsha' command"), gate.ErrRedisRefused, false},
		{"OOM", replyErr("OOM command not allowed when used memory > 'maxmemory'."), gate.ErrRedisRefused, false},
		{"READONLY", replyErr("READONLY You can't write against a read only replica."), gate.ErrRedisRefused, false},
		{"TRYAGAIN", replyErr("TRYAGAIN Multiple keys request during rehashing of slot"), gate.ErrUnavailable, false},
		{"CLUSTERDOWN", replyErr("CLUSTERDOWN The cluster is down"), gate.ErrUnavailable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rdb := redistest.Miniredis(t)
			f := &gatetest.Flaky{Client: rdb, Err: tc.err}
			f.Down.Store(true)
			rec := newRecorder()
			g := newGate(t, f, gate.Options{Observer: rec, Redis: gate.RedisPolicy{FailOpen: true}})
			ran := false
			err := g.Do(context.Background(), "job", func(_ context.Context, l *gate.Lease) error {
				ran = true
				if l.Gated() {
					t.Error("fn ran gated while Redis failed")
				}
				return nil
			})
			if ran != tc.ungated {
				t.Fatalf("fn ran: %v, want %v (err %v)", ran, tc.ungated, err)
			}
			if tc.ungated {
				return
			}
			if !errors.Is(err, tc.want) || !errors.Is(err, tc.err) {
				t.Fatalf("Do: %v, want %v wrapping the reply", err, tc.want)
			}
			other := gate.ErrUnavailable
			if tc.want == gate.ErrUnavailable {
				other = gate.ErrRedisRefused
			}
			if errors.Is(err, other) {
				t.Fatalf("Do: %v matches both sentinels", err)
			}
			var ev *gate.Event
			for _, e := range rec.drain() {
				if e.Kind == gate.EventRedisError {
					ev = &e
				}
			}
			if ev == nil || !errors.Is(ev.Err, tc.want) || ev.Op != "acquire" {
				t.Fatalf("redis_error event %+v, want op acquire matching %v", ev, tc.want)
			}
		})
	}
}

// The same on a real server: an ACL user without the scripting commands
// gets NOPERM, and the gate fails closed with FailOpen set.
func TestACLWithoutScriptsFailsClosed(t *testing.T) {
	srv := redistest.Server(t)
	admin := srv.Client(t)
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "gate", "on", ">pw", "~*", "-@all", "+get", "+set").Err(); err != nil {
		t.Fatal(err)
	}
	user := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "gate", Password: "pw", MaxRetries: -1})
	t.Cleanup(func() { _ = user.Close() })
	g := newGate(t, user, gate.Options{Redis: gate.RedisPolicy{FailOpen: true}})
	err := g.Do(ctx, "job", func(context.Context, *gate.Lease) error {
		t.Error("fn ran through a Redis that refuses the gate's commands")
		return nil
	})
	if !errors.Is(err, gate.ErrRedisRefused) {
		t.Fatalf("Do: %v, want ErrRedisRefused", err)
	}
}

// A failure whose cooldown cannot be written (here a full noeviction
// Redis answering OOM) is still refused by the process that ran it, for
// the cooldown it should have had, with a loud event: no free retry.
func TestUnwrittenSettleRefusesLocally(t *testing.T) {
	srv := redistest.Server(t, redistest.WithArgs("--maxmemory-policy", "noeviction"))
	admin := srv.Client(t)
	ctx := context.Background()
	rec := newRecorder()
	const cooldown = 10 * time.Minute
	g := newGate(t, srv.Client(t), gate.Options{Cooldown: cooldown, Observer: rec, Backoff: gate.Backoff{Jitter: -1}})
	err := g.Do(ctx, "job", func(context.Context, *gate.Lease) error {
		// Redis fills up while the model call runs.
		if err := admin.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
			t.Fatal(err)
		}
		return errTransient
	})
	if err := admin.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
		t.Fatal(err)
	}
	var ce *gate.CallError
	if !errors.As(err, &ce) || !errors.Is(ce.SettleErr, gate.ErrRedisRefused) {
		t.Fatalf("Do: %v, want a CallError whose settle was refused", err)
	}
	refusedAsCooling(t, g, rec, cooldown)
}

// A permanent failure that cannot be written is refused as failed.
func TestUnwrittenPermanentRefusesAsFailed(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	f := &gatetest.Flaky{Client: rdb}
	g := newGate(t, f, gate.Options{})
	_ = g.Do(context.Background(), "job", func(context.Context, *gate.Lease) error {
		f.Down.Store(true) // Redis goes away before the settle
		return classify.Permanent(errBoom)
	})
	f.Down.Store(false)
	if b := blocked(t, g, "job"); b.State != gate.Failed {
		t.Fatalf("retry: %v, want failed", b.State)
	}
}
