package gate_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/redistest"
)

func TestWaitReplicas(t *testing.T) {
	primary := redistest.Server(t)
	replica := redistest.Server(t, redistest.WithArgs("--replicaof", "127.0.0.1", strconv.Itoa(primary.Port())))
	rdb := primary.Client(t)
	ctx := context.Background()
	waitReplicaOnline(t, rdb, replica)

	t.Run("acknowledged", func(t *testing.T) {
		g := newGate(t, rdb, gate.Options{WaitReplicas: 1, WaitTimeout: time.Second})
		var lock string
		err := g.Do(ctx, "job", func(ctx context.Context, l *gate.Lease) error {
			lock = keyspace.Job(g.Options().Prefix, "job")
			// The replica has the lock before fn starts.
			if v := replica.Client(t).Get(ctx, lock).Val(); v == "" {
				t.Error("lock not on the replica when fn started")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
	t.Run("not enough replicas fails closed", func(t *testing.T) {
		const wait = 50 * time.Millisecond
		g := newGate(t, rdb, gate.Options{WaitReplicas: 2, WaitTimeout: wait})
		ran := false
		start := time.Now()
		err := g.Do(ctx, "job", func(context.Context, *gate.Lease) error { ran = true; return nil })
		if !errors.Is(err, gate.ErrUnavailable) || ran {
			t.Fatalf("Do: %v (ran %v), want ErrUnavailable", err, ran)
		}
		if took := time.Since(start); took < wait || took > wait+time.Second {
			t.Fatalf("took %v, want about WaitTimeout", took)
		}
		// The acquire was undone: the job is free, not held for a lease.
		if exp, got := gate.Ready, mustStatus(t, g, "job").State; exp != got {
			t.Fatalf("state after a refused acquire: exp %v, got %v", exp, got)
		}
	})
	t.Run("needs a client WAIT can pin", func(t *testing.T) {
		_, err := gate.New(&flaky{Client: rdb}, gate.Options{WaitReplicas: 1})
		if !errors.Is(err, gate.ErrInvalidOptions) {
			t.Fatalf("New with a wrapper: %v", err)
		}
	})
}

// waitReplicaOnline waits until the primary counts the replica online
// (the replica's own "link up" comes first; WAIT counts the primary's view).
func waitReplicaOnline(t testing.TB, rdb *redis.Client, replica *redistest.Srv) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info := rdb.Info(ctx, "replication").Val()
		if strings.Contains(info, "state=online") && rdb.Wait(ctx, 1, 100*time.Millisecond).Val() >= 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica %s not online at the primary:\n%s", replica.Addr(), info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func BenchmarkWaitReplicas(b *testing.B) {
	primary := redistest.Server(b)
	replica := redistest.Server(b, redistest.WithArgs("--replicaof", "127.0.0.1", strconv.Itoa(primary.Port())))
	ctx := context.Background()
	rdb := primary.Client(b)
	waitReplicaOnline(b, rdb, replica)
	ok := func(context.Context, *gate.Lease) error { return nil }
	for _, n := range []int{0, 1} {
		b.Run("replicas="+strconv.Itoa(n), func(b *testing.B) {
			g, _ := gate.New(rdb, gate.Options{Prefix: "bw" + strconv.Itoa(n), WaitReplicas: n, WaitTimeout: time.Second})
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if err := g.Do(ctx, "job", ok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
