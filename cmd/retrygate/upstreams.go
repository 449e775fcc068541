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
	searchPages  = 1000 // SCAN calls per node (COUNT searchCount): a million keys
	searchCount  = 1000
	searchTime   = 1500 * time.Millisecond
	maxUpstreams = 100 // upstreams read, in one round trip
)

// upstreamSearch is what a search for the upstreams under a prefix found:
// without --upstream, status cannot know which upstream a job's gate
// uses, so it reports every upstream that refuses jobs now.
type upstreamSearch struct {
	names    int                   // upstream keys found, ready ones included
	refusing []gate.UpstreamStatus // cooling or paused, by name
	complete bool                  // every node scanned to its end, every upstream read
	err      error                 // why the search stopped, if it did
}

// findUpstreams scans every master for the prefix's upstream keys, bounded
// in calls and time, and reads every upstream's state in one round trip.
func (c *cli) findUpstreams(ctx context.Context) upstreamSearch {
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
	s := upstreamSearch{names: len(names), complete: complete, err: err}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	slices.Sort(sorted)
	if len(sorted) > maxUpstreams {
		sorted, s.complete = sorted[:maxUpstreams], false
	}
	g := c.upstreamsGate(sorted)
	if g == nil {
		return s
	}
	ups, rerr := g.Upstreams(ctx)
	if rerr != nil {
		s.complete = false
		if s.err == nil {
			s.err = rerr
		}
		return s
	}
	for _, u := range ups {
		if u.State != gate.Ready {
			s.refusing = append(s.refusing, u)
		}
	}
	return s
}

// upstreamsGate is a gate whose upstreams are names, in order, so that
// one Upstreams call reads them all; nil without names. A name no gate
// could have (a key written by hand) is left out.
func (c *cli) upstreamsGate(names []string) *gate.Gate {
	opts := func(names []string) gate.Options {
		return gate.Options{Prefix: c.prefix, Upstream: names[0], UpstreamPolicy: gate.UpstreamPolicy{Fallbacks: names[1:]}}
	}
	if len(names) == 0 {
		return nil
	}
	if g, err := gate.New(c.rdb, opts(names)); err == nil {
		return g
	}
	var ok []string
	for _, n := range names {
		if _, err := gate.New(c.rdb, gate.Options{Prefix: c.prefix, Upstream: n}); err == nil {
			ok = append(ok, n)
		}
	}
	if len(ok) == 0 {
		return nil
	}
	g, err := gate.New(c.rdb, opts(ok))
	if err != nil {
		return nil
	}
	return g
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

// upstreamRefusal says in words what a refusing upstream does to jobs,
// for a status read without --upstream.
func upstreamRefusal(u gate.UpstreamStatus) string {
	how := "cooling down"
	if u.State == gate.Paused {
		how = "paused"
	}
	return "upstream " + printable(u.Upstream) + " is " + how + " (" + printable(u.Reason) + ") for " + fmtDur(u.RetryAfter) +
		": every job of a gate with Upstream " + printable(u.Upstream) + " is refused"
}

// joinRefusals joins upstreamRefusal of every upstream.
func joinRefusals(us []gate.UpstreamStatus) string {
	parts := make([]string, len(us))
	for i, u := range us {
		parts[i] = upstreamRefusal(u)
	}
	return strings.Join(parts, "; ")
}
