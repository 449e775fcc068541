package store

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// SuccessMemory is how long a success's token stays in its job's done
// key. A waiter woken by the success is told the job is done, instead of
// running it again. This holds however short the done mark is (none: the
// success frees the job). Waiters read at once when woken, or within a
// second while they poll.
const SuccessMemory = 10 * time.Second

// Token is a lease's identity: a 128-bit random token in hex, and the
// value a lease taken on a free key holds, "r:" + Token.
type Token struct {
	Token, running string
}

// NewToken returns a fresh token. math/rand/v2's generator is seeded from
// the OS and cheap. The token only has to be unique: whoever can write to
// Redis can overwrite the lock anyway.
func NewToken() Token {
	var raw [16]byte
	binary.LittleEndian.PutUint64(raw[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(raw[8:], rand.Uint64())
	b := [34]byte{byte(Running), ':'}
	hex.Encode(b[2:], raw[:])
	running := string(b[:])
	return Token{Token: running[2:], running: running}
}

// Acquire is what an acquire asks: take Key for Token, and in the same
// round trip read a waiter's done key and the upstreams' values.
type Acquire struct {
	Key   string
	Token Token
	// Done is a waiter's done key ("" for none): the token of the last
	// success that freed the job.
	Done string
	// Upstreams are the keys of upstreams read beside the job.
	Upstreams []string
	// Admissions, when set, ask each upstream's budget in the same trip,
	// as Upstreams.
	Admissions []Admission
	// InTurn, when set, is this acquire sent already (Trip.AcquireInTurn):
	// Store.Acquire decodes its answer and sends nothing.
	InTurn *InTurn
}

// Acquired is the acquire's answer.
type Acquired struct {
	// Taken: the job is the caller's, with Fence. Otherwise Job is the
	// value that refused it; Takeover may still take a settled one.
	// Untried: no upstream could take the call, and the job was not read.
	// That happens on one node, where the upstreams are judged before the
	// job is taken.
	Taken   bool
	Untried bool
	// Unasked: the upstreams were neither read nor asked (Upstreams and
	// Admitted are empty). A cluster with admissions takes the job first.
	// Ask asks them once the job is the caller's.
	Unasked bool
	Fence   int64
	// Job is the value that refused the acquire or, taken, the value it
	// replaced (the job's history; Foreign with no value).
	Job Job
	// TTL is the refusing value's time left; NoTTL: it has no TTL (a value
	// no gate wrote).
	TTL   time.Duration
	NoTTL bool
	// Now is Redis's clock (ms) on the job's node.
	Now int64
	// DoneToken is the done key's token (Acquire.Done), "" for none.
	DoneToken string
	// Upstreams are the upstreams' values, as Acquire.Upstreams.
	Upstreams []Upstream
	// Admitted are their budgets' answers, as Acquire.Admissions. A
	// budget that failed to answer judged nothing: a user without the
	// permission its script needs, or a Redis out of memory. AdmitErr is
	// the first such error. The upstreams' GETs beside them answered.
	Admitted []Admitted
	AdmitErr error

	value string      // the raw value, for an undo
	pttl  int64       // its PTTL
	conn  *redis.Conn // pinned for WAIT
	// sent is when the trip that took the job was sent (local clock):
	// a call Ask reserves later is held no longer than the lease.
	sent time.Time
}

// Close releases the connection a WaitReplicas acquire pinned.
func (a *Acquired) Close() {
	if a.conn != nil {
		a.conn.Close()
	}
}

// Acquire sends the acquire's round trip. It holds:
//   - the job's PTTL, SET NX GET and TIME (take);
//   - a waiter's read of the done key;
//   - each upstream's GET and its budget's admission.
//
// On one node with admissions it is one script instead (takeAdmitted).
// The script judges the upstreams before it takes the job. A script Redis
// refuses (OOM, READONLY, an ACL) falls back to the commands, which say
// which.
//
// Elsewhere with admissions, the trip takes the job only and leaves the
// upstreams Unasked. Elsewhere is a cluster, or a client that may front
// one; the fallback above does the same. The caller asks the upstreams
// with Ask once the job is its own (second trip). Only where the budgets'
// commands are refused (an ACL) are they sent side by side.
//
// Side by side, a job's take and an upstream's admission answer apart.
// So of two duplicates, one could take the job and be refused the call.
// The other could be admitted and find the job taken: neither runs. And
// beside a take Redis refused (OOM), an admission that found the caller's
// turn removes it and reserves the call on a full Redis.
//
// Taken first, the job decides which duplicate asks, as the one-node
// script does. The costs are:
//   - a duplicate: one trip, refused by the job, reserving nothing;
//   - a success: two trips;
//   - an upstream refusal: three (take, ask, give back). A breaker's
//     refusal is then known here (upstream.Set.PeekKnown).
//
// The job's commands go to the job's own node:
//   - on one node, with the upstreams' GETs in one pipeline;
//   - on a cluster, through that master's client (TIME has no key to
//     route it by), beside a pipeline of the GETs through the cluster
//     client;
//   - with WaitReplicas, on a connection pinned to it, kept for
//     Replicate. On a cluster the GETs are then sent after the job's
//     commands. go-redis's pinned Conn shares its client's Options
//     without its lock. Two connections opened at once, one each way,
//     race on them.
//
// When Redis refuses the SET (OOM, READONLY), a second trip reads the
// job's value (readRefusal). A value that refuses the call is the answer,
// without a write. When the master's client fails, the job's commands are
// sent once more (resend). It fails for a slot that moved (MOVED, ASK) or
// a node failing over. Hooks added with ClusterClient.AddHook do not see
// the commands sent through a master's client; OnNewNode hooks do.
//
// On an error the answer is still returned. The job may have been taken
// (Taken); the caller gives it back (Trip.Undo). Close r when done.
func (s *Store) Acquire(ctx context.Context, a *Acquire, r *Acquired) error {
	if a.InTurn != nil {
		// Sent already, in the caller's join to its line.
		return a.InTurn.decode(r)
	}
	rt, err := s.route(ctx, a.Key)
	r.conn = rt.conn
	if err != nil {
		return err
	}
	if s.oneNode && len(a.Admissions) > 0 && !s.unscripted.Load() {
		err = s.takeAdmitted(ctx, rt.via, a, r)
		if err == nil || !Replied(err) {
			return err
		}
		// Refused: a Redis that refuses writes, or a user without a
		// command's permission. The commands side by side say which.
		if msg := err.Error(); strings.Contains(msg, "NOPERM") || strings.Contains(msg, "can't run this command") {
			// The budget's commands are not permitted (ACL). The budget
			// judges nothing. That is not worth a second trip each time.
			s.unscripted.Store(true)
		}
	}
	// Side by side only where the budgets judge nothing: one node whose
	// ACL refuses their commands. Elsewhere the job is taken first. On
	// one node that is the script Redis refused (OOM, READONLY). Sent
	// beside a refused take, an admission that found a turn would remove
	// it. It would then reserve the call on a full Redis.
	r.Unasked = len(a.Admissions) > 0 && !(s.oneNode && s.unscripted.Load())
	r.sent = time.Now()
	peeks, admits, err := s.take(ctx, &rt, a, r, !r.Unasked)
	if err != nil && Refused(err) && s.readRefusal(ctx, rt.via, a.Key, r) {
		// Redis refuses writes (OOM, READONLY). But the job's value
		// refuses the call anyway, and that refusal needs no write.
		err = nil
	}
	if err != nil && s.resend(ctx, &rt, err) {
		// Taken over by the script, whose TIME runs where the key is. The
		// upstreams were read by the first send.
		if err = s.reroute(ctx, &rt, a.Key, err); err == nil {
			err = s.takeover(ctx, rt.via, a, r, a.Done != "")
		}
		r.conn = rt.conn
	}
	if err != nil || r.Unasked {
		return err
	}
	return decodeAsked(a, peeks, admits, r)
}

// Ask is an acquire's second trip on a cluster with admissions (Unasked).
// It sends each upstream's GET and its budget's admission, for the job r
// took. The call it reserves is held for the lease less the time since
// the job was taken. So a process that dies before its first renewal
// leaves no reservation past its lock. A waiter woken when the lock lapses
// is not refused by it (one call at a time before anything is known).
func (s *Store) Ask(ctx context.Context, a *Acquire, r *Acquired) error {
	t := s.Trip()
	lease := max(ms(s.cfg.Lease-time.Since(r.sent)), 1)
	peeks, admits := t.ask(ctx, a, lease)
	t.Send(ctx)
	r.Unasked = false
	return decodeAsked(a, peeks, admits, r)
}

// ask queues each upstream's GET and its budget's admission, which holds
// a call it reserves for lease (ms).
func (t *Trip) ask(ctx context.Context, a *Acquire, lease any) ([]*redis.StringCmd, []*redis.Cmd) {
	peeks := make([]*redis.StringCmd, len(a.Upstreams))
	for i, k := range a.Upstreams {
		peeks[i] = t.get(ctx, k)
	}
	var admits []*redis.Cmd
	if len(a.Admissions) > 0 {
		admits = make([]*redis.Cmd, len(a.Admissions))
	}
	for i, ad := range a.Admissions {
		admits[i] = t.admit(ctx, ad, lease)
	}
	return peeks, admits
}

// decodeAsked reads what ask sent into r.
func decodeAsked(a *Acquire, peeks []*redis.StringCmd, admits []*redis.Cmd, r *Acquired) error {
	r.Upstreams = make([]Upstream, len(peeks))
	for i, p := range peeks {
		v, perr := p.Result()
		if perr != nil && !isNil(perr) {
			return perr // fail closed on the upstream too; the job is given back
		}
		r.Upstreams[i] = parseUpstream(v)
	}
	if len(admits) > 0 {
		r.Admitted = make([]Admitted, len(admits))
	}
	for i, c := range admits {
		var aerr error
		if r.Admitted[i], aerr = decodeAdmitted(c, a.Admissions[i].Member); aerr != nil {
			r.Admitted[i].Failed = true
			if r.AdmitErr == nil {
				r.AdmitErr = aerr
			}
		}
	}
	return nil
}

// takeAdmitted is the acquire on one node when the upstreams have
// budgets. acquire_budget.lua first judges every upstream: its value and
// its budget. It takes the job only when one of them may take the call,
// which reserves it there. A refusal by the upstreams is one round trip
// that writes nothing to the job. A job refused by its value reserves
// nothing. A cluster cannot do this: the job's key and the upstreams'
// live in different slots. There they are sent side by side (take). A job
// taken for a call its upstreams refuse is given back.
func (s *Store) takeAdmitted(ctx context.Context, via Client, a *Acquire, r *Acquired) error {
	keys, member, turn, turnOf := admissionKeys(a, 0)
	t := s.Trip()
	q := t.takeAdmitted(ctx, a, keys, member, turn, turnOf, "")
	t.sendVia(ctx, via)
	return q.decode(r)
}

// admissionKeys are acquire_budget.lua's keys for a (the job's, then each
// upstream's three), with room for extra more; the member that reserves
// the call; and the turn a caller holds, with its upstream's place
// (1-based, 0 for none).
func admissionKeys(a *Acquire, extra int) (keys []string, member, turn string, turnOf int) {
	keys = make([]string, 0, 1+3*len(a.Admissions)+extra)
	keys = append(keys, a.Key)
	for i, ad := range a.Admissions {
		keys = append(keys, ad.Keys.keys()...)
		if ad.Member != "" {
			member = ad.Member
		}
		if ad.Turn != "" {
			turn, turnOf = ad.Turn, i+1
		}
	}
	return keys, member, turn, turnOf
}

// takeAdmitted queues acquire_budget.lua, and the done key's GET, on t.
func (t *Trip) takeAdmitted(ctx context.Context, a *Acquire, keys []string, member, turn string, turnOf int, owner string) *InTurn {
	ad := a.Admissions[0]
	q := &InTurn{member: member, n: len(a.Admissions)}
	q.cmd = t.eval(ctx, acquireBudgetScript, keys, a.Token.Token, t.s.lease, member, max(ad.Tokens, 0),
		ad.Reserve.Requests, strconv.FormatFloat(ad.Reserve.TokenShare, 'f', -1, 64), turn, turnOf, owner)
	if a.Done != "" {
		q.done = t.get(ctx, a.Done)
	}
	return q
}

// InTurn is an acquire sent in its caller's join to a line
// (Trip.AcquireInTurn), decoded by Store.Acquire (Acquire.InTurn).
type InTurn struct {
	cmd    *redis.Cmd
	done   *redis.StringCmd
	member string
	n      int
}

// Turned reports whether the acquire found its caller's turn, given in
// the join's round trip, and so judged the call with it: otherwise it
// read nothing and wrote nothing, and the caller acquires as it would
// have (Redis's error included).
func (q *InTurn) Turned() bool {
	v, err := q.cmd.Slice()
	return err == nil && len(v) > 0
}

func (q *InTurn) decode(r *Acquired) error {
	if err := decodeTakeAdmitted(q.cmd, q.member, q.n, r); err != nil {
		return err
	}
	return readDone(q.done, r)
}

// AcquireInTurn queues on t, after a caller's join to the line of the
// upstream with index of (0-based, as a.Admissions) and the give in the
// same trip, the acquire a turn given there takes: the turn is the one at
// mark (the caller's job's mark in that line, which the join writes) when
// its place is owner's. It returns nil where no one script reads the job
// and its upstreams (a cluster, a Redis that refused the script, or an
// acquire that waits for replicas): the caller acquires with its turn
// once it has it, as before.
func (t *Trip) AcquireInTurn(ctx context.Context, a *Acquire, of int, mark, owner string) *InTurn {
	s := t.s
	if !s.oneNode || s.unscripted.Load() || s.cfg.WaitReplicas > 0 || of < 0 || of >= len(a.Admissions) {
		return nil
	}
	keys, member, _, _ := admissionKeys(a, 1)
	keys = append(keys, mark)
	return t.takeAdmitted(ctx, a, keys, member, "", of+1, owner)
}

// decodeTakeAdmitted reads acquire_budget.lua's {job, values,
// admissions} for n upstreams.
func decodeTakeAdmitted(cmd *redis.Cmd, member string, n int, r *Acquired) error {
	v, err := cmd.Slice()
	if err != nil {
		return err
	}
	var job, values, admissions []any
	if len(v) == 1 {
		// The job held refused the call before its upstreams were asked.
		job, _ = v[0].([]any)
		if kind, _ := replyInt(job, 0); kind != 0 {
			return badReply("acquire", v)
		}
		r.Unasked = true
		return takenOf(job, r)
	}
	if len(v) == 3 {
		job, _ = v[0].([]any)
		values, _ = v[1].([]any)
		admissions, _ = v[2].([]any)
	}
	if len(values) != n || len(admissions) != n {
		return badReply("acquire", v)
	}
	kind, _ := replyInt(job, 0)
	if now, ok := replyInt(job, 1); kind == 2 && ok && len(job) == 2 {
		r.Taken, r.Untried, r.Fence, r.Now = false, true, 0, now
		r.setValue("", -2)
	} else if err := takenOf(job, r); err != nil {
		return err
	}
	r.Upstreams = make([]Upstream, n)
	r.Admitted = make([]Admitted, n)
	for i := range n {
		u, _ := replyString(values, i) // nil: ready
		r.Upstreams[i] = parseUpstream(u)
		av, _ := admissions[i].([]any)
		if r.Admitted[i], err = admittedOf(av, member); err != nil {
			return err
		}
	}
	return nil
}

// route is where an acquire's commands go.
type route struct {
	via  Client      // the job's node: the store's client, its master's, or conn
	conn *redis.Conn // pinned for WAIT (WaitReplicas)
	// apart: the upstreams' GETs go through the store's client, beside
	// via (a cluster: they live in other slots).
	apart bool
}

func (s *Store) route(ctx context.Context, key string) (rt route, err error) {
	rt.via = s.send
	switch {
	case s.cfg.WaitReplicas > 0:
		if rt.conn, err = s.pin(ctx, key); err != nil {
			return rt, err
		}
		rt.via, rt.apart = rt.conn, s.master != nil
	case s.master != nil:
		if rt.via, err = s.master(ctx, key); err != nil {
			return rt, err
		}
		rt.apart = true
	}
	return rt, nil
}

// take is the acquire's first send: native commands. It adds the
// upstreams' GETs and their budgets' admissions when asked (ups). It
// returns the GETs' and the admissions' commands.
func (s *Store) take(ctx context.Context, rt *route, a *Acquire, r *Acquired, ups bool) ([]*redis.StringCmd, []*redis.Cmd, error) {
	jt := s.Trip() // the job's node (and the upstreams', on one node)
	var ut *Trip   // the upstreams' GETs when apart
	if ups && rt.apart && len(a.Upstreams) > 0 {
		t := s.Trip()
		ut = &t
	}
	set, pt, now, fence := jt.take(ctx, a.Key, a.Token.running, s.lease)
	var done *redis.StringCmd
	if a.Done != "" {
		done = jt.get(ctx, a.Done)
	}
	var (
		peeks  []*redis.StringCmd
		admits []*redis.Cmd
	)
	switch {
	case ut != nil:
		peeks, admits = ut.ask(ctx, a, s.lease)
	case ups:
		peeks, admits = jt.ask(ctx, a, s.lease)
	}
	switch {
	case ut == nil:
		jt.sendVia(ctx, rt.via)
	case rt.conn != nil:
		jt.sendVia(ctx, rt.via)
		ut.Send(ctx)
	default:
		sent := make(chan struct{})
		go func() {
			defer close(sent)
			ut.Send(ctx)
		}()
		jt.sendVia(ctx, rt.via)
		<-sent
	}
	err := decodeTake(set, pt, now, fence, r)
	if err == nil {
		err = readDone(done, r)
	}
	return peeks, admits, err
}

// readRefusal is the acquire's second trip when Redis refused the SET. It
// refuses it when full with noeviction (OOM), or as a replica (READONLY).
// The trip reads the job's value, its PTTL and Redis's TIME, through via;
// none of these writes. It reports whether that value refuses the call:
// running, settled and not over, or foreign. Then r holds it. False
// leaves the refusal of the write to fail closed.
func (s *Store) readRefusal(ctx context.Context, via Client, key string, r *Acquired) bool {
	t := s.Trip()
	get := t.get(ctx, key)
	p := redis.NewIntCmd(ctx, "pttl", key)
	t.add(p)
	now := redis.NewTimeCmd(ctx, "time")
	t.add(now)
	t.sendVia(ctx, via)
	v, err := get.Result()
	if err != nil { // no value (nil) refuses nothing
		return false
	}
	pt, err1 := p.Result()
	tm, err2 := now.Result()
	if err1 != nil || err2 != nil {
		return false
	}
	r.Taken, r.Fence, r.Now = false, 0, tm.UnixMilli()
	r.setValue(v, pt)
	return !r.Job.Over(r.Now)
}

// resend reports whether an acquire whose first send failed with err is
// sent once more. It is, for a slot that moved (MOVED) or a failing
// master's client on a cluster, unless the caller has given up.
func (s *Store) resend(ctx context.Context, rt *route, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	return movedTo(err) != "" || (s.master != nil && rt.conn == nil)
}

// reroute sends the job's commands where the key lives now. With a pinned
// connection it pins one to the slot's new master: a pinned connection
// does not follow a resharded slot. Otherwise it sends through the
// store's client, which follows redirects, reloads its slot map and
// retries.
func (s *Store) reroute(ctx context.Context, rt *route, key string, err error) error {
	if rt.conn == nil {
		rt.via = s.send
		return nil
	}
	rt.conn.Close()
	rt.conn, err = s.repin(ctx, key, movedTo(err))
	if err != nil {
		return err
	}
	rt.via = rt.conn
	return nil
}

// take queues the native part of an acquire, on the job's node:
//   - the key's PTTL;
//   - SET the running value if the key is free (NX), returning what it
//     holds otherwise (GET; Redis 7.0+);
//   - Redis's TIME, the fence of a job taken so and the clock every value
//     is judged by. It is read after the SET, so it is above every fence
//     taken before it;
//   - last, job_fence.lua, which records the fence beside the token when
//     the SET took the key. A Status in any process then reads it. The
//     script's TIME, a moment later, is then the fence.
//
// A script that fails (an ACL without +eval after a restart) costs only
// that record. The first renewal writes it.
//
// PTTL comes first because go-redis judges a pipeline's retry by its first
// reply. A SET NX GET that takes a free key replies nil. Classifying that
// as an error costs about 17 allocations per acquire. The price: go-redis
// does not retry a SET refused with READONLY (a demoted master). The
// acquire fails closed and the caller retries.
//
// The native commands' arguments share one array, and the key is boxed
// once: an acquire is the gate's hottest path.
func (t *Trip) take(ctx context.Context, key, running string, lease any) (set *redis.StringCmd, pttl *redis.IntCmd, now *redis.TimeCmd, fence *redis.Cmd) {
	k := any(key)
	args := []any{"pttl", k, "set", k, running, "nx", "get", "px", lease, "time"}
	pttl = redis.NewIntCmd(ctx, args[0:2:2]...)
	set = redis.NewStringCmd(ctx, args[2:9:9]...)
	now = redis.NewTimeCmd(ctx, args[9:10:10]...)
	t.add(pttl)
	t.add(set)
	t.add(now)
	fence = t.eval(ctx, jobFenceScript, []string{key}, running)
	return set, pttl, now, fence
}

// decodeTake reads what take sent. When the key was free, the job is
// taken with the fence TIME gave. That is job_fence.lua's TIME, which
// recorded it, when the script ran. Otherwise the key's value refused it.
func decodeTake(set *redis.StringCmd, p *redis.IntCmd, now *redis.TimeCmd, fence *redis.Cmd, r *Acquired) error {
	v, err := set.Result()
	taken := isNil(err)
	if err != nil && !taken {
		return err
	}
	tm, err := now.Result()
	if err != nil {
		return err
	}
	r.Taken, r.Now = taken, tm.UnixMilli()
	if taken {
		if ft, err := decodeTime(fence); err == nil {
			tm = ft
		}
		r.Fence, r.pttl, r.value, r.Job = tm.UnixMicro(), -2, "", Job{}
		return nil
	}
	pt, err := p.Result()
	if err != nil {
		return err
	}
	r.setValue(v, pt)
	return nil
}

// decodeTime reads job_fence.lua's {seconds, microseconds}, as TIME's.
func decodeTime(c *redis.Cmd) (time.Time, error) {
	v, err := slice(c)
	if err != nil {
		return time.Time{}, err
	}
	sec, ok1 := replyInt(v, 0)
	usec, ok2 := replyInt(v, 1)
	if !ok1 || !ok2 || len(v) != 2 {
		return time.Time{}, badReply("fence", v)
	}
	return time.Unix(sec, usec*1000), nil
}

// setValue records the job's value and its PTTL.
func (r *Acquired) setValue(v string, p int64) {
	r.value, r.pttl, r.Job = v, p, parseJob(v)
	r.TTL, r.NoTTL = pttl(p), p == -1
}

func readDone(done *redis.StringCmd, r *Acquired) error {
	if done == nil {
		return nil
	}
	v, err := done.Result()
	if isNil(err) {
		return nil
	}
	r.DoneToken, _, _ = strings.Cut(v, ":") // "<token>:<fence>" (MarkDone)
	return err
}

// Takeover takes a job whose value is a settled state that is over. Its
// history goes on into the new run. It costs one more round trip on the
// job's node. r is updated: taken, or refused by what the key holds now.
func (s *Store) Takeover(ctx context.Context, a *Acquire, r *Acquired) error {
	via := Client(s.send)
	if r.conn != nil {
		via = r.conn
	}
	return s.takeover(ctx, via, a, r, false)
}

// takeover runs job_acquire.lua through via. withDone reads the waiter's
// done key beside it, for a resend whose first read failed.
func (s *Store) takeover(ctx context.Context, via Client, a *Acquire, r *Acquired, withDone bool) error {
	t := s.Trip()
	r.sent = time.Now()
	cmd := t.eval(ctx, jobAcquireScript, []string{a.Key}, a.Token.Token, s.lease)
	var done *redis.StringCmd
	if withDone {
		done = t.get(ctx, a.Done)
	}
	t.sendVia(ctx, via)
	if err := decodeAcquire(cmd, r); err != nil {
		return err
	}
	return readDone(done, r)
}

// decodeAcquire reads job_acquire.lua's reply (job_take.lua).
func decodeAcquire(cmd *redis.Cmd, r *Acquired) error {
	v, err := cmd.Slice()
	if err != nil {
		return err
	}
	return takenOf(v, r)
}

// takenOf reads take's reply:
//
//	{0, now ms, value, pttl}                              refused by the value
//	{1, now ms, fence, previous value or false, its pttl} taken
func takenOf(v []any, r *Acquired) error {
	kind, ok0 := replyInt(v, 0)
	now, ok1 := replyInt(v, 1)
	switch {
	case ok0 && ok1 && kind == 0 && len(v) == 4:
		val, ok2 := replyString(v, 2)
		p, ok3 := replyInt(v, 3)
		if ok2 && ok3 {
			r.Taken, r.Now, r.Fence = false, now, 0
			r.setValue(val, p)
			return nil
		}
	case ok0 && ok1 && kind == 1 && len(v) == 5:
		fence, ok2 := replyInt(v, 2)
		val, _ := replyString(v, 3) // false: no previous value
		p, ok4 := replyInt(v, 4)
		if ok2 && ok4 {
			r.Taken, r.Now, r.Fence = true, now, fence
			r.setValue(val, p)
			return nil
		}
	}
	return badReply("acquire", v)
}

// Replicate waits for WaitReplicas replicas to acknowledge the acquire. It
// waits on the connection that wrote it. It is a no-op without
// WaitReplicas.
func (s *Store) Replicate(ctx context.Context, r *Acquired) error {
	if r.conn == nil {
		return nil
	}
	want := s.cfg.WaitReplicas
	n, err := r.conn.Wait(ctx, want, s.cfg.WaitTimeout).Result()
	if err == nil && n < int64(want) {
		err = &notReplicatedError{acked: n, want: want, within: s.cfg.WaitTimeout}
	}
	return err
}

// Undo queues job_undo.lua: give back the job r took for token. It
// restores the value the acquire replaced. It reports whether the job was
// given back (false: not owned).
func (t *Trip) Undo(ctx context.Context, key string, token Token, r *Acquired) Reply[bool] {
	cmd := t.eval(ctx, t.s.scripts.jobUndo, []string{key}, token.Token, r.value, r.pttl)
	return Reply[bool]{cmd, decodeFlag}
}

// Renew queues job_renew.lua: extend the lease if token still holds it.
// It records the fence, the attempts and the estimate of the call's
// duration (0: none) beside the token. It reports whether the lease was
// extended (false: not owned).
func (t *Trip) Renew(ctx context.Context, key string, token Token, fence int64, attempts int, estimate time.Duration) Reply[bool] {
	est := ""
	if estimate > 0 {
		est = strconv.FormatInt(max(ms(estimate), 1), 10)
	}
	cmd := t.eval(ctx, jobRenewScript, []string{key}, token.Token, t.s.lease, strconv.FormatInt(fence, 10), attempts, est)
	return Reply[bool]{cmd, decodeFlag}
}

func decodeFlag(c redis.Cmder) (bool, error) {
	n, err := c.(*redis.Cmd).Int64()
	return n == 1, err
}

// Settlement is what a run's end writes to its job.
type Settlement struct {
	Kind Kind          // Cooling, Failed or Done
	TTL  time.Duration // how long the state lasts (Done 0: the job is freed)
	Keep time.Duration // how much longer the key keeps the attempt count
	// The value's content.
	Attempts         int
	Suspect          bool
	Reason, Evidence string
	// Late: a Done written by the retry of a settle Redis did not take.
	// It is written on a key that expired meanwhile too.
	Late bool
}

// Settled is job_settle.lua's answer.
type Settled struct {
	Owned bool
	// Found is what the key held when the run no longer owned it; Gone:
	// nothing.
	Found Job
	Gone  bool
}

// Settle queues job_settle.lua: write w if token still holds the job. A
// late success is written when its key is gone, too. A failure that finds
// its key gone is written by SettleGone, if no newer run decided
// otherwise.
func (t *Trip) Settle(ctx context.Context, key string, token Token, fence int64, w Settlement) Reply[Settled] {
	late := "0"
	if w.Late {
		late = "1"
	}
	cmd := t.eval(ctx, t.s.scripts.jobSettle, []string{key}, w.args(token, fence, late)...)
	return Reply[Settled]{cmd, decodeSettle}
}

// args are a settle script's arguments for w, written by the run of
// token and fence. They are the token, w's kind, TTL, keep and value
// tail, then more.
func (w Settlement) args(token Token, fence int64, more string) []any {
	tail := settledTail(fence, w.Attempts, w.Suspect, w.Reason, w.Evidence)
	return []any{token.Token, string(rune(w.Kind)), ms(w.TTL), ms(w.Keep), tail, more}
}

// SettleGone queues job_settle_gone.lua. It is the second trip of a
// failure w whose settle found its key gone (Settled.Gone). The run's
// lease ended in Redis before the failure reached it. w is written unless
// one of these holds:
//   - the key holds a value again;
//   - a newer run's success left its fence in doneKey (MarkDone).
//
// Dropping the failure would make the next call a free retry. Writing it
// over a newer run's success would undo that success. The done key is a
// second key of the script only here, on this rare path. On a cluster, a
// slot being migrated refuses such a script with TRYAGAIN while one key
// has moved and the other not. go-redis retries that.
//
// stale is the instant, by Redis's clock, after which w is not written.
// The done key remembers a newer success or a reset for SuccessMemory
// only. So a failure later than that after its lease ended could undo one
// (StaleAfter).
func (t *Trip) SettleGone(ctx context.Context, key, doneKey string, token Token, fence int64, stale time.Time, w Settlement) Reply[Settled] {
	args := append(w.args(token, fence, strconv.FormatInt(fence, 10)), strconv.FormatInt(stale.UnixMicro(), 10))
	cmd := t.eval(ctx, t.s.scripts.jobSettleGone, []string{key, doneKey}, args...)
	return Reply[Settled]{cmd, decodeSettle}
}

// StaleAfter is when, by Redis's clock, a failure that finds its key gone
// stops being written (SettleGone). That is SuccessMemory after the lease
// ended. The arguments are:
//   - fence: Redis's TIME at the acquire;
//   - acquired: the local time its reply came;
//   - expires: the local end of the lease (the last renewal sent plus the
//     lease).
//
// The lease ended in Redis no earlier than fence + (expires - acquired).
// Redis ran the acquire before its reply came, and each renewal after it
// was sent. So the instant is never later than the done key's memory
// covers.
func StaleAfter(fence int64, acquired, expires time.Time) time.Time {
	return time.UnixMicro(fence).Add(expires.Sub(acquired) + SuccessMemory)
}

// decodeSettle reads {1} written, {0, the value found or false} not owned.
func decodeSettle(c redis.Cmder) (Settled, error) {
	v, err := slice(c)
	if err != nil {
		return Settled{}, err
	}
	n, ok := replyInt(v, 0)
	switch {
	case ok && n == 1 && len(v) == 1:
		return Settled{Owned: true}, nil
	case ok && n == 0 && len(v) == 2:
		cur, _ := replyString(v, 1)
		return Settled{Found: parseJob(cur), Gone: cur == ""}, nil
	}
	return Settled{}, badReply("settle", v)
}

// MarkDone queues the write of a success's token and fence to its job's
// done key ("<token>:<fence>") for SuccessMemory. It is a command of its
// own, not a second key of the settle script. A script's keys split by a
// migrating slot would be refused with TRYAGAIN. Queue it before the
// settle, which frees the job and wakes the waiters. Sent after it, a
// waiter's acquire could run between the two (a pipeline is not atomic).
// It would find the job free and no done key, and run the job again.
func (t *Trip) MarkDone(ctx context.Context, doneKey string, token Token, fence int64) {
	t.add(redis.NewStatusCmd(ctx, "set", doneKey, token.Token+":"+strconv.FormatInt(fence, 10), "px", ms(SuccessMemory)))
}

// ForgetDone queues job_forget_done.lua. The job's done key then holds the
// reset's time instead of a success's token. So a job an operator reset
// is not refused by the success it forgets (an acquire reads the key,
// gate/acquire.go). And a failure of a run older than the reset that
// finds its key gone is not written (SettleGone).
func (t *Trip) ForgetDone(ctx context.Context, doneKey string) {
	t.eval(ctx, jobForgetDoneScript, []string{doneKey}, ms(SuccessMemory))
}

// JobReset is job_reset.lua's answer.
type JobReset struct {
	// Running: a running lease was left alone, for TTL more (NoTTL: its
	// key has none, a value no gate wrote). Job is its value, read at
	// Redis's Now (ms).
	Running bool
	TTL     time.Duration
	NoTTL   bool
	Job     Job
	Now     int64
}

// ResetJob queues job_reset.lua: clear a job's cooldown, failed or done
// mark and its attempt count. A running lease is left alone.
func (t *Trip) ResetJob(ctx context.Context, key string) Reply[JobReset] {
	return Reply[JobReset]{t.eval(ctx, t.s.scripts.jobReset, []string{key}), decodeReset}
}

// decodeReset reads {previous value or false, pttl of a running one, and
// for a running one Redis's ms}.
func decodeReset(c redis.Cmder) (JobReset, error) {
	v, err := slice(c)
	if err != nil {
		return JobReset{}, err
	}
	p, ok := replyInt(v, 1)
	if !ok || len(v) < 2 || len(v) > 3 {
		return JobReset{}, badReply("reset", v)
	}
	prev, _ := replyString(v, 0)
	r := JobReset{Job: parseJob(prev), TTL: pttl(p), NoTTL: p == -1}
	if r.Running = r.Job.Kind == Running; r.Running {
		if r.Now, ok = replyInt(v, 2); !ok {
			return JobReset{}, badReply("reset", v)
		}
	}
	return r, nil
}

// JobRead is a job's value read with Redis's clock.
type JobRead struct {
	Job    Job
	Exists bool // the key exists (Job is Foreign for a value of another shape)
	TTL    time.Duration
	NoTTL  bool  // the key has no TTL (a value no gate wrote)
	Now    int64 // Redis ms
}

// ReadJob queues read.lua for a job's key.
func (t *Trip) ReadJob(ctx context.Context, key string) Reply[JobRead] {
	return Reply[JobRead]{t.eval(ctx, readScript, []string{key}), decodeJobRead}
}

func decodeJobRead(c redis.Cmder) (JobRead, error) {
	val, p, now, err := decodeRead(c)
	if err != nil {
		return JobRead{}, err
	}
	return JobRead{Job: parseJob(val), Exists: val != "", TTL: pttl(p), NoTTL: p == -1, Now: now}, nil
}

// decodeRead reads read.lua's {value or false, pttl, now ms}.
func decodeRead(c redis.Cmder) (value string, p, now int64, err error) {
	v, err := slice(c)
	if err != nil {
		return "", 0, 0, err
	}
	p, ok1 := replyInt(v, 1)
	now, ok2 := replyInt(v, 2)
	if !ok1 || !ok2 || len(v) != 3 {
		return "", 0, 0, badReply("read", v)
	}
	value, _ = replyString(v, 0)
	return value, p, now, nil
}
