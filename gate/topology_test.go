package gate_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/gatetest"
	"github.com/retrygate/retrygate/internal/redistest"
)

// tracing is what a tracing or metrics wrapper looks like: it embeds the
// client and overrides nothing the gate uses.
type tracing struct{ *redis.Client }

// The topology is read from the methods the client has, so a wrapper that
// embeds a *redis.Client keeps the one-node behaviour: with a Scope, an
// acquire and a refusal are one script, and a retry of a known cooldown is
// a plain GET. A wrapper exposing only the scripting commands (and Get)
// gets the cluster-safe form, the scope read on its own slot.
func TestWrappedClientKeepsTopology(t *testing.T) {
	srv := redistest.Server(t)
	for _, tc := range []struct {
		name    string
		wrap    func(*redis.Client) redis.Scripter
		acquire []string // commands of a first acquire
		known   []string // commands of a retry of a cooldown seen before
	}{
		{"embedding wrapper", func(c *redis.Client) redis.Scripter { return tracing{c} },
			[]string{"evalsha"}, []string{"get"}},
		{"scripting-only wrapper", func(c *redis.Client) redis.Scripter { return &gatetest.Flaky{Scripter: c} },
			[]string{"evalsha", "evalsha"}, []string{"get"}}, // Flaky has Get
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := srv.Client(t)
			names := &cmdNames{}
			c.AddHook(names)
			g := newGate(t, tc.wrap(c), gate.Options{Scope: redistest.UniqueKey(t), Cooldown: time.Minute})
			// Load the scripts and open the connection first.
			if err := g.Do(context.Background(), "warm-up", okFn); err != nil {
				t.Fatal(err)
			}
			_ = failWith(t, g, "warm-up", errTransient)
			_ = blocked(t, g, "warm-up")
			names.take()
			if err := g.Do(context.Background(), "job", okFn); err != nil {
				t.Fatal(err)
			}
			if got := names.take(); !equalNames(got[:len(got)-1], tc.acquire) {
				t.Fatalf("acquire sent %v, want %v then the release", got, tc.acquire)
			}
			_ = failWith(t, g, "job", errTransient)
			_ = blocked(t, g, "job")
			names.take()
			_ = blocked(t, g, "job")
			if got := names.take(); !equalNames(got, tc.known) {
				t.Fatalf("a known cooldown's retry sent %v, want %v", got, tc.known)
			}
		})
	}
}

func equalNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// WaitReplicas needs a connection it can pin: an embedding wrapper has
// one, a scripting-only wrapper does not and New says so.
func TestWaitReplicasNeedsAPinnableClient(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	if _, err := gate.New(tracing{rdb}, gate.Options{WaitReplicas: 1}); err != nil {
		t.Fatalf("embedding wrapper: %v", err)
	}
	if _, err := gate.New(&gatetest.Flaky{Scripter: rdb}, gate.Options{WaitReplicas: 1}); err == nil {
		t.Fatal("scripting-only wrapper accepted with WaitReplicas")
	}
}
