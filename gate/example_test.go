package gate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

// summarize stands in for an expensive LLM call.
func summarize(ctx context.Context, doc string) (string, error) {
	if doc == "doc-7" {
		return "", errors.New("429 Too Many Requests")
	}
	return "summary of " + doc, nil
}

// The quickstart: wrap the call; a failure cools the job down instead of
// letting every retry call the model again.
func Example() {
	mr, _ := miniredis.Run() // or your Redis
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	g, err := gate.New(rdb, gate.Options{Cooldown: time.Minute, Backoff: gate.Backoff{Jitter: -1}})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for _, doc := range []string{"doc-1", "doc-7", "doc-7"} {
		out, err := gate.Call(ctx, g, doc, func(ctx context.Context, l *gate.Lease) (string, error) {
			return summarize(ctx, doc)
		})
		if d, ok := gate.RetryAfter(err); ok {
			fmt.Printf("%s: retry in %v (%v)\n", doc, d.Round(time.Second), errors.Is(err, gate.ErrCoolingDown)) // the failing call and the refusal alike
			continue
		}
		fmt.Println(doc+":", out)
	}
	// Output:
	// doc-1: summary of doc-1
	// doc-7: retry in 1m0s (true)
	// doc-7: retry in 1m0s (true)
}

func ExampleGate_Do() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	g, _ := gate.New(redis.NewClient(&redis.Options{Addr: mr.Addr()}), gate.Options{Backoff: gate.Backoff{MaxAttempts: 3}})
	ctx := context.Background()

	// The model ignored the required output format: transient, and
	// MaxAttempts turns repeated failures into a permanent mark.
	err := g.Do(ctx, "doc-9", func(ctx context.Context, l *gate.Lease) error {
		return classify.Permanent(errors.New("prompt is too long"))
	})
	var ce *gate.CallError
	if errors.As(err, &ce) {
		fmt.Println("state:", ce.State)
	}
	err = g.Do(ctx, "doc-9", func(ctx context.Context, l *gate.Lease) error { return nil })
	fmt.Println(errors.Is(err, gate.ErrFailed))
	// Output:
	// state: failed
	// true
}

func ExampleGate_Acquire() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	g, _ := gate.New(redis.NewClient(&redis.Options{Addr: mr.Addr()}), gate.Options{})
	ctx := context.Background()

	l, err := g.Acquire(ctx, "doc-3")
	if err != nil {
		fmt.Println("refused:", err)
		return
	}
	// ... run the call under l.Context(), then report the outcome once:
	if err := l.Succeed(ctx); err != nil {
		fmt.Println("release:", err)
	}
	st, _ := g.Status(ctx, "doc-3")
	fmt.Println(st.State)
	// Output: ready
}

// A store that remembers the highest fence per job rejects a stale owner
// (paused past its lease while another took over).
func ExampleLease_Fence() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	g, _ := gate.New(rdb, gate.Options{})
	ctx := context.Background()

	highest := map[string]int64{}
	save := func(job string, fence int64) error {
		if fence < highest[job] {
			return errors.New("stale writer rejected")
		}
		highest[job] = fence
		return nil
	}
	var first int64
	_ = g.Do(ctx, "doc-5", func(ctx context.Context, l *gate.Lease) error {
		first = l.Fence()
		return nil
	})
	_ = g.Do(ctx, "doc-5", func(ctx context.Context, l *gate.Lease) error {
		return save("doc-5", l.Fence())
	})
	fmt.Println(save("doc-5", first)) // the first owner wakes up late
	// Output: stale writer rejected
}

func ExampleRetryAfter() {
	err := error(&gate.BlockedError{Job: "doc-1", State: gate.CoolingDown, RetryAfter: 252 * time.Second})
	if d, ok := gate.RetryAfter(err); ok {
		fmt.Println("retry available in", d)
	}
	// Output: retry available in 4m12s
}
