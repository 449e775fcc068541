package gate

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/redisop"
)

// Acquire is the two-step form of Do, for middleware: it takes the job's
// lease, and the caller reports the outcome with Succeed, Fail or Release.
// Until then the lease is renewed every Lease/3. A refusal is a
// *BlockedError; an unreachable Redis is ErrUnavailable, or with FailOpen an
// ungated lease (Gated reports false).
//
// If the caller's context ends first, the error is the context's; a
// deadline that passes while Redis does not answer also matches
// ErrUnavailable (too late to fail open).
//
// Acquire is one Redis round trip of native commands on the job's node
// (PTTL, SET NX GET, TIME), with a GET of each upstream's state in the
// same round trip when the gate has upstreams. A second trip is made only
// when the job's key holds a finished state with history (a script takes
// it over), when an upstream's wait has just ended (this call claims its
// probe) or when every upstream refuses and this process did not know it
// yet (the job is given back); while this process knows every upstream
// refuses, Acquire only reads them (one trip, nothing written). Concurrent
// Acquires of one job in one process make one round trip: the others wait
// for its reply and get the same refusal, or ErrInFlight once it holds the
// lease.
//
// A running job's refusal (ErrInFlight) says when its call should end:
// the 90th percentile of this Gate's last 64 call durations less the time
// the run has taken, at least a second and at most its lease's time left
// (which alone is the estimate until 8 calls were seen).
//
// With Options.Wait set, a job running elsewhere is waited for: see
// AcquireWait.
func (g *Gate) Acquire(ctx context.Context, job string) (*Lease, error) {
	return g.AcquireWait(ctx, job, g.opts.Wait)
}

// AcquireWait is Acquire with a wait budget for this call, overriding
// Options.Wait: if the job is running elsewhere it waits, at most wait,
// for that lease to settle, and then acquires the job if it is free or
// returns the refusal the settle left (ErrDone, ErrCoolingDown with the
// cooldown's true time left, ErrFailed, ErrUpstreamCooling). When wait
// ends first the refusal is ErrInFlight with the lease's time left; when
// ctx ends first the error is the context's. wait ≤ 0 does not wait.
// Once waiting, a Redis out of reach (a failover) does not end the wait:
// the waiter polls until its budget ends, and then returns ErrUnavailable
// (with FailOpen too: the job was running a moment ago).
//
// The wait is woken by Redis pub/sub: every settle, release, reset and
// undo publishes on the job's channel (its lock key's name; SPUBLISH on a
// cluster, so the channel lives in the job's slot). The waiter subscribes
// before it reads the state again, so a settle in between is never
// missed. A lease that expires without a settle publishes nothing: each
// step of the wait is bounded by the lease's time left, and the waiter
// reads again then. Waiters of one job in one Gate share one subscription,
// and a Gate keeps one connection per Redis server for all of them, open
// while it has waiters and briefly after. Where the client cannot
// subscribe or Redis refuses it (an ACL without channel permission), the
// waiter polls with backoff (10 ms doubling to 1 s) and the gate sends an
// EventWarning with Reason WarnWaitPolling (at most once a minute).
//
// Nothing is subscribed unless the first attempt finds the job running: a
// call that runs or is refused for another reason costs what Acquire does.
func (g *Gate) AcquireWait(ctx context.Context, job string, wait time.Duration) (*Lease, error) {
	l, err := g.acquireOnce(ctx, job, nil)
	if b := running(err); wait > 0 && b != nil {
		l, err = g.waitFor(ctx, job, b.token, time.Now().Add(wait))
	}
	g.refused(ctx, err)
	return l, err
}

// jobKey returns job's lock key, or ErrInvalidJob.
func (g *Gate) jobKey(job string) (string, error) {
	switch {
	case job == "":
		return "", fmt.Errorf("%w: empty", ErrInvalidJob)
	case len(job) > MaxJobLen:
		return "", fmt.Errorf("%w: %d bytes, over the %d-byte limit", ErrInvalidJob, len(job), MaxJobLen)
	}
	return keyspace.Job(g.opts.Prefix, job), nil
}

// waiting is what a waiter's acquire reads beside the job (wait.go): the
// token of the run it waits for, and the job's done key, where that run's
// success leaves its token.
type waiting struct {
	token, done string
}

// acquireOnce is one attempt to take job, merged with the other calls of
// the job in this process (flight.go). w is set for a waiter. It sends no
// refusal event: the caller sends one per call (refused).
func (g *Gate) acquireOnce(ctx context.Context, job string, w *waiting) (*Lease, error) {
	key, err := g.jobKey(job)
	if err != nil {
		return nil, err
	}
	if b := g.unwritten.refusal(job); b != nil {
		return nil, b
	}
	for {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("gate: acquire: %w", context.Cause(ctx))
		}
		p, leader := g.flight.join(job)
		if leader {
			l, err := g.acquire(ctx, job, key, w)
			g.flight.resolve(job, p, l, err)
			return l, err
		}
		if err, again := g.follow(ctx, p, w != nil); !again {
			return nil, err
		}
	}
}

// acquire takes job in Redis.
func (g *Gate) acquire(ctx context.Context, job, key string, w *waiting) (*Lease, error) {
	gr := grant{job: job, key: key}
	gr.running, gr.token = newToken()
	sent := time.Now()
	switch b, err := g.take(ctx, &gr, w); {
	case b != nil:
		return nil, b
	case err != nil:
		return g.unreached(ctx, &gr, err)
	}
	l := &Lease{grant: gr, g: g, parent: ctx, start: sent}
	l.ctx, l.cancel = context.WithCancelCause(context.WithValue(ctx, leaseKey{}, l))
	// expires is read by merged callers (remaining) under l.mu.
	l.mu.Lock()
	l.expires = sent.Add(g.opts.Lease)
	l.timer = time.AfterFunc(min(g.renewEvery(), firstRenewal), l.renew)
	l.mu.Unlock()
	g.emit(ctx, Event{Kind: EventAcquired, Job: job, Scope: l.Scope(), State: Running, Fence: l.fence, Attempt: l.attempt})
	return l, nil
}

// take is the one acquire path. One round trip: the job's SET NX GET, its
// PTTL and Redis's TIME, with each upstream's GET. Then, only where
// needed: the job's takeover script when its key holds a finished state
// (its history: the attempt count, the last failure), the probe's claim
// when an upstream's wait just ended. Whatever take returns other than
// nil, it leaves Redis as it found it (the deferred give-back, one round
// trip): a job taken by a call every upstream refuses, or by a waiter
// whose run succeeded meanwhile, or whose replicas did not acknowledge it.
// A refusal is b, a failure err.
func (g *Gate) take(ctx context.Context, l *grant, w *waiting) (b *BlockedError, err error) {
	if b, err := g.peekKnown(ctx, l.job); b != nil || err != nil {
		return b, err
	}
	r, values, done, conn, err := g.sendAcquire(ctx, l, w)
	if conn != nil {
		defer conn.Close()
	}
	defer func() {
		if (b == nil && err == nil) || !r.taken {
			return
		}
		// Give the job back as the acquire found it (its value and TTL
		// before the SET NX or the takeover), and the probe it claimed,
		// in one round trip.
		rctx, cancel := g.opCtx(ctx)
		defer cancel()
		var t trip
		undo := t.jobUndo(rctx, g.scripts, l.key, l.token, r.value, r.pttl)
		var unclaim *redis.Cmd
		if l.probe {
			unclaim = l.up.unclaim(rctx, &t, g.scripts, l.token)
		}
		t.exec(rctx, g.send)
		if uerr := undo.Err(); uerr != nil {
			g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Op: redisop.Undo, Err: redisError("undo", uerr)})
		}
		if unclaim != nil && unclaim.Err() != nil {
			g.emit(ctx, Event{Kind: EventRedisError, Job: l.job, Scope: l.up.name, Op: redisop.Scope, Err: redisError("scope", unclaim.Err())})
		}
	}()
	switch {
	case err != nil:
		return nil, err
	case w != nil && done == w.token:
		// The run this waiter waited for succeeded and freed the job.
		return &BlockedError{Job: l.job, State: Done}, nil
	}
	ups := make([]UpstreamStatus, len(g.breakers))
	permits := make([]permit, len(g.breakers))
	refusing := len(g.breakers) > 0
	for i, b := range g.breakers {
		permits[i], ups[i] = b.judge(values[i], r.now)
		refusing = refusing && permits[i] == permitRefused
	}
	if refusing {
		for i, b := range g.breakers {
			b.remember(ups[i])
		}
		return upstreamRefusal(l.job, ups), nil
	}
	if !r.taken {
		if v := parseJob(r.value); v.kind == 0 || v.state(r.now) != Ready {
			return g.jobRefusal(l.job, r), nil
		}
		// A finished state with its history: taken over by a script.
		via := Client(g.send)
		if conn != nil {
			via = conn
		}
		var t trip
		cmd := t.jobAcquire(ctx, l.key, l.token, g.argLease)
		t.exec(ctx, via)
		if r, err = decodeAcquire(cmd); err != nil {
			return nil, err
		}
		if !r.taken {
			return g.jobRefusal(l.job, r), nil
		}
	}
	if b, err := g.choose(ctx, l, permits, ups); b != nil || err != nil {
		return b, err
	}
	l.fence = r.fence
	l.hist = parseJob(r.value)
	l.attempt = l.hist.attempts + 1
	if conn != nil {
		return nil, g.replicate(ctx, conn)
	}
	return nil, nil
}

// replicate waits for WaitReplicas replicas to acknowledge the acquire, on
// the connection that wrote it.
func (g *Gate) replicate(ctx context.Context, conn *redis.Conn) error {
	n, err := conn.Wait(ctx, g.opts.WaitReplicas, g.opts.WaitTimeout).Result()
	if err == nil && n < int64(g.opts.WaitReplicas) {
		err = &notReplicatedError{acked: n, want: g.opts.WaitReplicas, within: g.opts.WaitTimeout}
	}
	return err
}

// unreached handles an acquire that Redis did not answer: the caller's
// context ended, Redis failed, or (FailOpen) fn runs ungated.
func (g *Gate) unreached(ctx context.Context, gr *grant, err error) (*Lease, error) {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		// Redis did not answer within the caller's deadline: that is
		// unavailability too, but too late to fail open.
		werr := fmt.Errorf("%w: acquire: %w", ErrUnavailable, context.Cause(ctx))
		g.emit(ctx, Event{Kind: EventRedisError, Job: gr.job, Op: redisop.Acquire, Err: werr})
		return nil, werr
	case ctx.Err() != nil:
		return nil, fmt.Errorf("gate: acquire: %w", context.Cause(ctx))
	}
	werr := redisError("acquire", err)
	g.emit(ctx, Event{Kind: EventRedisError, Job: gr.job, Op: redisop.Acquire, Err: werr})
	if !g.opts.FailOpen || reached(err) {
		return nil, werr
	}
	// Still merged in-process: Redis being down must not turn every local
	// duplicate into a model call.
	l := &Lease{grant: grant{job: gr.job, key: gr.key, token: gr.token, running: gr.running, attempt: 1},
		g: g, parent: ctx, ungated: true, start: time.Now()}
	l.ctx, l.cancel = context.WithCancelCause(context.WithValue(ctx, leaseKey{}, l))
	g.emit(ctx, Event{Kind: EventFailOpen, Job: l.job, Err: werr})
	return l, nil
}

// newToken returns a lease's running value, "r:" and a 128-bit random
// token in hex, and the token (the same string, after "r:"). math/rand/v2's
// generator is seeded from the OS and cheap; the token only has to be
// unique, since whoever can write to Redis can overwrite the lock anyway.
func newToken() (running, token string) {
	var raw [16]byte
	binary.LittleEndian.PutUint64(raw[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(raw[8:], rand.Uint64())
	b := [34]byte{'r', ':'}
	hex.Encode(b[2:], raw[:])
	running = string(b[:])
	return running, running[2:]
}

// peekKnown: while this process knows that every upstream refuses, an
// acquire only reads them, with Redis's clock (one round trip, nothing
// written). It returns their refusal when they all still refuse; nil when
// one does not (the acquire then takes the job as usual) or one is not
// known to refuse.
func (g *Gate) peekKnown(ctx context.Context, job string) (*BlockedError, error) {
	if len(g.breakers) == 0 {
		return nil, nil
	}
	for _, b := range g.breakers {
		if !b.knownRefusing() {
			return nil, nil
		}
	}
	var t trip
	reads := make([]*redis.Cmd, len(g.breakers))
	for i, b := range g.breakers {
		reads[i] = t.read(ctx, b.key)
	}
	t.exec(ctx, g.send)
	ups := make([]UpstreamStatus, len(g.breakers))
	for i, b := range g.breakers {
		r, err := decodeRead(reads[i])
		if err != nil {
			return nil, err
		}
		var p permit
		if p, ups[i] = b.judge(r.value, r.now); p != permitRefused {
			b.forget()
			return nil, nil
		}
		if parseScope(r.value).kind == 0 {
			ups[i].RetryAfter = max(pttl(r.pttl), time.Millisecond) // held: its key's TTL
		}
		b.remember(ups[i])
	}
	return upstreamRefusal(job, ups), nil
}

// choose picks the upstream the run uses: the first, in order, that is
// open or whose probe this call claims. It returns the upstreams' refusal
// when none is.
func (g *Gate) choose(ctx context.Context, l *grant, permits []permit, ups []UpstreamStatus) (*BlockedError, error) {
	for i, b := range g.breakers {
		switch permits[i] {
		case permitOpen:
			b.forget()
			l.up = b
			return nil, nil
		case permitProbe:
			c, err := b.claim(ctx, g.send, l.token)
			switch {
			case err != nil:
				return nil, err
			case c.open:
				b.forget()
				l.up = b
				return nil, nil
			case c.claimed:
				b.forget()
				l.up, l.probe, l.level = b, true, c.level
				return nil, nil
			}
			ups[i] = refusedStatus(b.name, c.value, c.wait)
			b.remember(ups[i])
		}
	}
	if len(g.breakers) == 0 {
		return nil, nil
	}
	return upstreamRefusal(l.job, ups), nil
}

// refusedStatus is an upstream's refusal read with its wait.
func refusedStatus(name, value string, wait time.Duration) UpstreamStatus {
	s := parseScope(value)
	st := UpstreamStatus{Scope: name, State: ScopeCooling, Reason: s.reason, RetryAfter: max(wait, time.Millisecond)}
	switch s.kind {
	case scopePaused:
		st.State = ScopePaused
	case scopeProbing:
		st.Probing = true
	}
	return st
}

// upstreamRefusal refuses a call every upstream refused: the wait is the
// soonest any of them reopens.
func upstreamRefusal(job string, ups []UpstreamStatus) *BlockedError {
	b := &BlockedError{Job: job, State: UpstreamCooling, Upstreams: ups}
	for i, u := range ups {
		if i == 0 || u.RetryAfter < b.RetryAfter {
			b.RetryAfter, b.Reason = u.RetryAfter, u.Reason
		}
	}
	return b
}

// jobRefusal refuses a call by the job's value.
func (g *Gate) jobRefusal(job string, r acquireReply) *BlockedError {
	v := parseJob(r.value)
	b := &BlockedError{Job: job, State: v.state(r.now), Attempts: v.attempts, Reason: v.reason, Evidence: v.evidence}
	switch {
	case b.State == Ready:
		b.State = Running // the script holds what it cannot read
	}
	switch b.State {
	case Running:
		left := g.leaseLeft(r.pttl)
		b.RetryAfter, b.token = g.runningWait(left, g.ranFor(v, r.now, left)), v.token
	case CoolingDown:
		b.RetryAfter = v.left(r.now)
	}
	return b
}

// leaseLeft is a running value's time left from its PTTL; a value held
// without a TTL (not written by a gate) is held for a lease, as far as
// anyone knows.
func (g *Gate) leaseLeft(p int64) time.Duration {
	if p == -1 {
		return g.opts.Lease
	}
	return pttl(p)
}

// ranFor is how long a running value's run has taken at Redis time now
// (ms): since its fence (Redis's µs clock at its acquire), or, for a run
// taken on a free key and not renewed yet (no fence recorded), since its
// key was set with the lease's TTL.
func (g *Gate) ranFor(v jobValue, now int64, left time.Duration) time.Duration {
	if v.fence == 0 {
		return max(g.opts.Lease-left, 0)
	}
	return max(time.Duration(now*1000-v.fence)*time.Microsecond, 0)
}
