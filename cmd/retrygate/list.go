package main

import (
	"context"
	"fmt"
	"github.com/retrygate/retrygate/internal/keyspace"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
)

// listStates are the --state names; "cooling" is short for cooling_down.
var listStates = map[string]gate.State{
	"cooling": gate.CoolingDown, "cooling_down": gate.CoolingDown,
	"failed": gate.Failed, "running": gate.Running, "done": gate.Done,
}

const (
	defaultListLimit = 100
	scanCount        = 500 // keys per SCAN call
	statusWorkers    = 8   // parallel Status calls per SCAN page
)

func listCommand() *command {
	var (
		state, match string
		limit        int
	)
	return &command{
		name: "list", redis: true, prefix: true,
		summary: "list jobs that hold a key: running, cooling, failed or done (SCAN, on every master of a cluster; never KEYS)",
		flags: func(fs *flagSet) {
			fs.StringVar(&state, "state", "", "only jobs in this `STATE`: cooling, failed, running or done")
			fs.IntVar(&limit, "limit", defaultListLimit, "stop after `N` jobs; 0 = no limit")
			fs.StringVar(&match, "match", "", "only jobs whose key contains `TEXT` (an id: list --match 42 finds \"/documents/{id}/evaluate 42\")")
		},
		run: func(ctx context.Context, c *cli, args []string) error {
			return runList(ctx, c, args, state, match, limit)
		},
	}
}

type listJSON struct {
	Jobs         []statusJSON `json:"jobs"`
	LimitReached bool         `json:"limit_reached"`
	// NoKeysUnderPrefix: no job listed, and not one key lives under
	// --prefix (a typo?).
	NoKeysUnderPrefix bool `json:"no_keys_under_prefix,omitempty"`
}

func runList(ctx context.Context, c *cli, args []string, stateName, match string, limit int) error {
	if len(args) > 0 {
		return usageErrorf("unexpected argument %q", echo(args[0]))
	}
	var want *gate.State
	if stateName != "" {
		st, ok := listStates[stateName]
		if !ok {
			return usageErrorf("unknown --state %q: use cooling, failed, running or done", stateName)
		}
		want = &st
	}
	if limit < 0 {
		return usageErrorf("--limit must not be negative")
	}
	match, err := parseName("--match", match)
	if err != nil {
		return err
	}
	g, err := c.gate(false)
	if err != nil {
		return err
	}
	l := &lister{g: g, prefix: c.prefix, want: want, limit: limit, match: match}
	if err := forEachNode(ctx, c.rdb, l.scan); err != nil {
		return fmt.Errorf("%w: scan: %w", gate.ErrUnavailable, err)
	}
	if l.err != nil {
		return l.err
	}
	jobs := l.found
	slices.SortFunc(jobs, func(a, b gate.Status) int { return strings.Compare(a.Job, b.Job) })
	truncated := limit > 0 && len(jobs) >= limit
	if truncated {
		jobs = jobs[:limit]
	}

	noKeys := false
	if len(jobs) == 0 && match == "" {
		has, sure := c.prefixKeys(ctx)
		noKeys = sure && !has
	}
	if c.json {
		out := listJSON{Jobs: []statusJSON{}, LimitReached: truncated, NoKeysUnderPrefix: noKeys}
		for _, st := range jobs {
			out.Jobs = append(out.Jobs, toStatusJSON(st))
		}
		return writeJSON(c.stdout, out)
	}
	tw := table(c.stdout)
	row(tw, "JOB", "STATE", "REASON", "ATTEMPTS", "TTL")
	for _, st := range jobs {
		reason := printable(st.Reason)
		if reason == "" {
			reason = "-"
		}
		row(tw, printable(st.Job), st.State, reason, st.Attempts, fmtDur(st.TTL))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if truncated {
		fmt.Fprintf(c.stderr, "retrygate: list: stopped at --limit %d; there may be more\n", limit)
	}
	if noKeys {
		fmt.Fprintf(c.stderr, "retrygate: list: no key under prefix %s: is --prefix right? (the gate's Options.Prefix; default %q)\n",
			printable(c.prefix), keyspace.DefaultPrefix)
	}
	return nil
}

// forEachNode runs fn on every master of a cluster, every shard of a ring,
// or the one server.
func forEachNode(ctx context.Context, rdb redis.UniversalClient, fn func(context.Context, *redis.Client) error) error {
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Ring:
		return c.ForEachShard(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	}
	return fmt.Errorf("unsupported client %T", rdb)
}

// lister collects job statuses from SCAN pages of several nodes at once.
type lister struct {
	g      *gate.Gate
	prefix string
	want   *gate.State
	limit  int
	match  string // keep jobs whose key contains it
	skip   string // drop this job
	pages  int    // SCAN calls per node at most; 0 = no bound

	mu    sync.Mutex
	found []gate.Status
	err   error
	full  atomic.Bool
}

func (l *lister) scan(ctx context.Context, node *redis.Client) error {
	pattern := keyspace.JobPattern(l.prefix)
	var cursor uint64
	for page := 1; !l.full.Load(); page++ {
		keys, next, err := node.Scan(ctx, cursor, pattern, scanCount).Result()
		if err != nil {
			return err
		}
		var jobs []string
		for _, k := range keys {
			job, ok := keyspace.JobFromKey(l.prefix, k)
			if ok && job != l.skip && strings.Contains(job, l.match) {
				jobs = append(jobs, job)
			}
		}
		l.statusAll(ctx, jobs)
		if cursor = next; cursor == 0 || (l.pages > 0 && page >= l.pages) {
			return nil
		}
	}
	return nil
}

// statusAll reads the jobs' states with a few Status calls in flight.
func (l *lister) statusAll(ctx context.Context, jobs []string) {
	sem := make(chan struct{}, statusWorkers)
	var wg sync.WaitGroup
	for _, job := range jobs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			st, err := l.g.Status(ctx, job)
			l.mu.Lock()
			defer l.mu.Unlock()
			switch {
			case err != nil:
				if l.err == nil {
					l.err = err
				}
			case st.State == gate.Ready: // expired since the SCAN
			case l.want != nil && st.State != *l.want:
			default:
				l.found = append(l.found, st)
				if l.limit > 0 && len(l.found) >= l.limit {
					l.full.Store(true)
				}
			}
		}()
	}
	wg.Wait()
}

const (
	similarLimit = 5
	similarPages = 20 // SCAN calls per node: 10,000 keys at scanCount 500
)

// similar returns up to similarLimit jobs, sorted, whose key contains job
// and that hold a key, searching a bounded part of the keyspace. It is
// advice: an error (SCAN not allowed, a timeout) returns what was found.
func (c *cli) similar(ctx context.Context, g *gate.Gate, job string) []gate.Status {
	l := &lister{g: g, prefix: c.prefix, limit: similarLimit, match: job, skip: job, pages: similarPages}
	_ = forEachNode(ctx, c.rdb, l.scan)
	slices.SortFunc(l.found, func(a, b gate.Status) int { return strings.Compare(a.Job, b.Job) })
	if len(l.found) > similarLimit {
		l.found = l.found[:similarLimit]
	}
	return l.found
}
