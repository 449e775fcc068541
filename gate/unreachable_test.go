package gate_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
	openai "github.com/sashabaranov/go-openai"
)

// closedPort returns the address of a TCP port nobody listens on: a base
// URL pointing there is refused, as a wrong port or a stopped server is.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// refusedModel is a job function calling a model through go-openai at a
// base URL whose port refuses connections; calls counts its calls.
func refusedModel(t *testing.T, calls *atomic.Int64) func(context.Context, *gate.Lease) error {
	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = "http://" + closedPort(t) + "/v1"
	client := openai.NewClientWithConfig(cfg)
	return func(ctx context.Context, _ *gate.Lease) error {
		calls.Add(1)
		_, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "m",
			Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}}})
		return err
	}
}

// A base URL whose port refuses connections fails every job of the
// upstream. Once UnreachableJobs (3) distinct jobs showed it, the upstream
// cools: the fourth job is refused with ErrUpstreamCooling without a
// failing call of its own. A gate without an upstream calls for every job.
func TestUnreachableAddressCoolsTheUpstream(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			var calls atomic.Int64
			model := refusedModel(t, &calls)
			g := upstreamGate(t, tg, redistest.UniqueKey(t), gate.Options{Classify: classify.Default})
			for _, job := range []string{"doc-1", "doc-2", "doc-3"} {
				var ce *gate.CallError
				if err := g.Do(ctx, job, model); !errors.As(err, &ce) || ce.Verdict.Evidence != "go:refused" {
					t.Fatalf("%s: %v, want a failure with evidence go:refused", job, err)
				}
			}
			var b *gate.BlockedError
			if err := g.Do(ctx, "doc-4", model); !errors.As(err, &b) || !errors.Is(err, gate.ErrUpstreamCooling) {
				t.Fatalf("the fourth job: %v, want ErrUpstreamCooling", err)
			}
			if exp, got := int64(3), calls.Load(); exp != got {
				t.Errorf("calls: exp %d, got %d", exp, got)
			}
			if up := upstream(b); up.State != gate.CoolingDown || up.Reason != classify.ReasonNetwork ||
				up.RetryAfter <= 0 || up.RetryAfter > 10*time.Second {
				t.Errorf("upstream: %+v, want cooling (network) for its Cooldown", up)
			}

			// With upstreams off: the Free breaker, every job calls.
			calls.Store(0)
			free := newGate(t, tg.Client, gate.Options{Prefix: redistest.UniqueKey(t), Cooldown: time.Minute, UpstreamPolicy: gate.UpstreamPolicy{Off: true}})
			for _, job := range []string{"doc-1", "doc-2", "doc-3", "doc-4"} {
				if err := free.Do(ctx, job, model); !errors.Is(err, gate.ErrCoolingDown) {
					t.Fatalf("%s without an upstream: %v, want its own cooldown", job, err)
				}
			}
			if exp, got := int64(4), calls.Load(); exp != got {
				t.Errorf("calls without an upstream: exp %d, got %d", exp, got)
			}
		})
	}
}

// One job retrying its own refused connection counts once: three failures
// of the same job leave the upstream ready for the others.
func TestUnreachableSameJobCountsOnce(t *testing.T) {
	const cooldown = 20 * time.Millisecond
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			var calls atomic.Int64
			model := refusedModel(t, &calls)
			g := upstreamGate(t, tg, redistest.UniqueKey(t), gate.Options{Classify: classify.Default,
				Cooldown: cooldown,
				Backoff:  gate.Backoff{Factor: 1, Jitter: -1}})
			for i := 0; i < 3; i++ {
				if i > 0 {
					pass(tg, cooldown)
				}
				err := retryUntilRun(t, g, "doc", model)
				var ce *gate.CallError
				if !errors.As(err, &ce) || ce.Verdict.Evidence != "go:refused" {
					t.Fatalf("failure %d: %v, want go:refused", i+1, err)
				}
			}
			if up := firstUpstream(t, g); up.State != gate.Ready {
				t.Fatalf("after one job failed three times: upstream %+v, want ready", up)
			}
			if err := g.Do(ctx, "other", okFn); err != nil {
				t.Fatalf("another job: %v, want it to run", err)
			}
		})
	}
}

// retryUntilRun retries job until fn runs (its cooldown, or its upstream's,
// over) and returns Do's error; it fails t after a deadline.
func retryUntilRun(t *testing.T, g *gate.Gate, job string, fn func(context.Context, *gate.Lease) error) error {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		ran := false
		err := g.Do(context.Background(), job, func(ctx context.Context, l *gate.Lease) error {
			ran = true
			return fn(ctx, l)
		})
		if ran {
			return err
		}
		if !errors.Is(err, gate.ErrCoolingDown) && !errors.Is(err, gate.ErrUpstreamCooling) || time.Now().After(deadline) {
			t.Fatalf("%s: %v, want its cooldown to end", job, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A job that cannot reach the upstream is counted in the settle's round
// trip (acquire and settle: two, as any failure); the job that fills the
// window cools the upstream in one more. An operator's reset clears the
// count, so the jobs after a fix start from none.
func TestUnreachableCountRidesTheSettle(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	rt := &roundTrips{}
	rdb.AddHook(rt)
	ctx := context.Background()
	var calls atomic.Int64
	model := refusedModel(t, &calls)
	o := gate.Options{Prefix: redistest.UniqueKey(t), Upstream: "openai:prod-key", Cooldown: time.Minute}
	// The scripts' first runs load them (NOSCRIPT, then EVAL): run the
	// whole story once under another prefix.
	warm := newGate(t, rdb, o)
	for i := 0; i < 3; i++ {
		_ = warm.Do(ctx, "doc-"+itoa(i), model)
	}
	o.Prefix = redistest.UniqueKey(t) + "-measured"
	g := newGate(t, rdb, o)
	for i, want := range []int64{2, 2} {
		before := rt.n.Load()
		_ = g.Do(ctx, "doc-"+itoa(i), model)
		if got := rt.n.Load() - before; got != want {
			t.Errorf("job %d: %d round trips, want %d", i, got, want)
		}
	}
	if err := g.ResetUpstreams(ctx); err != nil {
		t.Fatal(err)
	}
	_ = g.Do(ctx, "doc-2", model)
	if up := firstUpstream(t, g); up.State != gate.Ready {
		t.Fatalf("a third job after a reset: upstream %+v, want ready (the count cleared)", up)
	}
	before := rt.n.Load()
	_ = g.Do(ctx, "doc-3", model)
	_ = g.Do(ctx, "doc-4", model)
	if got := rt.n.Load() - before; got != 5 {
		t.Errorf("two more jobs, the second filling the window: %d round trips, want 5", got)
	}
	if up := firstUpstream(t, g); up.State != gate.CoolingDown {
		t.Fatalf("three jobs since the reset: upstream %+v, want cooling", up)
	}
}
