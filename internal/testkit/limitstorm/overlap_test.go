package limitstorm_test

import (
	"sync"
	"testing"

	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// eachTarget runs f on every target at once, each in a subtest named
// after it, and returns when all have ended.
//
// A storm lasts as long as its provider's limit makes it (500 jobs at 50
// calls a second: 10 s; 300 on miniredis at 15: 20 s), not as long as the
// CPU does: its processes sit mostly idle between calls. Storms on
// different Redis servers share no key, no provider, no client and no
// process but this one, so a test's storms on its targets overlap and
// each measures what it measured alone, on a machine the others keep a
// little busier, where every storm must hold anyway
// (docs/contributing/testing.md). A test whose storms run their Gates in
// this process, or whose bound is a latency, a share of each second or
// a time from a fault, runs its targets one after the other instead.
//
// It is not t.Parallel: go test's -parallel (GOMAXPROCS, 2 on a 2-core
// machine) would run two of three targets at once and the third after.
func eachTarget(t *testing.T, targets []redistest.Target, f func(t *testing.T, tg redistest.Target)) {
	t.Helper()
	var wg sync.WaitGroup
	for _, tg := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run(tg.Name, func(t *testing.T) { f(t, tg) })
		}()
	}
	wg.Wait()
}
