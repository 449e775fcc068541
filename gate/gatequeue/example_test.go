package gatequeue_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gatequeue"
)

// An adapter for a queue of your own: run each job under the gate, then
// turn the plan into the queue's own verbs.
func Example() {
	mr, err := miniredis.Run() // or your Redis
	if err != nil {
		panic(err)
	}
	defer mr.Close()
	g, err := gate.New(redis.NewClient(&redis.Options{Addr: mr.Addr()}), gate.Options{Cooldown: time.Minute, Backoff: gate.Backoff{Jitter: -1}})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	work := func(job string) func(context.Context) error {
		return func(context.Context) error {
			switch job {
			case "doc-2":
				return errors.New("upstream timed out")
			case "doc-3":
				return classify.Permanent(errors.New("prompt is too long"))
			}
			return nil
		}
	}
	for _, job := range []string{"doc-1", "doc-2", "doc-2", "doc-3"} {
		plan, err := gatequeue.Run(ctx, g, job, work(job), nil)
		switch plan.Action {
		case gatequeue.Complete:
			fmt.Println(job, "done")
		case gatequeue.Retry:
			fmt.Printf("%s: run again in %v (counted %v)\n", job, plan.Wait.Round(time.Second), plan.Counted)
		case gatequeue.Cancel:
			fmt.Println(job, "never again:", plan.Reason) // plan.Wrap(err) for the queue's record
		default: // Pass: the queue's own retry policy
			fmt.Println(job, "queue decides:", err)
		}
	}
	// Output:
	// doc-1 done
	// doc-2: run again in 1m0s (counted true)
	// doc-2: run again in 1m0s (counted false)
	// doc-3 never again: permanent
}
