package httpmw_test

import (
	"net/http"
	"sync"
	"sync/atomic"
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
			// others is closed once n-1 requests returned: a count, not a
			// WaitGroup, so a burst that refuses every request fails the
			// test instead of panicking it.
			others := make(chan struct{})
			var refused atomic.Int64
			var runs counter
			h := runs.wrap(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-others:
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
					if c != http.StatusOK && refused.Add(1) == n-1 {
						close(others)
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
