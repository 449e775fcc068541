package gate

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Lua protocol: for each script (lua/*.lua, wrapped in scripts.go) one
// function here queues it with its arguments in the script's order, and one
// decodes its reply. No script is called or decoded anywhere else.
//
// Commands are queued on a trip, which sends them in one round trip: one
// command straight to the client, several in a pipeline (on a cluster,
// go-redis sends each node its part in parallel).

// trip gathers the commands of one round trip. Its buffers hold the
// common trips without allocating.
type trip struct {
	cmds  []redis.Cmder
	evals []tripEval
	cbuf  [4]redis.Cmder
	ebuf  [2]tripEval
}

func (t *trip) add(cmd redis.Cmder) {
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

func (t *trip) eval(ctx context.Context, s *script, keys []string, args ...any) *redis.Cmd {
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

func (t *trip) get(ctx context.Context, key string) *redis.StringCmd {
	cmd := redis.NewStringCmd(ctx, "get", key)
	t.add(cmd)
	return cmd
}

// jobTake queues the native part of an acquire, on the job's node: the
// key's PTTL, then SET the running value ("r:<token>", from newToken) if
// the key is free (NX), returning what it holds otherwise (GET; Redis
// 7.0+), then Redis's TIME, which is the fence of a job taken so (read
// after the SET: above every fence taken before it) and the clock every
// value is judged by.
//
// PTTL comes first because go-redis judges a pipeline's retry by its first
// reply: a SET NX GET that takes a free key replies nil, and classifying
// that as an error costs about 17 allocations per acquire. The price: a
// SET refused with READONLY (a demoted master) is not retried by go-redis;
// the acquire fails closed (ErrRedisRefused) and the caller retries.
//
// The three commands' arguments share one array, and the key is boxed
// once: an acquire is the gate's hottest path.
func (t *trip) jobTake(ctx context.Context, key, running string, lease any) (set *redis.StringCmd, pttl *redis.IntCmd, now *redis.TimeCmd) {
	k := any(key)
	args := []any{"pttl", k, "set", k, running, "nx", "get", "px", lease, "time"}
	pttl = redis.NewIntCmd(ctx, args[0:2:2]...)
	set = redis.NewStringCmd(ctx, args[2:9:9]...)
	now = redis.NewTimeCmd(ctx, args[9:10:10]...)
	t.add(pttl)
	t.add(set)
	t.add(now)
	return set, pttl, now
}

// decodeTake reads what take sent as an acquire reply: taken with the
// fence TIME gave when the key was free, refused by its value otherwise
// (the takeover script judges a finished state with history).
func decodeTake(set *redis.StringCmd, p *redis.IntCmd, now *redis.TimeCmd) (acquireReply, error) {
	v, err := set.Result()
	taken := isNil(err)
	if err != nil && !taken {
		return acquireReply{}, err
	}
	tm, err := now.Result()
	if err != nil {
		return acquireReply{}, err
	}
	r := acquireReply{taken: taken, now: tm.UnixMilli()}
	if taken {
		r.fence, r.pttl = tm.UnixMicro(), -2
		return r, nil
	}
	r.value = v
	if r.pttl, err = p.Result(); err != nil {
		return acquireReply{}, err
	}
	return r, nil
}

// exec sends the trip's commands; each command holds its own reply or
// error.
func (t *trip) exec(ctx context.Context, c Client) {
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

// ---- job scripts ----

// jobAcquire queues job_acquire.lua: take over the job if its key holds
// a finished state.
func (t *trip) jobAcquire(ctx context.Context, key, token string, lease any) *redis.Cmd {
	return t.eval(ctx, jobAcquireScript, []string{key}, token, lease)
}

// acquireReply is job_acquire.lua's reply.
type acquireReply struct {
	taken bool
	now   int64 // Redis ms
	// Refused: the value that refused and its pttl. Taken: the value the
	// acquire replaced ("" = none) and its pttl, for an undo.
	value string
	pttl  int64
	fence int64 // taken only
}

func decodeAcquire(cmd *redis.Cmd) (acquireReply, error) {
	v, err := cmd.Slice()
	if err != nil {
		return acquireReply{}, err
	}
	var r acquireReply
	kind, ok0 := replyInt(v, 0)
	now, ok1 := replyInt(v, 1)
	r.now = now
	switch {
	case ok0 && ok1 && kind == 0 && len(v) == 4:
		var ok2, ok3 bool
		r.value, ok2 = replyString(v, 2)
		r.pttl, ok3 = replyInt(v, 3)
		if ok2 && ok3 {
			return r, nil
		}
	case ok0 && ok1 && kind == 1 && len(v) == 5:
		r.taken = true
		var ok2, ok4 bool
		r.fence, ok2 = replyInt(v, 2)
		r.value, _ = replyString(v, 3) // false: no previous value
		r.pttl, ok4 = replyInt(v, 4)
		if ok2 && ok4 {
			return r, nil
		}
	}
	return acquireReply{}, badReply("acquire", v)
}

// jobRenew queues job_renew.lua: extend the lease if token still holds
// it, recording its fence and attempts beside the token.
func (t *trip) jobRenew(ctx context.Context, key, token string, lease any, fence int64, attempts int) *redis.Cmd {
	return t.eval(ctx, jobRenewScript, []string{key}, token, lease, strconv.FormatInt(fence, 10), attempts)
}

// decodeRenew reports whether the lease was extended (false: not owned).
func decodeRenew(cmd *redis.Cmd) (bool, error) {
	n, err := cmd.Int64()
	return n == 1, err
}

// jobSettle queues job_settle.lua: write w if token still holds the job
// (or its key is gone).
func (t *trip) jobSettle(ctx context.Context, s *writeScripts, key, token string, w jobWrite, fence int64) *redis.Cmd {
	return t.eval(ctx, s.jobSettle, []string{key}, token, string(w.kind), ms(w.ttl), ms(w.keep), w.tail(fence))
}

// done queues the write of a success's token to its job's done key (a
// command of its own, not a second key of the settle script: a script's
// keys split by a migrating slot would be refused with TRYAGAIN).
func (t *trip) done(ctx context.Context, key, token string, memory time.Duration) *redis.StatusCmd {
	cmd := redis.NewStatusCmd(ctx, "set", key, token, "px", ms(memory))
	t.add(cmd)
	return cmd
}

// settleReply is job_settle.lua's reply.
type settleReply struct {
	owned bool
	cur   string // not owned: the value found
}

func decodeSettle(cmd *redis.Cmd) (settleReply, error) {
	v, err := cmd.Slice()
	if err != nil {
		return settleReply{}, err
	}
	n, ok := replyInt(v, 0)
	switch {
	case ok && n == 1 && len(v) == 1:
		return settleReply{owned: true}, nil
	case ok && n == 0 && len(v) == 2:
		cur, _ := replyString(v, 1)
		return settleReply{cur: cur}, nil
	}
	return settleReply{}, badReply("settle", v)
}

// jobUndo queues job_undo.lua: give back a job taken by token, restoring
// the value the acquire replaced.
func (t *trip) jobUndo(ctx context.Context, s *writeScripts, key, token, prev string, prevPTTL int64) *redis.Cmd {
	return t.eval(ctx, s.jobUndo, []string{key}, token, prev, prevPTTL)
}

// jobReset queues job_reset.lua.
func (t *trip) jobReset(ctx context.Context, s *writeScripts, key string) *redis.Cmd {
	return t.eval(ctx, s.jobReset, []string{key})
}

// decodeReset returns the value the reset found and, when it is a running
// lease left alone, its pttl.
func decodeReset(cmd *redis.Cmd) (prev string, pttl int64, err error) {
	v, err := cmd.Slice()
	if err != nil {
		return "", 0, err
	}
	p, ok := replyInt(v, 1)
	if !ok || len(v) != 2 {
		return "", 0, badReply("reset", v)
	}
	prev, _ = replyString(v, 0)
	return prev, p, nil
}

// read queues read.lua: a job's or an upstream's value with Redis's clock.
func (t *trip) read(ctx context.Context, key string) *redis.Cmd {
	return t.eval(ctx, readScript, []string{key})
}

// readReply is read.lua's reply.
type readReply struct {
	value string // "" when there is no key
	pttl  int64
	now   int64
}

func decodeRead(cmd *redis.Cmd) (readReply, error) {
	v, err := cmd.Slice()
	if err != nil {
		return readReply{}, err
	}
	p, ok1 := replyInt(v, 1)
	now, ok2 := replyInt(v, 2)
	if !ok1 || !ok2 || len(v) != 3 {
		return readReply{}, badReply("read", v)
	}
	val, _ := replyString(v, 0)
	return readReply{value: val, pttl: p, now: now}, nil
}

// ---- breaker scripts ----

// breakerClaim queues breaker_claim.lua: ask for the upstream's probe.
func (t *trip) breakerClaim(ctx context.Context, key, token string, lease any) *redis.Cmd {
	return t.eval(ctx, breakerClaimScript, []string{key}, token, lease)
}

// claimReply is breaker_claim.lua's reply.
type claimReply struct {
	open    bool   // no key: nothing to claim, the call runs as usual
	claimed bool   // this call probes; level is the trips in a row so far
	level   int    //
	value   string // refused: the value that refused, and its wait
	wait    time.Duration
}

func decodeClaim(cmd *redis.Cmd) (claimReply, error) {
	v, err := cmd.Slice()
	if err != nil {
		return claimReply{}, err
	}
	kind, ok := replyInt(v, 0)
	switch {
	case ok && kind == 1 && len(v) == 1:
		return claimReply{open: true}, nil
	case ok && kind == 2 && len(v) == 2:
		n, ok := replyInt(v, 1)
		if ok {
			return claimReply{claimed: true, level: int(n)}, nil
		}
	case ok && kind == 0 && len(v) == 3:
		val, ok1 := replyString(v, 1)
		w, ok2 := replyInt(v, 2)
		if ok1 && ok2 {
			return claimReply{value: val, wait: pttl(w)}, nil
		}
	}
	return claimReply{}, badReply("claim", v)
}

// breakerCancel queues breaker_cancel.lua: give a claimed probe back.
func (t *trip) breakerCancel(ctx context.Context, s *writeScripts, key, token string, grace any) *redis.Cmd {
	return t.eval(ctx, s.breakerCancel, []string{key}, token, grace)
}

// breakerOpen queues breaker_open.lua: the probe's call reached the
// upstream.
func (t *trip) breakerOpen(ctx context.Context, s *writeScripts, key, token string) *redis.Cmd {
	return t.eval(ctx, s.breakerOpen, []string{key}, token)
}

// breakerTrip queues breaker_trip.lua: cool (c) or pause (p) the upstream;
// clear, when set, is a failure window the trip empties.
func (t *trip) breakerTrip(ctx context.Context, s *writeScripts, key, clear string, kind byte, token, reason string, ttl time.Duration, grace any) *redis.Cmd {
	keys := []string{key}
	if clear != "" {
		keys = append(keys, clear)
	}
	return t.eval(ctx, s.breakerTrip, keys, string(kind), token, reason, max(ms(ttl), 1), grace)
}

// tripReply is breaker_trip.lua's reply: the upstream's value after it,
// its wait, and whether this trip wrote it.
type tripReply struct {
	value   string
	wait    time.Duration
	tripped bool
}

func decodeTrip(cmd *redis.Cmd) (tripReply, error) {
	v, err := cmd.Slice()
	if err != nil {
		return tripReply{}, err
	}
	w, ok1 := replyInt(v, 1)
	n, ok2 := replyInt(v, 2)
	if !ok1 || !ok2 || len(v) != 3 {
		return tripReply{}, badReply("trip", v)
	}
	val, _ := replyString(v, 0)
	return tripReply{value: val, wait: pttl(w), tripped: n == 1}, nil
}

// breakerCount queues breaker_count.lua: add member to a sliding window.
func (t *trip) breakerCount(ctx context.Context, window, member string, span time.Duration) *redis.Cmd {
	return t.eval(ctx, breakerCountScript, []string{window}, member, ms(span))
}

// breakerReset queues breaker_reset.lua.
func (t *trip) breakerReset(ctx context.Context, s *writeScripts, key, fails string) *redis.Cmd {
	return t.eval(ctx, s.breakerReset, []string{key, fails})
}

// isNil reports a GET of a missing key.
func isNil(err error) bool { return err == redis.Nil }

// ms converts a duration to whole milliseconds.
func ms(d time.Duration) int64 { return d.Milliseconds() }

// movedTo returns the address of a MOVED redirection, "" for any other
// error.
func movedTo(err error) string {
	if err == nil {
		return ""
	}
	f := strings.Fields(err.Error())
	if len(f) != 3 || f[0] != "MOVED" {
		return ""
	}
	return f[2]
}
