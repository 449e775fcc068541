package gateprom_test

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateprom"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// BenchmarkDo compares a successful Do (acquire + release) without an
// observer and with the Prometheus one, on a real redis-server (skipped
// without one: miniredis runs its Lua in-process and its allocations would
// drown the client's). The allocs/op of nil-observer is the gate's own
// cost; the difference is the adapter's.
func BenchmarkDo(b *testing.B) {
	for _, bc := range []struct {
		name string
		obs  gate.Observer
	}{
		{"nil-observer", nil},
		{"prometheus", gateprom.New(gateprom.Options{})},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := redistest.Server(b).Client(b)
			if bc.obs != nil {
				prometheus.NewRegistry().MustRegister(bc.obs.(prometheus.Collector))
			}
			g, err := gate.New(c, gate.Options{Prefix: redistest.UniqueKey(b), Observer: bc.obs})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := g.Do(ctx, "job", ok); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkObserve is the adapter alone: the cost it adds per event.
func BenchmarkObserve(b *testing.B) {
	obs := gateprom.New(gateprom.Options{})
	ctx := context.Background()
	e := gate.Event{Kind: gate.EventSettled, State: gate.CoolingDown, Upstream: "openai", Reason: "timeout", Held: 1e9, Cooldown: 3e11}
	b.ReportAllocs()
	for range b.N {
		obs.Observe(ctx, e)
	}
}
