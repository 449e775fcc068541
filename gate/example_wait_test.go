package gate_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
)

// A duplicate of a running job (a second worker, a double click) waits for
// the running call instead of failing with ErrInFlight, and gets what that
// call left: here the job is done, so the duplicate reads the stored
// result instead of calling the model again.
func ExampleGate_AcquireWait() {
	mr, _ := miniredis.Run() // or your Redis
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	g, err := gate.New(rdb, gate.Options{Retention: gate.Retention{Done: time.Hour}})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	first, err := g.Acquire(ctx, "doc-1")
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		time.Sleep(20 * time.Millisecond) // the model call
		_ = first.Succeed(ctx)
	}()

	l, err := g.AcquireWait(ctx, "doc-1", 30*time.Second)
	switch {
	case err == nil: // the job was free: run it, then settle its lease
		if err := l.Succeed(ctx); err != nil {
			log.Printf("settle doc-1: %v", err) // the lock expires with its lease
		}
		fmt.Println("ran the job")
	case errors.Is(err, gate.ErrDone):
		fmt.Println("done by the running call: read its result")
	case errors.Is(err, gate.ErrInFlight):
		d, _ := gate.RetryAfter(err)
		fmt.Println("still running after 30 s; try again in", d)
	default:
		fmt.Println("refused:", err) // cooling down, failed, Redis unavailable
	}
	// Output: done by the running call: read its result
}
