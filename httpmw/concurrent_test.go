package httpmw_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// TestConcurrentDuplicates: a user double-clicking, many times, through two
// server instances: exactly one request runs the handler, every other gets
// 409 running. The handler blocks until all the others have returned, so no
// duplicate can sneak in after it finished.
func TestConcurrentDuplicates(t *testing.T) {
	const n = 16
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			g1 := newGate(t, tg.Client, gate.Options{Lease: 5 * time.Second})
			g2 := newGate(t, tg.Client, gate.Options{Prefix: gatetest.Prefix(g1), Lease: 5 * time.Second})
			// The default upstream runs one call at a time until one
			// settles (issue 37.5); on a cluster its admission and the
			// job's take answer side by side, so a burst on a fresh
			// upstream can refuse every duplicate (one takes the job and
			// is refused the call, another is admitted and finds the job
			// taken). This test is about the job's lock: one call on
			// another job settles first.
			if err := g1.Do(context.Background(), "warm-up", func(context.Context, *gate.Lease) error { return nil }); err != nil {
				t.Fatal(err)
			}
			var others sync.WaitGroup
			others.Add(n - 1)
			var runs counter
			h := runs.wrap(func(w http.ResponseWriter, r *http.Request) {
				done := make(chan struct{})
				go func() { others.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					t.Error("the duplicates never all returned")
				}
				ok(w, r)
			})
			servers := []http.Handler{router(g1, httpmw.Options{}, h), router(g2, httpmw.Options{}, h)}

			codes := make(chan int, n)
			var all sync.WaitGroup
			for i := 0; i < n; i++ {
				all.Add(1)
				go func() {
					defer all.Done()
					c := post(t, servers[i%2], "/documents/42/evaluate").Code
					if c != http.StatusOK {
						others.Done()
					}
					codes <- c
				}()
			}
			all.Wait()
			close(codes)
			got := map[int]int{}
			for c := range codes {
				got[c]++
			}
			if exp := (map[int]int{200: 1, 409: n - 1}); got[200] != exp[200] || got[409] != exp[409] {
				t.Errorf("responses: exp %v, got %v", exp, got)
			}
			if exp, got := int64(1), runs.n.Load(); exp != got {
				t.Errorf("handler runs: exp %d, got %d", exp, got)
			}
		})
	}
}
