package openaisdk_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/classify/sdk/openaisdk"
	"github.com/retrygate/retrygate/gate"
)

// TestMidStreamRateLimitThroughTheGate: a rate limit that arrives in the
// middle of an openai-go stream cools the upstream and never counts toward
// MaxAttempts: with MaxAttempts 1, a counted attempt would mark the job
// Failed at once.
func TestMidStreamRateLimitThroughTheGate(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { rdb.Close() })
	g, err := gate.New(rdb, gate.Options{Classify: classify.Chain(openaisdk.Rule), Upstream: "openai:test", Backoff: gate.Backoff{MaxAttempts: 1}})
	if err != nil {
		t.Fatal(err)
	}
	var upstream atomic.Int32
	client := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		upstream.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, firstChunk)
		io.WriteString(w, `data: {"error":{"message":"Rate limit reached for gpt-4o on tokens per min (TPM).","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`+"\n\n")
	}))
	ctx := context.Background()
	call := func() error {
		_, err := gate.Call(ctx, g, "doc-1", func(ctx context.Context, _ *gate.Lease) (string, error) {
			s := client.Chat.Completions.NewStreaming(ctx, params)
			defer s.Close()
			var text string
			for s.Next() {
				if c := s.Current(); len(c.Choices) > 0 {
					text += c.Choices[0].Delta.Content
				}
			}
			return text, s.Err()
		})
		return err
	}

	err = call()
	var ce *gate.CallError
	if !errors.As(err, &ce) || ce.Verdict.Class != classify.ClassTransient || !ce.Verdict.ProviderWide || ce.Verdict.Reason != classify.ReasonRateLimited {
		t.Fatalf("%v, want the call's provider-wide rate limit", err)
	}
	st, err := g.Status(ctx, "doc-1")
	if err != nil {
		t.Fatal(err)
	}
	if st.State == gate.Failed || st.Attempts != 0 {
		t.Fatalf("job %v with %d attempts, want not Failed and no attempt counted", st.State, st.Attempts)
	}
	if st.Upstream.State == gate.Ready {
		t.Fatal("the upstream is ready, want it cooling")
	}
	calls := upstream.Load()
	if err := call(); !errors.Is(err, gate.ErrUpstreamCooling) && !errors.Is(err, gate.ErrCoolingDown) {
		t.Fatalf("the next call got %v, want a refusal while the upstream cools", err)
	}
	if upstream.Load() != calls {
		t.Fatal("the provider was called while the upstream cooled")
	}
}
