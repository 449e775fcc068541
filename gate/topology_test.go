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

// The topology decides how commands are sent, never which logic runs: a
// wrapper that embeds a *redis.Client (it keeps the client's methods:
// PUBLISH, pinned connections, subscriptions) and one that exposes only
// gate.Client send the same commands for an acquire, a release, a
// failure and a refusal.
func TestWrappedClientKeepsTheLogic(t *testing.T) {
	srv := redistest.Server(t)
	for _, tc := range []struct {
		name string
		wrap func(*redis.Client) gate.Client
	}{
		{"embedding wrapper", func(c *redis.Client) gate.Client { return tracing{c} }},
		{"narrow wrapper", func(c *redis.Client) gate.Client { return &gatetest.Flaky{Client: c} }},
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
			if exp, got := []string{"[pttl set time get]", "[set evalsha]"}, names.take(); !equalNames(got, exp) {
				t.Fatalf("acquire and release sent %v, want %v", got, exp)
			}
			_ = failWith(t, g, "job", errTransient)
			_ = blocked(t, g, "job")
			if exp, got := []string{"[pttl set time get]", "evalsha", "[pttl set time get]"}, names.take(); !equalNames(got, exp) {
				t.Fatalf("a failure and a refusal sent %v, want %v", got, exp)
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
// one, a narrow wrapper does not and New says so.
func TestWaitReplicasNeedsAPinnableClient(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	if _, err := gate.New(tracing{rdb}, gate.Options{WaitReplicas: 1}); err != nil {
		t.Fatalf("embedding wrapper: %v", err)
	}
	if _, err := gate.New(&gatetest.Flaky{Client: rdb}, gate.Options{WaitReplicas: 1}); err == nil {
		t.Fatal("narrow wrapper accepted with WaitReplicas")
	}
}
