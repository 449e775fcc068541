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

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// tracing is what a tracing or metrics wrapper looks like: it embeds the
// client and overrides nothing the gate uses.
type tracing struct{ *redis.Client }

// The topology decides how commands are sent, never which logic runs: a
// wrapper that embeds a *redis.Client (it keeps the client's methods:
// PUBLISH, pinned connections, subscriptions) is the client, and sends
// what it sends: an acquire whose upstream has a budget is one script on
// one node (the upstream judged before the job is taken), and so is its
// refusal. One that exposes only gate.Client may front a cluster, so its
// acquire is as on a cluster: the job's commands first (its PTTL, SET NX
// GET, TIME and the fence's script), then, the job taken, the upstream's
// GET and its budget's admission, two round trips; a job refused by its
// value is one, and asks no upstream. The rest is the same for a release,
// a failure and a refusal.
func TestWrappedClientKeepsTheLogic(t *testing.T) {
	srv := redistest.Server(t)
	for _, tc := range []struct {
		name             string
		wrap             func(*redis.Client) gate.Client
		acquire, refusal []string
	}{
		{"embedding wrapper", func(c *redis.Client) gate.Client { return tracing{c} }, []string{"evalsha"}, []string{"evalsha"}},
		{"narrow wrapper", func(c *redis.Client) gate.Client { return &gatetest.Flaky{Client: c} },
			[]string{"[pttl set time evalsha]", "[get evalsha]"}, []string{"[pttl set time evalsha]"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := srv.Client(t)
			names := &redistest.Commands{}
			c.AddHook(names)
			g := newGate(t, tc.wrap(c), gate.Options{Upstream: redistest.UniqueKey(t), Cooldown: time.Minute})
			// Load the scripts and open the connection first.
			if err := g.Do(context.Background(), "warm-up", okFn); err != nil {
				t.Fatal(err)
			}
			_ = failWith(t, g, "warm-up", errTransient)
			_ = blocked(t, g, "warm-up")
			names.Take()
			if err := g.Do(context.Background(), "job", okFn); err != nil {
				t.Fatal(err)
			}
			// The done mark, the settle, what the call taught the learned
			// rate (no reading came back; the release's script, though the
			// call was not reserved), the call durations.
			if exp, got := append(tc.acquire[:len(tc.acquire):len(tc.acquire)], "[set evalsha evalsha evalsha]"), names.Take(); !slices.Equal(got, exp) {
				t.Fatalf("acquire and release sent %v, want %v", got, exp)
			}
			_ = failWith(t, g, "job", errTransient)
			_ = blocked(t, g, "job")
			// The settle, the lesson, the call durations.
			exp := append(tc.acquire[:len(tc.acquire):len(tc.acquire)], "[evalsha evalsha evalsha]")
			if exp, got := append(exp, tc.refusal...), names.Take(); !slices.Equal(got, exp) {
				t.Fatalf("a failure and a refusal sent %v, want %v", got, exp)
			}
		})
	}
}

// WaitReplicas needs a connection it can pin: an embedding wrapper has
// one, a narrow wrapper does not and New says so.
func TestWaitReplicasNeedsAPinnableClient(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	if _, err := gate.New(tracing{rdb}, gate.Options{Redis: gate.RedisPolicy{WaitReplicas: 1}}); err != nil {
		t.Fatalf("embedding wrapper: %v", err)
	}
	if _, err := gate.New(&gatetest.Flaky{Client: rdb}, gate.Options{Redis: gate.RedisPolicy{WaitReplicas: 1}}); err == nil {
		t.Fatal("narrow wrapper accepted with WaitReplicas")
	}
}

// spentPipes is a wrapper whose pipelines serve one Exec each, as a
// wrapper's Pipeliner may (it holds state past Exec).
type spentPipes struct {
	gate.Client
	t     *testing.T
	execs atomic.Int64
}

func (s *spentPipes) Pipeline() redis.Pipeliner {
	return &spentPipe{Pipeliner: s.Client.Pipeline(), s: s}
}

type spentPipe struct {
	redis.Pipeliner
	s     *spentPipes
	spent bool
}

func (p *spentPipe) Exec(ctx context.Context) ([]redis.Cmder, error) {
	if p.spent {
		p.s.t.Error("a wrapper's pipeline was executed twice: the gate reused a Pipeliner that is not go-redis's own")
	}
	p.spent = true
	p.s.execs.Add(1)
	return p.Pipeliner.Exec(ctx)
}

// TestWrapperPipelinesNotReused: a Gate reuses the pipelines of go-redis's
// own clients, never a wrapper's, which may hold state past Exec.
func TestWrapperPipelinesNotReused(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	c := &spentPipes{Client: mc, t: t}
	g, err := gate.New(c, gate.Options{Prefix: "spent", Upstream: "up"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 5 {
		if err := g.Do(ctx, "job", func(context.Context, *gate.Lease) error { return nil }); err != nil {
			t.Fatalf("Do %d: %v", i, err)
		}
	}
	if n := c.execs.Load(); n < 10 {
		t.Fatalf("%d pipelines executed for 5 Dos with an upstream, want at least 10 (the test no longer sees them)", n)
	}
}

// TestWaitReplicasOnClusterReadsUpstreamsThroughTheCluster: with
// WaitReplicas on a cluster the job's commands go to a connection pinned to
// its master, and the upstream's GET, whose key lives on another master,
// through the cluster client: the call runs on the ready upstream and is
// refused once the upstream cools.
func TestWaitReplicasOnClusterReadsUpstreamsThroughTheCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 6-node cluster")
	}
	cl := redistest.Cluster(t, 3, 1)
	rdb := cl.Client(t)
	ctx := context.Background()
	prefix := redistest.UniqueKey(t)
	upstreamKey, _ := keyspace.Upstream(prefix, "up")
	sm, err := rdb.MasterForKey(ctx, upstreamKey)
	if err != nil {
		t.Fatal(err)
	}
	job := ""
	for i := 0; job == ""; i++ {
		j := "job-" + strconv.Itoa(i)
		if m, err := rdb.MasterForKey(ctx, keyspace.Job(prefix, j)); err == nil && m.Options().Addr != sm.Options().Addr {
			job = j
		}
	}
	g := newGate(t, rdb, gate.Options{Prefix: prefix, Upstream: "up",
		Cooldown: time.Hour, Classify: upstreamClassifier(time.Hour),
		Backoff: gate.Backoff{Jitter: -1},
		Redis:   gate.RedisPolicy{WaitReplicas: 1, WaitTimeout: 5 * time.Second}})
	var upstream string
	if err := g.Do(ctx, job, func(_ context.Context, l *gate.Lease) error { upstream = l.Upstream(); return nil }); err != nil {
		t.Fatalf("Do with the upstream's key on another master: %v", err)
	}
	if upstream != "up" {
		t.Fatalf("lease upstream %q, want up", upstream)
	}
	if err := failWith(t, g, job, errRateLimited); err == nil {
		t.Fatal("a provider-wide rate limit returned nil")
	}
	var b *gate.BlockedError
	if err := g.Do(ctx, job+"-next", func(context.Context, *gate.Lease) error { return nil }); !errors.As(err, &b) || b.State != gate.UpstreamCooling {
		t.Fatalf("Do while the upstream cools: %v, want an UpstreamCooling refusal", err)
	}
}
