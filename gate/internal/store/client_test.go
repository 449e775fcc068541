package store

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// The same acquire on one node and on a cluster, where the job's commands
// go to its master and the upstreams' reads through the cluster client
// beside them: taken once, refused after, the upstreams read either way.
func TestAcquireOnEveryTopology(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s := New(tg.Client, Config{Lease: time.Minute, WaitTimeout: 100 * time.Millisecond, Timeout: time.Second})
			p := redistest.UniqueKey(t)
			job, up := p+":{job}", p+":{up}"
			if err := tg.Client.Process(ctx, redis.NewStatusCmd(ctx, "set", up, "c:overloaded:1:99999999999999")); err != nil {
				t.Fatal(err)
			}
			for i, want := range []bool{true, false} {
				a := &Acquire{Key: job, Token: NewToken(), Upstreams: []string{up, p + ":{none}"}}
				var r Acquired
				if err := s.Acquire(ctx, a, &r); err != nil {
					t.Fatal(err)
				}
				r.Close()
				if r.Taken != want || len(r.Upstreams) != 2 || r.Upstreams[0].Mode != ModeCooling || r.Upstreams[1].Mode != ModeReady {
					t.Fatalf("acquire %d: taken %v, upstreams %+v; want taken %v, cooling then ready", i+1, r.Taken, r.Upstreams, want)
				}
			}
			sub := s.Subscriptions()
			if sub.Open == nil || sub.Node == nil || sub.Sharded != (sub.Reload != nil) {
				t.Fatalf("subscriptions: %+v; want a way to subscribe, sharded with a reload on a cluster only", sub)
			}
			ps, checked, err := s.Policies(ctx)
			if err != nil || !checked || len(ps) == 0 {
				t.Fatalf("Policies: %+v, %v, %v; want one per server", ps, checked, err)
			}
		})
	}
}

// WaitReplicas pins the acquire's connection and waits on it; with no
// replica the wait reports too few acknowledgements.
func TestReplicateCountsAcknowledgements(t *testing.T) {
	for _, tg := range redistest.RealTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s := New(tg.Client, Config{Lease: time.Minute, WaitReplicas: 5, WaitTimeout: 20 * time.Millisecond, Timeout: time.Second})
			if !s.CanPin() {
				t.Fatal("a go-redis client cannot pin a connection")
			}
			a := &Acquire{Key: redistest.UniqueKey(t) + ":{job}", Token: NewToken()}
			var r Acquired
			if err := s.Acquire(ctx, a, &r); err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if err := s.Replicate(ctx, &r); err == nil || !Reached(err) {
				t.Fatalf("Replicate with 5 wanted: %v, want a not-replicated error that counts as reached", err)
			}
		})
	}
}

// Policies names each server as the client was given it (not as the
// server sees the connection) with the policy it reports; a server whose
// ACL refuses CONFIG GET is listed with the refusal, not a network error.
func TestPoliciesNameServersAndTheirPolicy(t *testing.T) {
	srv := redistest.FullServer(t) // maxmemory-policy noeviction
	ctx := context.Background()
	_, port, _ := strings.Cut(srv.Addr(), ":")
	addr := "localhost:" + port
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = rdb.Close() })
	ps, checked, err := New(rdb, Config{Lease: time.Minute}).Policies(ctx)
	if err != nil || !checked || len(ps) != 1 || ps[0] != (Policy{Addr: addr, Value: "noeviction"}) {
		t.Fatalf("Policies: %+v, %v, %v; want %s with noeviction", ps, checked, err, addr)
	}

	prefix := redistest.UniqueKey(t)
	acl := redistest.ACLServer(t, prefix, nil) // no +config|get
	ps, checked, err = New(acl.Client(t), Config{Lease: time.Minute}).Policies(ctx)
	if err != nil || !checked || len(ps) != 1 || ps[0].Addr != acl.Addr() || ps[0].Refusal == nil || ps[0].Value != "" {
		t.Fatalf("Policies without CONFIG GET: %+v, %v, %v; want %s listed with the refusal", ps, checked, err, acl.Addr())
	}
}

// With as many replicas as WaitReplicas acknowledging, Replicate reports
// the acquire replicated.
func TestReplicateWithEnoughReplicas(t *testing.T) {
	master := redistest.Server(t)
	replicaOf(t, strconv.Itoa(master.Port()))
	ctx := context.Background()
	s := New(master.Client(t), Config{Lease: time.Minute, WaitReplicas: 1, WaitTimeout: 5 * time.Second, Timeout: time.Second})
	var r Acquired
	if err := s.Acquire(ctx, &Acquire{Key: redistest.UniqueKey(t), Token: NewToken()}, &r); err != nil || !r.Taken {
		t.Fatalf("acquire: taken %v, %v", r.Taken, err)
	}
	defer r.Close()
	if err := s.Replicate(ctx, &r); err != nil {
		t.Fatalf("Replicate with its one replica connected: %v, want replicated", err)
	}
}
