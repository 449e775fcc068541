package gate_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// byTag is a redis.Ring's hash that sends the keys of one hash tag to the
// shard "upstream" and every other key to "job".
type byTag string

func (b byTag) Get(tag string) string {
	if tag == string(b) {
		return "upstream"
	}
	return "job"
}

// Status judges each upstream with the clock of the server that holds it,
// the clock its wait was written with, not with the job's: on two
// servers a second apart (a ring or a cluster over two machines), a
// 90 s Retry-After reads as 90 s, not 91.
func TestStatusJudgesUpstreamsWithTheirServersClock(t *testing.T) {
	const hint = 90 * time.Second
	for _, tc := range []struct {
		name string
		// upstream starts the server of the upstream's keys: its clock is
		// now, the job's server's a second behind it.
		upstream func(t *testing.T, now time.Time) string
		// within: how far below the hint the wait may read (a real
		// server's clock runs on).
		within time.Duration
	}{
		{"miniredis", func(t *testing.T, now time.Time) string {
			m := miniredis.RunT(t)
			m.SetTime(now)
			return m.Addr()
		}, 0},
		{"redis-server", func(t *testing.T, _ time.Time) string {
			return redistest.Server(t).Addr()
		}, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Now()
			job := miniredis.RunT(t)
			job.SetTime(now.Add(-time.Second))
			const name = "provider"
			rdb := redis.NewRing(&redis.RingOptions{
				Addrs:             map[string]string{"job": job.Addr(), "upstream": tc.upstream(t, now)},
				NewConsistentHash: func([]string) redis.ConsistentHash { return byTag(keyspace.Encode(name)) },
			})
			t.Cleanup(func() { _ = rdb.Close() })
			g := newGate(t, rdb, gate.Options{Upstream: name, Classify: upstreamClassifier(hint)})
			_ = failWith(t, g, "a", errRateLimited)
			st := mustStatus(t, g, "b")
			if up := st.Upstream; up.State != gate.CoolingDown || up.RetryAfter > hint || up.RetryAfter < hint-tc.within {
				t.Fatalf("Status(...).Upstream = %+v, want cooling for the hint, %v (less at most %v)", up, hint, tc.within)
			}
		})
	}
}

// Status tells a running job's fence from its acquire on, in any process
// (a second client here), not only after the first renewal: the fence an
// operator compares with what a store wrote. Lease: an hour, so no renewal
// runs during the test.
func TestStatusTellsARunningJobsFence(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			opts := gate.Options{Prefix: redistest.UniqueKey(t), Lease: time.Hour}
			g := newGate(t, tg.Client, opts)
			other := newGate(t, tg.OwnClient(t), opts)
			for _, job := range []string{"free", "cooled"} {
				if job == "cooled" {
					// A job taken over from a finished state (a script's take).
					_ = failWith(t, g, job, errBoom)
					if err := g.Reset(ctx, job); err != nil {
						t.Fatal(err)
					}
				}
				l, err := g.Acquire(ctx, job)
				if err != nil {
					t.Fatal(err)
				}
				for _, gg := range []*gate.Gate{g, other} {
					st := mustStatus(t, gg, job)
					if exp, got := l.Fence(), st.Fence; st.State != gate.Running || exp != got {
						t.Fatalf("%s: Status %v, fence %d; want running, fence %d", job, st.State, got, exp)
					}
				}
				if err := l.Succeed(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A gate without upstreams reports its next upstream Ready, as Status's
// doc says: the zero State is Unknown, and a caller that tests
// Upstream.State == Ready (the CLI's "no key under prefix" hint) must not
// read an unset one as refusing.
func TestStatusWithoutUpstreamsIsReady(t *testing.T) {
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: miniredis.RunT(t).Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	g := newGate(t, rdb, gate.Options{UpstreamPolicy: gate.UpstreamPolicy{Off: true}})
	st, err := g.Status(ctx, "doc")
	if err != nil {
		t.Fatal(err)
	}
	if exp, got := gate.Ready, st.Upstream.State; exp != got || st.Upstreams != nil {
		t.Fatalf("Upstream.State %v (upstreams %v), want %v and none", got, st.Upstreams, exp)
	}
}
