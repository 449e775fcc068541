package gate_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/redistest"
)

// TestAcquireWaitUnsubscribeOvertakesSubscribe: subscribing runs in the
// background, so a waiter can give up while its SUBSCRIBE is still on its
// way, and the UNSUBSCRIBE its leaving sends can reach Redis first. The
// SUBSCRIBE then lands on a channel nobody listens to any more; the gate
// must undo it, or the subscription connection carries it (and every
// settle's message for that job) for as long as the connection lives. The
// hook holds the SUBSCRIBE until Redis has seen the UNSUBSCRIBE.
func TestAcquireWaitUnsubscribeOvertakesSubscribe(t *testing.T) {
	srv := redistest.Server(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	prefix := redistest.UniqueKey(t)
	owner, err := newGate(t, rdb, gate.Options{Prefix: prefix, Lease: longLease}).Acquire(ctx, "job")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Release(context.Background()) })
	waiter := newGate(t, rdb, gate.Options{Prefix: prefix, Lease: longLease})
	lock := keyspace.Job(prefix, "job") // the channel is the lock key

	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	gate.SetSubscribeHook(waiter, func(channel string) {
		if channel != lock {
			return
		}
		once.Do(func() { close(arrived) })
		<-release
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})

	before := calls(t, rdb, "unsubscribe")
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := waiter.AcquireWait(wctx, "job", time.Minute)
		done <- err
	}()
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter's subscribe never started")
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("AcquireWait after its caller gave up: %v, want context.Canceled", err)
	}
	waitUntil(t, 5*time.Second, "the leaving waiter's UNSUBSCRIBE reaches Redis", func() bool {
		return calls(t, rdb, "unsubscribe") > before
	})
	subscribed := calls(t, rdb, "subscribe")
	close(release)
	waitUntil(t, 5*time.Second, "the late SUBSCRIBE reaches Redis", func() bool {
		return calls(t, rdb, "subscribe") > subscribed
	})
	// Undone well inside the idle connection's linger (5 s), which would
	// otherwise drop it with the connection.
	waitUntil(t, time.Second, "the channel nobody listens to unsubscribed", func() bool {
		return rdb.PubSubNumSub(ctx, lock).Val()[lock] == 0
	})
}

// calls returns how often Redis ran cmd, from INFO commandstats.
func calls(t *testing.T, rdb *redis.Client, cmd string) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return 0
}
