package gate

import (
	"strconv"
	"strings"
	"time"
)

// The values the gate keeps in Redis, each encoded and decoded here once;
// the scripts (lua/*.lua) read the same layout. Times are Redis's clock in
// milliseconds: the scripts write them from TIME and every reply that
// needs them carries Redis's now, so no local clock is compared with them.
//
// A job has one key (internal/keyspace.Job) holding one of
//
//	r:<token>                                                  running, taken on a free key (SET NX)
//	r:<token>:<fence>:<attempts>                               running, taken by a script or renewed
//	c:<until>:<fence>:<attempts>:<flags>:<reason>:<evidence>   cooling until <until>, then ready
//	f:<until>:<fence>:<attempts>:<flags>:<reason>:<evidence>   failed until <until>
//	d:<until>:<fence>:0                                        done until <until>, then ready
//
// A running value lives while its key does: the key's TTL is the lease.
// A lease taken on a free key is a plain SET NX, which cannot know the
// fence Redis's TIME gives it in the same round trip: its first renewal
// records the fence beside the token.
//
// A settled value (c, f, d) outlives its <until>: after a cooldown the key
// keeps the attempt count for AttemptsTTL, so the next failure escalates;
// a done mark (DoneTTL) for successMemory more, so a waiter for that run
// is told it is done. A success with DoneTTL 0 frees the job (its key is
// deleted) and leaves its fence in the job's done key
// (internal/keyspace.Done) for successMemory instead. A run released
// without a cooldown writes c with <until> = now. flags is "s" when the
// failure was a suspect rejection (decide.go); reason and evidence are
// codes (classify), never upstream text, and evidence comes last since it
// may hold ':'. A value of any other shape is held: never overwritten,
// never taken for a cooldown.
//
// An upstream has one key (internal/keyspace.Scope) holding
//
//	c:<reason>:<level>:<until>           cooling until <until>
//	p:<reason>:<level>:<until>           paused until <until>
//	h:<reason>:<level>:<until>:<token>   one call (token) probes it until <until>
//
// where level counts the trips in a row (a failed probe escalates). The key
// outlives <until> by a grace, so the first call after the wait claims the
// probe; with no traffic it expires and the upstream is open.

// Job value kinds.
const (
	jobRunning = 'r'
	jobCooling = 'c'
	jobFailed  = 'f'
	jobDone    = 'd'
)

// jobValue is a decoded job value.
type jobValue struct {
	kind  byte   // jobRunning, jobCooling, jobFailed, jobDone; 0: another shape
	token string // running only
	until int64  // settled only: when the state ends, Redis ms
	fence int64
	// attempts counts the failures since the last success.
	attempts int
	// suspect: the failure was a suspect rejection, confirmed if the next
	// attempt meets the same one (decide.go).
	suspect          bool
	reason, evidence string
}

// parseJob decodes a job value; a value of another shape has kind 0. It
// reads the fields in place (a refusal's hot path allocates nothing here).
func parseJob(v string) jobValue {
	if len(v) < 2 || v[1] != ':' {
		return jobValue{}
	}
	rest := v[2:]
	field := func() (string, bool) { // the next field up to ':'
		if rest == "" {
			return "", false
		}
		f, r, found := strings.Cut(rest, ":")
		rest = r
		if !found {
			rest = ""
		}
		return f, true
	}
	num := func() (int64, bool) {
		f, ok := field()
		if !ok {
			return 0, false
		}
		n, err := strconv.ParseInt(f, 10, 64)
		return n, err == nil && n >= 0
	}
	switch v[0] {
	case jobRunning:
		token, ok := field()
		if !ok || token == "" {
			return jobValue{}
		}
		if rest == "" && !strings.HasSuffix(v, ":") {
			return jobValue{kind: jobRunning, token: token}
		}
		fence, ok1 := num()
		att, ok2 := num()
		if !ok1 || !ok2 || rest != "" {
			return jobValue{}
		}
		return jobValue{kind: jobRunning, token: token, fence: fence, attempts: int(att)}
	case jobCooling, jobFailed, jobDone:
		until, ok0 := num()
		fence, ok1 := num()
		att, ok2 := num()
		if !ok0 || !ok1 || !ok2 {
			return jobValue{}
		}
		j := jobValue{kind: v[0], until: until, fence: fence, attempts: int(att)}
		if rest != "" {
			flags, _ := field()
			reason, ok := field()
			if !ok {
				return jobValue{}
			}
			j.suspect = flags == "s"
			j.reason, j.evidence = reason, rest
		}
		return j
	}
	return jobValue{}
}

// settledTail is what follows <until> in a settled value (job_settle.lua
// puts the state letter and <until> in front).
func settledTail(fence int64, attempts int, suspect bool, reason, evidence string) string {
	var b strings.Builder
	b.Grow(32 + len(reason) + len(evidence))
	b.WriteString(strconv.FormatInt(fence, 10))
	b.WriteByte(':')
	b.WriteString(strconv.Itoa(attempts))
	if reason != "" || evidence != "" || suspect {
		b.WriteByte(':')
		if suspect {
			b.WriteByte('s')
		}
		b.WriteByte(':')
		b.WriteString(reason)
		b.WriteByte(':')
		b.WriteString(evidence)
	}
	return b.String()
}

// state is the job's state at Redis time now (ms).
func (j jobValue) state(now int64) State {
	switch j.kind {
	case 0, jobRunning:
		return Running
	}
	if j.until <= now {
		return Ready
	}
	switch j.kind {
	case jobCooling:
		return CoolingDown
	case jobFailed:
		return Failed
	}
	return Done
}

// left is the time until a settled state ends at Redis time now.
func (j jobValue) left(now int64) time.Duration {
	return max(time.Duration(j.until-now)*time.Millisecond, 0)
}

// Upstream value kinds.
const (
	scopeCooling = 'c'
	scopePaused  = 'p'
	scopeProbing = 'h'
)

// scopeValue is a decoded upstream value.
type scopeValue struct {
	kind   byte // scopeCooling, scopePaused, scopeProbing; 0: another shape
	reason string
	level  int
	until  int64  // when the wait (or the probe's lease) ends, Redis ms
	token  string // probing: the probe's token
}

func parseScope(v string) scopeValue {
	if len(v) < 2 || v[1] != ':' {
		return scopeValue{}
	}
	f := strings.SplitN(v[2:], ":", 4)
	if len(f) < 3 {
		return scopeValue{}
	}
	level, err1 := strconv.Atoi(f[1])
	until, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || level < 0 {
		return scopeValue{}
	}
	s := scopeValue{kind: v[0], reason: f[0], level: level, until: until}
	switch {
	case (v[0] == scopeCooling || v[0] == scopePaused) && len(f) == 3:
	case v[0] == scopeProbing && len(f) == 4:
		s.token = f[3]
	default:
		return scopeValue{}
	}
	return s
}

// pttl converts a PTTL reply to a duration; no TTL (-1) or no key (-2) is 0.
func pttl(p int64) time.Duration {
	return time.Duration(max(p, 0)) * time.Millisecond
}
