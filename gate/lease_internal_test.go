package gate

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Settling a lease stops its renewal timer, so a call shorter than
// Lease/3 costs no goroutine and no renewal, and a settled lease is not
// kept alive by a pending timer.
func TestSettleStopsTheRenewalTimer(t *testing.T) {
	g := internalGate(t, Options{Lease: time.Hour})
	for _, settle := range []func(*Lease) error{
		func(l *Lease) error { return l.Succeed(context.Background()) },
		func(l *Lease) error { return l.Release(context.Background()) },
		func(l *Lease) error { return l.Fail(context.Background(), errTest) },
	} {
		l, err := g.Acquire(context.Background(), "job")
		if err != nil {
			t.Fatal(err)
		}
		if err := settle(l); err != nil {
			t.Fatal(err)
		}
		if l.timer.Stop() {
			t.Fatal("the renewal timer was still pending after the settle")
		}
		if err := g.Reset(context.Background(), "job"); err != nil {
			t.Fatal(err)
		}
	}
}

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("boom")

// internalGate is a Gate over a fresh miniredis, for tests inside the
// package.
func internalGate(t *testing.T, o Options) *Gate {
	t.Helper()
	m := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	g, err := New(rdb, o)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
