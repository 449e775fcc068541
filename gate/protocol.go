package gate

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The Lua protocol: for each script, its arguments are built and its reply
// decoded here, once. The scripts' headers (lua/*.lua) document the same
// layout.

// Lock values. A running lease holds "r:<token>"; a settled failure holds
// "<c|f>:<attempts>:<reason>:<fence>", unique per write because fences
// strictly increase per job (the refusal fast path relies on that: the same
// value is the same cooldown); a done job holds "d:".
const (
	valRunning = 'r'
	valCooling = 'c'
	valFailed  = 'f'
	valDone    = 'd'
)

// failedValue is the lock value a failure settles to.
func failedValue(st State, attempts int, reason string, fence int64) string {
	c := byte(valCooling)
	if st == Failed {
		c = valFailed
	}
	return string(c) + ":" + strconv.Itoa(attempts) + ":" + reason + ":" + strconv.FormatInt(fence, 10)
}

// stateOf decodes a lock value. attempts is -1 when the value does not carry
// it. A value of another shape is treated as held (Running): never
// overwritten, never taken for a cooldown.
func stateOf(v string) (st State, attempts int, reason string) {
	if len(v) < 2 || v[1] != ':' {
		return Running, -1, ""
	}
	switch v[0] {
	case valCooling, valFailed:
		st = CoolingDown
		if v[0] == valFailed {
			st = Failed
		}
		n, rest, ok := strings.Cut(v[2:], ":")
		a, err := strconv.Atoi(n)
		if !ok || err != nil {
			return st, -1, v[2:]
		}
		reason, _, _ = strings.Cut(rest, ":")
		return st, a, reason
	case valDone:
		return Done, -1, ""
	}
	return Running, -1, ""
}

// acquire.lua's reply.
type acquireReply struct {
	kind     string // "ok", "job" (refused by the job's lock), "scope" (by the scope)
	value    string // the lock's or scope's value when refused
	pttl     int64
	fence    int64
	attempts int
	fresh    bool // the acquire created the meta key
	probe    bool // the acquire claimed the scope's probe (scope_lib.lua)
	hinted   bool // refused by a GET that confirmed a known cooldown (hint.go)
}

func decodeAcquire(cmd *redis.Cmd) (acquireReply, error) {
	var r acquireReply
	v, err := cmd.Slice()
	if err != nil {
		return r, err
	}
	if len(v) > 0 {
		r.kind, _ = v[0].(string)
	}
	switch {
	case r.kind == "ok" && len(v) == 5:
		r.fence, _ = v[1].(int64)
		a, _ := v[2].(int64)
		f, _ := v[3].(int64)
		p, _ := v[4].(int64)
		r.attempts, r.fresh, r.probe = int(a), f == 1, p == 1
		return r, nil
	case (r.kind == "job" || r.kind == "scope") && len(v) == 3:
		r.value, _ = v[1].(string)
		r.pttl, _ = v[2].(int64)
		return r, nil
	}
	return acquireReply{}, fmt.Errorf("unexpected acquire reply %v", v)
}

// settle.lua's arguments: the outcome the Go side decided.
type settleWrite struct {
	value    string
	ttl      time.Duration
	attempts int // stored when counted
	counted  bool
	metaTTL  time.Duration
	scope    scopeUpdate
	reason   string // the scope update's reason
}

func (l *Lease) settleArgs(w settleWrite, withScope bool) []any {
	attempts := ""
	if w.counted {
		attempts = strconv.Itoa(w.attempts)
	}
	args := []any{l.token, strconv.FormatInt(l.fence, 10), w.value, ms(w.ttl), attempts, ms(w.metaTTL)}
	if withScope {
		args = append(args, l.g.scopeArgs(w.scope, w.reason)...)
	}
	return args
}

// scopeArgs are scope_update's arguments after the member: op, reason,
// ttl, factor, max, grace, allowed failures, window.
func (g *Gate) scopeArgs(su scopeUpdate, reason string) []any {
	o := g.opts
	return []any{string(su.op), reason, ms(su.ttl), su.factor, ms(o.MaxCooldown), ms(o.Lease),
		o.ScopePolicy.AllowedFails, ms(o.ScopePolicy.FailWindow)}
}

// settle.lua's reply.
type settleReply struct {
	owned bool
	cur   string // the lock's value when not owned ("" = none)
	scope UpstreamStatus
	// scopeSet is set when the reply carries the scope's state.
	scopeSet bool
}

func decodeSettle(cmd *redis.Cmd) (settleReply, error) {
	var r settleReply
	v, err := cmd.Slice()
	if err != nil {
		return r, err
	}
	if len(v) != 4 {
		return r, fmt.Errorf("unexpected settle reply %v", v)
	}
	n, _ := v[0].(int64)
	r.owned = n == 1
	r.cur, _ = v[1].(string)
	r.scope, r.scopeSet = decodeScopePair(v[2:])
	return r, nil
}

// decodeScopePair decodes {scope value or false, wait ms}, the scope part
// of the scripts' replies; ok is false when the scope is open.
func decodeScopePair(v []any) (UpstreamStatus, bool) {
	if len(v) < 2 {
		return UpstreamStatus{}, false
	}
	s, ok := v[0].(string)
	if !ok {
		return UpstreamStatus{}, false
	}
	p, _ := v[1].(int64)
	return scopeStatusOf(s, p), true
}

// status.lua's reply: {lockValue or false, pttl, attempts, fence,
// scopeValue or false, scopePttl}.
func (g *Gate) decodeStatus(job string, cmd *redis.Cmd) (Status, error) {
	v, err := cmd.Slice()
	if err != nil {
		return Status{}, redisError("status", err)
	}
	if len(v) != 6 {
		return Status{}, redisError("status", fmt.Errorf("unexpected status reply %v", v))
	}
	st := Status{Job: job, State: Ready, Attempts: toInt(v[2])}
	fs, _ := v[3].(string)
	st.Fence, _ = strconv.ParseInt(fs, 10, 64)
	if lv, ok := v[0].(string); ok {
		p, _ := v[1].(int64)
		st.State, _, st.Reason = stateOf(lv)
		st.TTL = pttl(p)
		if st.State == Running || st.State == CoolingDown {
			st.RetryAfter = st.TTL
		}
	}
	st.Upstream, _ = decodeScopePair(v[4:])
	st.Upstream.Scope = g.opts.Scope
	return st, nil
}

func toInt(v any) int {
	switch n := v.(type) {
	case int64:
		return int(n)
	case string:
		i, _ := strconv.Atoi(n)
		return i
	}
	return 0
}

// pttl converts a PTTL reply to a duration; no TTL (-1) or no key (-2) is 0.
func pttl(p int64) time.Duration {
	return time.Duration(max(p, 0)) * time.Millisecond
}
