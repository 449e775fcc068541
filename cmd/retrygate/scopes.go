package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
)

// Bounds of the searches status makes on its own: a few seconds at most
// on any keyspace, and a report of what was not searched.
const (
	searchPages = 1000 // SCAN calls per node (COUNT searchCount): a million keys
	searchCount = 1000
	searchTime  = 1500 * time.Millisecond
	maxScopes   = 100 // scopes read with ScopeStatus
)

// scopeSearch is what a search for the upstream scopes under a prefix
// found: without --scope, status cannot know which scope a job's gate
// uses, so it reports every scope that refuses jobs now.
type scopeSearch struct {
	names    int                   // scope keys found, open ones included
	refusing []gate.UpstreamStatus // cooling or paused, by name
	complete bool                  // every node scanned to its end, every scope read
	err      error                 // why the search stopped, if it did
}

// findScopes scans every master for the prefix's scope keys, bounded in
// calls and time, and reads each scope's state.
func (c *cli) findScopes(ctx context.Context) scopeSearch {
	ctx, cancel := context.WithTimeout(ctx, searchTime)
	defer cancel()
	var (
		mu    sync.Mutex
		names = map[string]bool{}
	)
	complete, err := scanAll(ctx, c.rdb, keyspace.UpstreamPattern(c.prefix), func(keys []string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			if name, ok := keyspace.UpstreamFromKey(c.prefix, k); ok {
				names[name] = true
			}
		}
		return true
	})
	s := scopeSearch{names: len(names), complete: complete, err: err}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	if len(sorted) > maxScopes {
		sorted, s.complete = sorted[:maxScopes], false
	}
	for _, name := range sorted {
		g, err := gate.New(c.rdb, gate.Options{Prefix: c.prefix, Scope: name})
		if err != nil { // a key no gate of this prefix could have written
			continue
		}
		st, err := g.ScopeStatus(ctx)
		if err != nil {
			s.complete = false
			if s.err == nil {
				s.err = err
			}
			break
		}
		if st.State != gate.ScopeOpen {
			s.refusing = append(s.refusing, st)
		}
	}
	return s
}

// prefixKeys reports whether any key lives under the prefix (sure is false
// when the bounded search ended before it could tell).
func (c *cli) prefixKeys(ctx context.Context) (found, sure bool) {
	ctx, cancel := context.WithTimeout(ctx, searchTime)
	defer cancel()
	var mu sync.Mutex
	complete, _ := scanAll(ctx, c.rdb, keyspace.PrefixPattern(c.prefix), func(keys []string) bool {
		mu.Lock()
		defer mu.Unlock()
		found = found || len(keys) > 0
		return !found
	})
	return found, found || complete
}

// scanAll SCANs pattern on every node (every master of a cluster), passing
// each page's keys to page until it returns false, for at most searchPages
// calls per node. complete says every node was scanned to its end.
func scanAll(ctx context.Context, rdb redis.UniversalClient, pattern string, page func([]string) bool) (complete bool, err error) {
	var (
		mu      sync.Mutex
		partial bool
		stopped bool
	)
	err = forEachNode(ctx, rdb, func(ctx context.Context, node *redis.Client) error {
		var cursor uint64
		for i := 0; i < searchPages; i++ {
			mu.Lock()
			done := stopped
			mu.Unlock()
			if done {
				return nil
			}
			keys, next, err := node.Scan(ctx, cursor, pattern, searchCount).Result()
			if err != nil {
				return err
			}
			more := page(keys)
			mu.Lock()
			stopped = stopped || !more
			mu.Unlock()
			if cursor = next; cursor == 0 {
				return nil
			}
		}
		mu.Lock()
		partial = true
		mu.Unlock()
		return nil
	})
	if err != nil && ctx.Err() != nil {
		err = errors.New("the search took longer than " + searchTime.String())
	}
	return err == nil && !partial && !stopped, err
}

// scopeRefusal says in words what a refusing scope does to jobs, for a
// status read without --scope.
func scopeRefusal(u gate.UpstreamStatus) string {
	how := "cooling down"
	if u.State == gate.ScopePaused {
		how = "paused"
	}
	return "upstream " + printable(u.Scope) + " is " + how + " (" + printable(u.Reason) + ") for " + fmtDur(u.RetryAfter) +
		": every job of a gate with Scope " + printable(u.Scope) + " is refused"
}

// joinRefusals joins scopeRefusal of every scope.
func joinRefusals(us []gate.UpstreamStatus) string {
	parts := make([]string, len(us))
	for i, u := range us {
		parts[i] = scopeRefusal(u)
	}
	return strings.Join(parts, "; ")
}
