package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Trip gathers the commands of one round trip. Make it with Store.Trip,
// queue operations on it, Send it once, then read each operation's Reply.
// Its buffers hold the common trips without allocating.
type Trip struct {
	s     *Store
	cmds  []redis.Cmder
	evals []tripEval
	// loaded is the store's scripts as the trip's first script found them;
	// srcs the scripts it sends as source, which teach the store.
	loaded *loadedScripts
	srcs   []tripSource
	cbuf   [4]redis.Cmder
	ebuf   [2]tripEval
}

// Trip starts a round trip.
func (s *Store) Trip() Trip { return Trip{s: s} }

// Reply is an operation's answer, decoded once its trip is sent.
type Reply[T any] struct {
	cmd    redis.Cmder
	decode func(redis.Cmder) (T, error)
}

// Result decodes the reply: what the operation found or did, or the
// error Redis (or the network) gave.
func (r Reply[T]) Result() (T, error) {
	if r.cmd == nil { // nothing was queued
		var zero T
		return zero, nil
	}
	return r.decode(r.cmd)
}

// Err is the reply's error, without decoding it.
func (r Reply[T]) Err() error {
	if r.cmd == nil {
		return nil
	}
	return r.cmd.Err()
}

func (t *Trip) add(cmd redis.Cmder) {
	if t.cmds == nil {
		t.cmds = t.cbuf[:0]
	}
	t.cmds = append(t.cmds, cmd)
}

// tripEval is a script of the trip: EVALSHA when the server is known to
// have it loaded, else EVAL (its source), so that it runs in the trip's order.
// An EVALSHA answered NOSCRIPT (a restart, a failover, SCRIPT FLUSH) is
// sent again as EVAL, after the rest of the trip: see sendVia.
type tripEval struct {
	cmd    *redis.Cmd
	script *script
	keys   []string
	args   []any
}

// tripSource is a script the trip sends as source, to the server named
// node ("" on one node). Its reply teaches the store that node has it loaded.
// Kept apart from tripEval: the steady state sends none.
type tripSource struct {
	cmd    *redis.Cmd
	script *script
	node   string
}

func (t *Trip) eval(ctx context.Context, s *script, keys []string, args ...any) *redis.Cmd {
	node, named := "", true
	if t.s.addr != nil && len(keys) > 0 {
		node, named = t.s.addr(ctx, keys[0])
	}
	if t.loaded == nil {
		t.loaded = t.s.loaded.Load()
	}
	src := (!named || !t.loaded.has(node, s)) && !t.s.sourceRefused.Load()
	a := make([]any, 0, 3+len(keys)+len(args))
	if src {
		a = append(a, "eval", s.src, len(keys))
	} else {
		a = append(a, "evalsha", s.hash, len(keys))
	}
	for _, k := range keys {
		a = append(a, k)
	}
	a = append(a, args...)
	cmd := redis.NewCmd(ctx, a...)
	t.add(cmd)
	if t.evals == nil {
		t.evals = t.ebuf[:0]
	}
	t.evals = append(t.evals, tripEval{cmd: cmd, script: s, keys: keys, args: args})
	if src && named {
		t.srcs = append(t.srcs, tripSource{cmd: cmd, script: s, node: node})
	}
	return cmd
}

func (t *Trip) get(ctx context.Context, key string) *redis.StringCmd {
	cmd := redis.NewStringCmd(ctx, "get", key)
	t.add(cmd)
	return cmd
}

// Send sends the trip's commands through the store's client; each
// operation's Reply then holds its answer or error.
func (t *Trip) Send(ctx context.Context) { t.sendVia(ctx, t.s.send) }

// sendVia sends the trip through c: the store's client, a master's, or a
// pinned connection.
//
// A trip's commands go in one pipeline, in the order queued. A script the
// server has not loaded (EVALSHA answered NOSCRIPT) can only be sent again
// after the rest, with other clients' commands between. So a script goes
// as EVAL, its source, until the store has seen that server run it; and
// a NOSCRIPT anywhere forgets every script (the server lost its cache),
// so the next trips send their sources in order again. The one trip that
// meets the NOSCRIPT still runs that script last: the store cannot know
// of a restart, a failover or a SCRIPT FLUSH before a server says so.
//
// The trips built in gate, gate/internal/* and cmd (none in cmd), and
// what a script run last (the old resend) did to each. Only a script can
// move; plain commands (GET, SET, PTTL, TIME) keep their places.
//
// Order matters:
//   - store.take (acquire, every topology): PTTL, SET NX GET, TIME,
//     job_fence. The fence script stamps the value the SET wrote; run
//     last, another client reads the job taken without its fence
//     (TestAcquireIsFencedInItsTrip), and a write between leaves it
//     unstamped.
//   - store.takeAdmitted (one node): acquire_budget, GET done. The
//     waiter's done mark and the job's value the script judged are one
//     moment: run last, a success settled between is a job found done
//     beside a done mark read before it was written.
//   - store.takeover: job_acquire, GET done (a resend): the same.
//   - gate settle (settle.go), unwritten.go: SET done mark, job_settle,
//     the upstream's record (upstream_recover / cancel / stop or
//     window_count), the budget's release (budget_record), line_give,
//     calls_record. The give must follow the release it hands on: with
//     the release run last, the give finds no room, and the line waits
//     for the next give.
//   - line join (line.go): line_join, line_give, on one node the
//     acquire of a turn given there (Trip.AcquireInTurn: acquire_budget,
//     GET done), line_collect. The collect must see the turn the give
//     just made, and the give the joiner: run last, a caller whose turn
//     fits waits for a wake-up. The acquire reads the mark the join wrote
//     and the reservation the give made: run before them, it finds no
//     turn and the caller acquires in a trip of its own.
//   - gate Reset (status.go): job_reset, job_forget_done. A success
//     written between leaves a done mark the reset meant to forget.
//   - upstream reserve (budget.go): budget_admit, budget_record (release
//     elsewhere); line collect with renew: line_renew, line_collect.
//     Scripts only, on other keys: the order is the queue's, harmless
//     apart from the time between.
//   - upstream wave (breaker.go): window_count with the upstream's value,
//     one script since 7843922 (it was a GET beside the count: the bug
//     that found this).
//
// One moment, not an order:
//   - store.Ask / take with the upstreams (cluster's second trip, or one
//     node unscripted): the upstreams' GETs and their budgets'
//     admissions. An admission run after a pause written between is
//     decided on a state the GET did not show (the acquire's refusal
//     says ready).
//   - gate renew (renew.go): job_renew, budget_renew, calls_record.
//   - giveBack (acquire.go): job_undo, upstream_cancel, budget_record.
//
// Order free: Status (job read, upstream reads, line places: an
// operator's read, each answer true at its moment), Upstreams, the
// operator's Pause / Resume / ResetUpstream with budget_forget,
// readRefusal (no script), and every trip of one command.
func (t *Trip) sendVia(ctx context.Context, c Client) {
	switch len(t.cmds) {
	case 0:
		return
	case 1:
		_ = c.Process(ctx, t.cmds[0])
	default:
		pipe := c.Pipeline()
		_ = pipe.BatchProcess(ctx, t.cmds...)
		_, _ = pipe.Exec(ctx)
		if pc, ok := c.(*pooled); ok {
			pc.reuse(pipe)
		}
	}
	for _, e := range t.srcs {
		err := e.cmd.Err()
		if ranScript(err) {
			t.s.loaded.learn(t.loaded, e.node, e.script)
			continue
		}
		if redis.HasErrorPrefix(err, "NOPERM") && strings.Contains(err.Error(), "'eval'") {
			// A user that may run only loaded scripts (+evalsha without
			// +eval): sent again by its hash, after the rest of the trip,
			// and every later script by its hash alone. A NOSCRIPT then
			// goes below, to an EVAL the server refuses: the admin has
			// not loaded the scripts.
			t.s.sourceRefused.Store(true)
			r := redis.NewCmd(ctx, append([]any{"evalsha", e.script.hash}, e.cmd.Args()[2:]...)...)
			_ = c.Process(ctx, r)
			e.cmd.SetVal(r.Val())
			e.cmd.SetErr(r.Err())
		}
	}
	for _, e := range t.evals {
		// HasErrorPrefix allocates (errors.As) even for no error.
		if err := e.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			// The server lost its scripts. This one runs after the rest;
			// the next trips send every script's source, in order. The
			// EVAL below teaches nothing: the next trip sends the source
			// once more, and learns from it.
			t.s.loaded.lost(t.loaded)
			a := make([]any, 0, 3+len(e.keys)+len(e.args))
			a = append(a, "eval", e.script.src, len(e.keys))
			for _, k := range e.keys {
				a = append(a, k)
			}
			r := redis.NewCmd(ctx, append(a, e.args...)...)
			_ = c.Process(ctx, r)
			e.cmd.SetVal(r.Val())
			e.cmd.SetErr(r.Err())
		}
	}
}

// Replies are small arrays; these read their members.
func replyInt(v []any, i int) (int64, bool) {
	if i >= len(v) {
		return 0, false
	}
	switch n := v[i].(type) {
	case int64:
		return n, true
	case string:
		x, err := strconv.ParseInt(n, 10, 64)
		return x, err == nil
	}
	return 0, false
}

func replyString(v []any, i int) (string, bool) {
	if i >= len(v) {
		return "", false
	}
	s, ok := v[i].(string)
	return s, ok
}

func badReply(script string, v []any) error {
	return fmt.Errorf("unexpected %s reply %v", script, v)
}

// slice reads a script's array reply.
func slice(c redis.Cmder) ([]any, error) { return c.(*redis.Cmd).Slice() }

// isNil reports a GET of a missing key.
func isNil(err error) bool { return err == redis.Nil }

// ms converts a duration to whole milliseconds.
func ms(d time.Duration) int64 { return d.Milliseconds() }

// pttl converts a PTTL reply to a duration; no TTL (-1) or no key (-2) is 0.
func pttl(p int64) time.Duration {
	return time.Duration(max(p, 0)) * time.Millisecond
}
