package store

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/retrygate/retrygate/internal/code"
)

// The values the gate keeps in Redis are each encoded and decoded here
// once. The scripts (lua/*.lua) read the same layout. Times are Redis's
// clock in milliseconds. The scripts write them from TIME. Every reply
// that needs them carries Redis's now. So no local clock is compared with
// them.
//
// A job has one key (internal/keyspace.Job) holding one of
//
//	r:<token>                                                  running, taken on a free key (SET NX)
//	r:<token>:<fence>:0:                                       the same, its fence recorded by the acquire (job_fence.lua)
//	r:<token>:<fence>:<attempts>:                              running, taken by a script (job_take.lua), not renewed yet
//	r:<token>:<fence>:<attempts>[:<estimate>]                  running, renewed
//	c:<until>:<fence>:<attempts>:<flags>:<reason>:<evidence>   cooling until <until>, then ready
//	f:<until>:<fence>:<attempts>:<flags>:<reason>:<evidence>   failed until <until>
//	d:<until>:<fence>:0                                        done until <until>, then ready
//
// A running value lives while its key does: the key's TTL is the lease.
// A lease taken on a free key is a plain SET NX. It cannot know the fence
// Redis's TIME gives it in the same round trip. Its first renewal records
// the fence beside the token. It also records the runner's estimate of
// how long its call takes (ms, from the gate's last calls: calls.go). A
// process refused by the value reads it in its acquire's reply.
//
// A settled value (c, f, d) outlives its <until>:
//   - after a cooldown the key keeps the attempt count for a while (the
//     gate's AttemptsTTL), so the next failure escalates;
//   - a done mark stays for SuccessMemory more, so a waiter for that run
//     is told it is done.
//
// A success that frees the job deletes its key instead. It leaves
// "<token>:<fence>" in the job's done key (internal/keyspace.Done) for
// SuccessMemory. A run released without a cooldown writes c with <until>
// = now. flags is "s" when the failure was a suspect rejection. reason
// and evidence are codes (classify), never upstream text. evidence comes
// last, since it may hold ':'. A value of any other shape is foreign. It
// is never overwritten, and never taken for a cooldown.
//
// An upstream has one key (internal/keyspace.Upstream) holding
//
//	c:<reason>:<level>:<until>           cooling until <until>
//	p:<reason>:<level>:<until>           paused until <until>
//	h:<reason>:<level>:<until>:<token>   one call (token) probes it until <until>
//	p:<reason>:<level>:<until>:<note>    paused by an operator until <until>
//
// where level counts the stops in a row (a failed probe escalates). The
// key outlives <until> by a lease. So the first call after the wait
// claims the probe. With no traffic it expires and the upstream is ready.
// An operator's pause expires at <until>, and no probe follows it. Its
// note comes last, as it may hold ':'.

// Kind is what a job's value holds.
type Kind byte

// Job value kinds.
const (
	Foreign Kind = 0 // a value of another shape (or none): never taken, never overwritten
	Running Kind = 'r'
	Cooling Kind = 'c'
	Failed  Kind = 'f'
	Done    Kind = 'd'
)

// Job is a job's value, decoded.
type Job struct {
	Kind  Kind
	Token string // Running only
	Until int64  // settled only: when the state ends, Redis ms
	Fence int64
	// Attempts counts the failures since the last success.
	Attempts int
	// Taken: a running value an acquire wrote on a free key. No renewal
	// rewrote it yet ("r:<token>" or "r:<token>:<fence>:0:").
	Taken bool
	// Estimate is a running value's estimate of how long its call takes
	// (0: none recorded).
	Estimate time.Duration
	// Suspect: the failure was a suspect rejection. It is confirmed if
	// the next attempt meets the same one.
	Suspect          bool
	Reason, Evidence string
}

// Over reports whether a settled value's state has ended at Redis time now
// (ms). Then the job is free, with the history the value keeps.
func (j Job) Over(now int64) bool {
	switch j.Kind {
	case Cooling, Failed, Done:
		return j.Until <= now
	}
	return false
}

// Left is the time until a settled state ends at Redis time now.
func (j Job) Left(now int64) time.Duration {
	return max(msUntil(j.Until, now), 0)
}

// parseJob decodes a job value. A value of another shape is Foreign. It
// reads the fields in place: a refusal's hot path allocates nothing here.
func parseJob(v string) Job {
	if len(v) < 2 || v[1] != ':' {
		return Job{}
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
	switch Kind(v[0]) {
	case Running:
		token, ok := field()
		if !ok || token == "" {
			return Job{}
		}
		if rest == "" && !strings.HasSuffix(v, ":") {
			return Job{Kind: Running, Token: token, Taken: true}
		}
		fence, ok1 := num()
		att, ok2 := num()
		if !ok1 || !ok2 {
			return Job{}
		}
		// An empty last field marks the acquire's own record of its fence.
		j := Job{Kind: Running, Token: token, Fence: fence, Attempts: int(att), Taken: rest == "" && strings.HasSuffix(v, ":")}
		if rest != "" {
			est, ok := num()
			if !ok || rest != "" {
				return Job{}
			}
			j.Estimate = time.Duration(est) * time.Millisecond
		}
		return j
	case Cooling, Failed, Done:
		until, ok0 := num()
		fence, ok1 := num()
		att, ok2 := num()
		if !ok0 || !ok1 || !ok2 {
			return Job{}
		}
		j := Job{Kind: Kind(v[0]), Until: until, Fence: fence, Attempts: int(att)}
		if rest != "" {
			flags, _ := field()
			reason, ok := field()
			if !ok {
				return Job{}
			}
			j.Suspect = flags == "s"
			j.Reason, j.Evidence = reason, rest
		}
		return j
	}
	return Job{}
}

// settledTail is what follows <until> in a settled value. job_settle.lua
// puts the state letter and <until> in front.
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

// Mode is what an upstream's value holds.
type Mode byte

// Upstream modes.
const (
	ModeReady   Mode = 0 // no key: calls run
	ModeCooling Mode = 'c'
	ModePaused  Mode = 'p'
	ModeProbing Mode = 'h'
	ModeForeign Mode = 'x' // not a value the gate wrote (an operator's SET): its end unknown
)

// Upstream is an upstream's value, decoded.
type Upstream struct {
	Mode   Mode
	Reason string
	Level  int    // the stops in a row
	Until  int64  // when the wait (or the probe's lease) ends, Redis ms
	Token  string // Probe: the probe's token
	// Note is an operator's words for a pause they set (PauseUpstream).
	Note string
	// Paused: a Foreign value that reads as a pause (its letter is 'p').
	Paused bool
}

// parseUpstream decodes an upstream value ("" when it has no key).
func parseUpstream(v string) Upstream {
	if v == "" {
		return Upstream{}
	}
	if s, ok := parseGateUpstream(v); ok {
		return s
	}
	// Read as its letter says, its reason the field after it.
	u := Upstream{Mode: ModeForeign, Paused: v[0] == byte(ModePaused)}
	if _, rest, ok := strings.Cut(v, ":"); ok {
		u.Reason, _, _ = strings.Cut(rest, ":")
	}
	return u
}

func parseGateUpstream(v string) (Upstream, bool) {
	if len(v) < 2 || v[1] != ':' {
		return Upstream{}, false
	}
	f := strings.SplitN(v[2:], ":", 4)
	if len(f) < 3 {
		return Upstream{}, false
	}
	// Up to 18 digits, as lua/upstream_value.lua reads them: no sign, and
	// no number Lua cannot hold (miniredis's Lua reads none past int64).
	level, err1 := strconv.Atoi(f[1])
	until, err2 := strconv.ParseInt(f[2], 10, 64)
	if err1 != nil || err2 != nil || !digits(f[1]) || !digits(f[2]) {
		return Upstream{}, false
	}
	s := Upstream{Mode: Mode(v[0]), Reason: f[0], Level: level, Until: until}
	switch {
	case (s.Mode == ModeCooling || s.Mode == ModePaused) && len(f) == 3:
	case s.Mode == ModePaused && len(f) == 4:
		s.Note = code.Note(f[3])
	case s.Mode == ModeProbing && len(f) == 4:
		s.Token = f[3]
	default:
		return Upstream{}, false
	}
	return s, true
}

// digits reports whether s is 1 to 18 ASCII digits.
func digits(s string) bool {
	if len(s) > 18 {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// Wait is the time until the upstream's wait (or its probe's lease) ends
// at Redis time now. It is negative once it has.
func (u Upstream) Wait(now int64) time.Duration {
	return msUntil(u.Until, now)
}

// msUntil is the time from now to until (Redis ms). A value may hold an
// end centuries away (18 digits): past what a Duration holds, it is the
// longest one, never a product that wraps to the past.
func msUntil(until, now int64) time.Duration {
	const most = int64(math.MaxInt64 / time.Millisecond)
	switch {
	case now > 0 && until < math.MinInt64+now: // until-now would wrap
		return math.MinInt64
	case now < 0 && until > math.MaxInt64+now:
		return math.MaxInt64
	}
	switch d := until - now; {
	case d > most:
		return math.MaxInt64
	case d < -most:
		return math.MinInt64
	default:
		return time.Duration(d) * time.Millisecond
	}
}
