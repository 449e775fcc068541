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

// tripEval is an EVALSHA of the trip, repeated with EVAL when the server
// does not have the script (NOSCRIPT: a restart, a failover, SCRIPT FLUSH).
type tripEval struct {
	cmd    *redis.Cmd
	script *script
	keys   []string
	args   []any
}

func (t *Trip) eval(ctx context.Context, s *script, keys []string, args ...any) *redis.Cmd {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, "evalsha", s.hash, len(keys))
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
		// HasErrorPrefix allocates (errors.As) even for no error.
		if err := e.cmd.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
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
