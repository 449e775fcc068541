package proof_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/proof"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

func TestMain(m *testing.M) {
	if code, ok := runPausedWorker(); ok {
		os.Exit(code)
	}
	redistest.Main(m)
}

var (
	errTransient = classify.Transient(errors.New("upstream 503"), 0)
	errPermanent = errors.New("upstream 400: bad request")
)

// classifyTest is the gate's classifier in these tests: errPermanent is
// permanent, everything else transient, so outcomes do not depend on the
// default table.
func classifyTest(err error) classify.Verdict {
	if errors.Is(err, errPermanent) {
		return classify.Verdict{Class: classify.ClassPermanent, Reason: "bad_request"}
	}
	return classify.Verdict{Class: classify.ClassTransient, Reason: "overloaded"}
}

// timing slack for a loaded 2-core CI machine under -race.
const slack = 400 * time.Millisecond

// clockSlack absorbs Redis's millisecond TTL granularity.
const clockSlack = 2 * time.Millisecond

// newGate builds a gate with the test classifier and, unless set, a
// per-test prefix.
func newGate(t *testing.T, rdb gate.Client, opts gate.Options) *gate.Gate {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = redistest.UniqueKey(t)
	}
	if opts.Classify == nil {
		opts.Classify = classifyTest
	}
	g, err := gate.New(rdb, opts)
	if err != nil {
		t.Fatalf("gate.New: %v", err)
	}
	built.Store(g, opts)
	t.Cleanup(func() { built.Delete(g) })
	return g
}

// built holds the options newGate gave each gate.
var built sync.Map // *gate.Gate → gate.Options

// optionsOf is the options newGate built g with (Prefix and Classify
// filled in), for a second gate on the same keys or a key of g's.
func optionsOf(g *gate.Gate) gate.Options {
	o, ok := built.Load(g)
	if !ok {
		panic("optionsOf: the gate was not built by newGate")
	}
	return o.(gate.Options)
}

// faultClient is a client whose every command is bounded even when the
// network swallows it: the context's deadline reaches the socket
// (ContextTimeoutEnabled) and, without one, ReadTimeout does. It retries
// at most maxRetries times.
func faultClient(t *testing.T, addr string, timeout time.Duration, maxRetries int) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		DialTimeout:           timeout,
		ReadTimeout:           timeout,
		WriteTimeout:          timeout,
		PoolTimeout:           timeout,
		MaxRetries:            maxRetries,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// eventually polls cond until it holds, failing t after within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// outcome is what a test fn returns.
type outcome uint8

const (
	succeed outcome = iota
	failTransient
	failPermanent
)

func (o outcome) err() error {
	switch o {
	case failTransient:
		return errTransient
	case failPermanent:
		return errPermanent
	}
	return nil
}

// execution is one run of fn, as the invariant checks see it.
type execution struct {
	worker int
	job    string
	called time.Time // Do called: its acquire reached Redis no earlier
	// taken is when Redis gave the run the job: its fence, Redis's clock
	// in µs (job_take.lua), on loopback the machine's clock; zero where
	// unknown.
	taken    time.Time
	start    time.Time // fn entered
	end      time.Time // fn returned
	returned time.Time // Do returned: its settle had reached Redis, or never will
	fence    int64
	gated    bool
	wroteAt  time.Time // zero if fn did not write
	wrote    error     // the store's answer
	outcome  outcome
	err      error // what Do returned
	// older is a fence below the run's own that Status showed while fn
	// ran (0: none), olderState the state it showed with it and olderAt
	// when that Status returned (soak_test.go's runChecked).
	older      int64
	olderState gate.State
	olderAt    time.Time
}

// reporter is the part of testing.TB the invariant checks use, so a test
// can feed them bad histories and see them fail.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
}

// span is an operator Reset of a job, from call to return, or a failover
// that may have lost the job's last write.
type span struct {
	job       string
	call, ret time.Time
}

// history records executions and resets from many goroutines.
type history struct {
	mu     sync.Mutex
	execs  []*execution
	resets []span
}

func (h *history) add(e *execution) {
	h.mu.Lock()
	h.execs = append(h.execs, e)
	h.mu.Unlock()
}

func (h *history) reset(s span) {
	h.mu.Lock()
	h.resets = append(h.resets, s)
	h.mu.Unlock()
}

// stats summarises what a check covered, so a run that exercised nothing
// is visible in the log.
type stats struct {
	execs, overlaps, staleRejected int
	// cooldowns and failedMarks count recorded settles whose next call
	// was checked (not excused by a Reset); unrecorded counts failures
	// whose settle did not reach Redis or found the lease lost.
	cooldowns, failedMarks, unrecorded int
	// excused counts early starts explained by a Reset (or a failover
	// registered as one) between the settle and the start; settledLate
	// runs that took the job before a failure's settle was answered.
	excused, settledLate int
	// olderShown counts runs whose Status showed an older run's failure
	// written after their lease ended in Redis (invariant 4).
	olderShown     int
	minCooldownGap time.Duration
}

// check verifies the invariants over every recorded execution:
//
//  1. Executions of one job that overlap in time hold different fences,
//     the newer one acquired only after the older one's lock expired
//     (at least Lease after the older acquire was sent), and the older
//     one's writes after the newer one's first write were rejected.
//     Executions that do not overlap have fences in start order.
//  2. fn never starts while the job cools down or is marked failed: after
//     a settle that recorded a cooldown of r (or a failed mark), the next
//     execution starts at least r (or FailedTTL) after the failed fn
//     returned, unless an operator Reset ran in between. A run that took
//     the job before the failure's settle was answered is not held to
//     it: the failed run's lease may have ended before its settle
//     reached Redis; the runs after it are.
//  3. A transient failure's recorded cooldown is at least
//     Cooldown×(1−Jitter) (capped by MaxCooldown), so with (2) the next
//     call starts no earlier than that (and never before min(cooldown,
//     lease)).
//  4. While fn runs, Status shows no fence below the run's own but an
//     older run's failure written after the run's lease ended in Redis
//     (checkOlder).
func (h *history) check(t reporter, o gate.Options) stats {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	st := stats{execs: len(h.execs), minCooldownGap: -1}
	rejected := map[*execution]bool{}
	byJob := map[string][]*execution{}
	for _, e := range h.execs {
		if !e.gated {
			t.Errorf("%s: fn ran ungated (fail closed expected): %+v", e.job, e)
			continue
		}
		byJob[e.job] = append(byJob[e.job], e)
	}
	for job, es := range byJob {
		sort.Slice(es, func(i, j int) bool { return es[i].start.Before(es[j].start) })
		seen := map[int64]bool{}
		for i, a := range es {
			if seen[a.fence] {
				t.Errorf("%s: fence %d handed out twice", job, a.fence)
			}
			seen[a.fence] = true
			for _, b := range es[i+1:] {
				if !b.start.Before(a.end) { // no overlap
					if b.fence <= a.fence {
						t.Errorf("%s: fence went backwards: %d ran [%v] before %d", job, a.fence, a.end.Sub(b.start), b.fence)
					}
					continue
				}
				st.overlaps++
				older, newer := a, b
				if b.fence < a.fence {
					older, newer = b, a
				}
				if gap := newer.start.Sub(older.called); gap < o.Lease-clockSlack {
					t.Errorf("%s: fence %d started %v after fence %d's acquire, before its lease (%v) could expire", job, newer.fence, gap, older.fence, o.Lease)
				}
				if !older.wroteAt.IsZero() && !newer.wroteAt.IsZero() && older.wroteAt.After(newer.wroteAt) {
					if older.wrote == nil {
						t.Errorf("%s: stale fence %d wrote after fence %d", job, older.fence, newer.fence)
					} else {
						rejected[older] = true
					}
				}
			}
			h.checkBlocked(t, o, a, es[i+1:], &st)
			h.checkOlder(t, o, a, es, &st)
		}
	}
	st.staleRejected = len(rejected)
	return st
}

// checkBlocked checks invariants 2 and 3 for a against the executions of
// its job that started after it.
func (h *history) checkBlocked(t reporter, o gate.Options, a *execution, later []*execution, st *stats) {
	t.Helper()
	var ce *gate.CallError
	if !errors.As(a.err, &ce) {
		return
	}
	if ce.SettleErr != nil {
		st.unrecorded++ // lost lease or Redis unreachable: the lock's TTL decides
		return
	}
	var hold time.Duration
	switch ce.State {
	case gate.CoolingDown:
		hold = ce.RetryAfter
		if floor := min(time.Duration(float64(o.Cooldown)*(1-o.Backoff.Jitter)), o.Backoff.Max); ce.Verdict.Class == classify.ClassTransient && hold < floor-clockSlack {
			t.Errorf("%s: transient failure cooled for %v, below Cooldown×(1−Jitter) = %v", a.job, hold, floor)
		}
	case gate.Failed:
		hold = o.Retention.Failed
	default:
		t.Errorf("%s: failure settled as %v", a.job, ce.State)
		return
	}
	for _, b := range later {
		if b.start.Before(a.end) {
			continue // overlapping: checked by invariant 1
		}
		if !b.taken.IsZero() && b.taken.Before(a.returned) {
			// b took the job before a's settle was answered: a's lease
			// may have ended in Redis before its failure reached it (a
			// process stalled past the lease), so the failure may have
			// been written after b took the job. When b's own outcome
			// then lets a's write through (gate.Lease's settle), the
			// cooldown starts there; the next run is checked against it.
			st.settledLate++
			continue
		}
		gap := b.start.Sub(a.end)
		if h.resetBetween(a.job, a.end, b.start) {
			if gap < hold-clockSlack {
				st.excused++
			}
			return
		}
		if gap < hold-clockSlack {
			t.Errorf("%s: fn (fence %d) started %v after a %v settle that blocked the job for %v\n%s", a.job, b.fence, gap, ce.State, hold, h.timeline(a.job, a.called.Add(-time.Second), b.end.Add(time.Second), a.end))
		}
		if ce.State == gate.Failed {
			st.failedMarks++
			return
		}
		st.cooldowns++
		if st.minCooldownGap < 0 || gap < st.minCooldownGap {
			st.minCooldownGap = gap
		}
		return
	}
}

// checkOlder checks invariant 4 for b, one of its job's executions es.
// Status may show an older fence than b's only once b's lease ended in
// Redis: its key was gone, and job_settle_gone.lua wrote the failure of
// an older run whose lease had ended before (written if nothing holds
// the key, so the next call is not a free retry; a newer run whose lease
// ended too holds nothing). So the Status came at least Lease after b
// took the job (only a renewal makes a lease longer), the fence is that
// of a run whose fn failed, and its settle was answered, or given up on,
// no earlier than b's lease could end. A running older fence, or one
// shown sooner, is a stale owner's write over a live lease.
func (h *history) checkOlder(t reporter, o gate.Options, b *execution, es []*execution, st *stats) {
	t.Helper()
	if b.older == 0 {
		return
	}
	ended := b.taken.Add(o.Lease - clockSlack) // the earliest b's lease ends in Redis
	why := "no older run's failure was settled after it could end"
	switch {
	case b.olderAt.Before(ended):
		why = "the lease still held the key"
	case b.olderState == gate.Running:
		why = "an older lease running"
	default:
		for _, a := range es {
			if a.fence != b.older || a.outcome == succeed {
				continue
			}
			landed := a.returned
			var ce *gate.CallError
			if errors.As(a.err, &ce) && ce.SettleErr != nil {
				if errors.Is(ce.SettleErr, gate.ErrLeaseLost) {
					continue // no settle was sent
				}
				// Given up on, it may still land (see the soak's Reset).
				landed = landed.Add(slack)
			}
			if landed.After(ended) {
				st.olderShown++
				return
			}
		}
	}
	t.Errorf("%s: Status showed %v fence %d below the running lease's %d %v after it took the job: %s\n%s", b.job, b.olderState, b.older, b.fence,
		b.olderAt.Sub(b.taken).Round(time.Millisecond), why, h.timeline(b.job, b.taken.Add(-time.Second), b.end.Add(time.Second), b.taken))
}

func (h *history) resetBetween(job string, from, to time.Time) bool {
	for _, r := range h.resets {
		if r.job == job && r.ret.After(from) && r.call.Before(to) {
			return true
		}
	}
	return false
}

// timeline lists job's executions and resets between from and to, times
// relative to zero, for a failed check's message. A fence is Redis's
// clock when the run took the job (microseconds): on loopback, the same
// clock as the others.
func (h *history) timeline(job string, from, to, zero time.Time) string {
	rel := func(at time.Time) string {
		if at.IsZero() {
			return "-"
		}
		return at.Sub(zero).Round(10 * time.Microsecond).String()
	}
	var b strings.Builder
	for _, e := range h.execs {
		if e.job != job || e.start.Before(from) || e.start.After(to) {
			continue
		}
		fmt.Fprintf(&b, "  run w%d fence %d: called %s taken %s start %s end %s returned %s outcome %d err %v\n", e.worker, e.fence,
			rel(e.called), rel(e.taken), rel(e.start), rel(e.end), rel(e.returned), e.outcome, e.err)
		var ce *gate.CallError
		if errors.As(e.err, &ce) {
			fmt.Fprintf(&b, "    settled %v retry after %v settle error %v\n", ce.State, ce.RetryAfter, ce.SettleErr)
		}
	}
	for _, r := range h.resets {
		if r.job == job && !r.ret.Before(from) && !r.call.After(to) {
			fmt.Fprintf(&b, "  reset: call %s ret %s\n", rel(r.call), rel(r.ret))
		}
	}
	return b.String()
}

// run calls g.Do for job as worker, records the execution in h and writes
// the fence to store at the end of fn (ignoring fn's context, like a
// paused process that wakes up), then returns fn's outcome. inside, if
// set, runs at the start of fn.
func run(ctx context.Context, h *history, store *proof.FenceStore, g *gate.Gate, worker int, job string, hold time.Duration, out outcome, inside func(*gate.Lease, *execution)) error {
	e := &execution{worker: worker, job: job, called: time.Now(), outcome: out}
	ran := false
	err := g.Do(ctx, job, func(fctx context.Context, l *gate.Lease) error {
		ran = true
		e.start, e.fence, e.gated = time.Now(), l.Fence(), l.Gated()
		e.taken = time.UnixMicro(l.Fence())
		if inside != nil {
			inside(l, e)
		}
		if hold > 0 {
			time.Sleep(hold)
		}
		if store != nil {
			e.wroteAt = time.Now()
			e.wrote = store.Write(job, l.Fence(), strconv.Itoa(worker))
		}
		e.end = time.Now()
		return out.err()
	})
	e.err, e.returned = err, time.Now()
	if ran {
		h.add(e)
	}
	return err
}

func formatFence(f int64) string { return strconv.FormatInt(f, 10) }
