package store

import (
	"context"
	"fmt"
	"strconv"
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
	cbuf  [4]redis.Cmder
	ebuf  [2]tripEval
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
// hold it, else EVAL (its source), so that it runs in the trip's order.
// An EVALSHA answered NOSCRIPT (a restart, a failover, SCRIPT FLUSH) is
// sent again as EVAL, after the rest of the trip: see sendVia.
type tripEval struct {
	cmd    *redis.Cmd
	script *script
	keys   []string
	args   []any
	// node is the server the script runs on ("" on one node), and held
	// the store's scripts as the trip found them.
	node  string
	named bool // node is known (a cluster client may not know the slot's master)
	held  *heldScripts
	// src: sent as EVAL. Its answer teaches the store that node holds it.
	src bool
}

func (t *Trip) eval(ctx context.Context, s *script, keys []string, args ...any) *redis.Cmd {
	node, named := "", true
	if t.s.addr != nil && len(keys) > 0 {
		node, named = t.s.addr(ctx, keys[0])
	}
	held := t.s.held.Load()
	src := !named || !held.holds(node, s)
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
	t.evals = append(t.evals, tripEval{cmd: cmd, script: s, keys: keys, args: args, node: node, named: named, held: held, src: src})
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
// server does not hold (EVALSHA answered NOSCRIPT) can only be sent again
// after the rest, with other clients' commands between. So a script goes
// as EVAL, its source, until the store has seen that server run it; and
// a NOSCRIPT anywhere forgets every script (the server lost its cache),
// so the next trips send their sources in order again. The one trip that
// meets the NOSCRIPT still runs that script last: the store cannot know
// of a restart, a failover or a SCRIPT FLUSH before a server says so.
//
// Trips whose order matters, or whose commands must see one moment (the
// audit of stop h45trip; "one" marks commands that must see one moment):
//
//   - store/job.go Store.Acquire, the job's pipeline: PTTL, SET NX GET,
//     TIME, job_fence (EVALSHA). The fence script reads the value SET
//     wrote and the TIME before it: order matters (a fence from a TIME
//     read after another client's write could go back).
//   - store/job.go Store.Acquire, one node: the acquire script alone, or
//     with the upstreams' budget scripts on a cluster's second trip
//     (GET upstream, budget admission): the admission must judge the
//     value the GET read (one moment).
//   - store/job.go settle (gate/settle.go): SET done mark, job_settle,
//     the upstream's calls_record / budget scripts. The settle writes the
//     job after the done mark; the budget's release after the settle.
//     Order matters for a reader that sees the job settled but the call
//     still reserved (a line's turn given twice).
//   - store/job.go renew (gate/renew.go): job_renew and the budget's
//     renewal in one trip: the lease and its reservation must agree.
//   - upstream/breaker.go Wave (window_count with the upstream's GET):
//     was a GET beside the count; now one script (7843922), so its order
//     no longer matters.
//   - upstream/budget.go record beside the upstream's state read: the
//     record's script must see the state the read returned (one moment).
//   - line/line.go, line/collector.go: a turn's give (line_give) beside
//     the budget's release; the give must follow the release it gives.
//   - gate/status.go, upstream/operator.go: reads only (GET, read.lua);
//     a script read after a GET can show a later moment, harmless for an
//     operator's read.
//   - gate/unwritten.go, gate/inline.go: one script per trip.
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
	for _, e := range t.evals {
		err := e.cmd.Err()
		if err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") { // HasErrorPrefix allocates (errors.As) even for no error
			if e.src && e.named && ranScript(err) {
				t.s.held.learn(e.held, e.node, e.script)
			}
			continue
		}
		held := t.s.held.lost(e.held)
		a := make([]any, 0, 3+len(e.keys)+len(e.args))
		a = append(a, "eval", e.script.src, len(e.keys))
		for _, k := range e.keys {
			a = append(a, k)
		}
		r := redis.NewCmd(ctx, append(a, e.args...)...)
		_ = c.Process(ctx, r)
		e.cmd.SetVal(r.Val())
		e.cmd.SetErr(r.Err())
		if e.named && ranScript(r.Err()) {
			t.s.held.learn(held, e.node, e.script)
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
