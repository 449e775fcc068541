package gate_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

// A gate with upstreams in order runs each job on the first one that takes
// calls, under one job lock: a rate limit cools the upstream it came from,
// and the job's next call runs on the next one at once.
func ExampleOptions_fallbacks() {
	mr, _ := miniredis.Run() // or your Redis
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})

	// One client per upstream: the same model behind two deployments.
	models := map[string]func(ctx context.Context, doc string) error{
		"openai": func(context.Context, string) error {
			return &classify.HTTPError{StatusCode: http.StatusTooManyRequests,
				Header: http.Header{"Retry-After": {"60"}}} // the whole key is rate-limited
		},
		"azure-openai": func(context.Context, string) error { return nil },
	}
	g, err := gate.New(rdb, gate.Options{Upstream: "openai", UpstreamPolicy: gate.UpstreamPolicy{Fallbacks: []string{"azure-openai"}}})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	for range 2 {
		err := g.Do(ctx, "doc-1", func(ctx context.Context, l *gate.Lease) error {
			return models[l.Upstream()](ctx, "doc-1") // call the upstream the lease names
		})
		var ce *gate.CallError
		switch {
		case err == nil:
			fmt.Println("done")
		case errors.As(err, &ce) && ce.State == gate.Ready:
			fmt.Printf("%s: %s; the next call runs on the next upstream\n", ce.Verdict.Reason, ce.State)
		default:
			fmt.Println(err)
		}
	}
	st, _ := g.Status(ctx, "doc-2")
	for _, u := range st.Upstreams {
		fmt.Println(u.Upstream, u.State)
	}
	// Output:
	// rate_limited: ready; the next call runs on the next upstream
	// done
	// openai cooling_down
	// azure-openai ready
}
