package gate_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// keyWide429 is OpenAI's refusal of a key at its requests-per-minute
// limit, its wait stated only in the message (the shape of
// https://github.com/binary-husky/gpt_academic/issues/1213, as
// classify/api_test.go's openAIRateLimitReqs and llmfake send it).
var keyWide429 = &classify.HTTPError{StatusCode: 429, Body: []byte(`{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)}

// The README's Quickstart, copied (Example: no Upstream), protects the
// provider as a gate with a named upstream does: 10 jobs against a
// key-wide 429 make one call, and every one of them waits the 20 s the
// message states, not the job's minute of Cooldown.
func TestQuickstartCallsOnceAgainstAKeyWide429(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  gate.Options
		calls int
	}{
		{"the Quickstart's options", gate.Options{Cooldown: time.Minute, Backoff: gate.Backoff{Jitter: -1}}, 1},
		{"upstreams off: every job calls", gate.Options{Cooldown: time.Minute, Backoff: gate.Backoff{Jitter: -1},
			UpstreamPolicy: gate.UpstreamPolicy{Off: true}}, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rdb := redistest.Miniredis(t)
			g, err := gate.New(rdb, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			calls := 0
			for i := range 10 {
				_, err := gate.Call(ctx, g, fmt.Sprintf("doc-%d", i), func(ctx context.Context, l *gate.Lease) (string, error) {
					calls++
					return "", keyWide429
				})
				d, ok := gate.RetryAfter(err)
				if !ok || d < 19*time.Second || d > 20*time.Second {
					t.Fatalf("doc-%d: %v (retry after %v), want the 20 s the message states", i, err, d)
				}
				if calls > 1 && tc.calls == 1 {
					t.Fatalf("doc-%d made call %d: %v", i, calls, err)
				}
				if i > 0 && tc.calls == 1 && !errors.Is(err, gate.ErrUpstreamCooling) {
					t.Fatalf("doc-%d: %v, want ErrUpstreamCooling", i, err)
				}
			}
			if calls != tc.calls {
				t.Fatalf("%d calls for 10 jobs, want %d", calls, tc.calls)
			}
		})
	}
}
