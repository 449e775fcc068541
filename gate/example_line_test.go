package gate_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

// A person waiting at a screen asks for a place in line when the
// provider's budget is short: interactive callers have their turn before
// batch work, and the tenants of a class share the turns fairly. A turn
// that cannot come within the wait is refused at once, with the callers
// ahead and the expected wait.
func ExampleWithPriority() {
	mr, _ := miniredis.Run() // or your Redis
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	g, err := gate.New(rdb, gate.Options{Upstream: "openai"})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	spent(ctx, g)

	ctx = gate.WithTenant(gate.WithPriority(ctx, gate.PriorityInteractive), "acme", 1)
	l, err := g.AcquireWait(ctx, "doc-1", 500*time.Millisecond)
	var b *gate.BlockedError
	switch {
	case err == nil: // its turn came: run the call, then settle its lease
		if err := l.Succeed(ctx); err != nil {
			log.Printf("settle doc-1: %v", err)
		}
		fmt.Println("ran the job")
	case errors.As(err, &b) && b.State == gate.UpstreamCooling:
		fmt.Printf("%d ahead, its turn in about %v: after the wait\n", b.Ahead, b.RetryAfter.Round(time.Second))
	default:
		fmt.Println("refused:", err)
	}
	// Output: 0 ahead, its turn in about 1s: after the wait
}

// spent runs a call whose response said no request is left of 60 a
// minute, in OpenAI's headers
// (https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers).
func spent(ctx context.Context, g *gate.Gate) {
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", "60")
	h.Set("x-ratelimit-remaining-requests", "0")
	h.Set("x-ratelimit-reset-requests", "1m0s")
	err := g.Do(ctx, "doc-0", func(_ context.Context, l *gate.Lease) error {
		b, _ := classify.ParseBudget(h, time.Now())
		l.ObserveBudget(b)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}
