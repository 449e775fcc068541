package proof_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/proof"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// Timings of TestSoakPausedRedis. Every command of the gates is bounded by
// pausedTimeout (the client's timeouts and Options.Timeout), and every
// pause lasts at least the lease plus that plus a margin: every lease
// running when a pause starts ends in Redis during it, and every command
// sent into it times out, the settles of the calls in flight too.
const (
	pausedLease   = 150 * time.Millisecond
	pausedTimeout = 100 * time.Millisecond
	pauseMin      = pausedLease + pausedTimeout + 50*time.Millisecond
	pauseSpread   = 150 * time.Millisecond
)

// TestSoakPausedRedis freezes the gate's redis-server past the lease again
// and again (SIGSTOP, SIGCONT) while four gates (as four processes; two
// share a client, two have their own) and a fifth in a process of its own
// (the test binary again, paused_worker_test.go) run calls of a moving
// set of jobs,
// each of which succeeds, with DoneTTL longer than the soak. Calls are in
// flight when a pause starts, so settles are sent into the pause and time
// out. It checks that a success is paid for once (pausedRuns.check):
//
//   - in the process that ran it, no execution of the job starts after
//     it completed its work, whatever Redis took;
//   - in another process, no execution starts whose acquire was sent
//     after the success's Done mark reached Redis (EventSettled Done);
//   - every job that succeeded ends Done in Redis: a success whose settle
//     Redis did not take is written again, even over a lease that ended
//     meanwhile or an acquire whose caller gave up;
//
// and the soak's invariants (history.check), and that every key has a
// TTL. Executions in another process that started after a success but
// were acquired before its mark reached Redis are counted and logged,
// not failed: Redis, the one judge of the lease, saw it end with no
// success recorded and served that acquire first, and no client can
// order it after the holder's write. The acquire reads the success's
// token (Trip.MarkDone) and refuses the job once it is there, but during
// a SIGSTOP go-redis queues only what it sends on connections already
// open (a new one waits for its HELLO reply), so the holder's write is
// often sent only after the resume, as the other processes' acquires are.
// CLIENT PAUSE is not used: it drops the commands of a client that gave
// up before the pause ended, the holder's settle too. Nor is a partition
// in which other processes reach Redis and the holder does not: no client
// can cover it.
func TestSoakPausedRedis(t *testing.T) {
	srv := redistest.Server(t)
	var ev events
	o := gate.Options{
		Lease:     pausedLease,
		Retention: gate.Retention{Done: time.Hour},
		Redis:     gate.RedisPolicy{Timeout: pausedTimeout},
	}
	const (
		procs          = 4
		workersPerProc = 2
		window         = 8 // jobs being run at a time
	)
	shared := faultClient(t, srv.Addr(), pausedTimeout, 0)
	gs := make([]*gate.Gate, procs)
	for i := range gs {
		c := shared
		if i >= 2 {
			c = faultClient(t, srv.Addr(), pausedTimeout, 0)
		}
		o.Observer = &procEvents{proc: i, log: &ev}
		gs[i] = newGate(t, c, o)
		o.Prefix = optionsOf(gs[i]).Prefix
	}

	var (
		h      history
		runs   pausedRuns
		store  proof.FenceStore
		wg     sync.WaitGroup
		first  atomic.Int64 // the oldest job of the window
		pauses atomic.Int64
		paused atomic.Int64 // total ms paused
	)
	// A fifth process, of its own: the test binary again.
	stopWorker := startPausedWorker(t, pausedWorkerConfig{Addr: srv.Addr(), Prefix: o.Prefix, Window: window}, procs, &first, &h, &runs, &ev)
	ctx, stop := context.WithTimeout(context.Background(), soakDuration(t))
	defer stop()

	// Chaos: Redis runs for a while, then is paused past the lease. While
	// it runs, the window of jobs moves on by one every 40 ms; not while it
	// is paused, so a job in flight when a pause starts is still called
	// by every worker for a while after it.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(rand.Uint64(), 7))
		for ctx.Err() == nil {
			for range 3 + rng.IntN(5) {
				select {
				case <-ctx.Done():
					return
				case <-time.After(40 * time.Millisecond):
					first.Add(1)
				}
			}
			d := pauseMin + time.Duration(rng.Int64N(int64(pauseSpread)))
			began := time.Now()
			srv.Pause(d)
			ev.note(-1, began, fmt.Sprintf("SIGSTOP for %v, SIGCONT %v later", d, time.Since(began)), "")
			pauses.Add(1)
			paused.Add(time.Since(began).Milliseconds())
		}
	}()

	for w := range procs * workersPerProc {
		p := w / workersPerProc
		g := gs[p]
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(rand.Uint64(), uint64(w)))
			for ctx.Err() == nil {
				job := "job-" + strconv.FormatInt(first.Load()+rng.Int64N(window), 10)
				hold := time.Duration(rng.IntN(20)) * time.Millisecond
				if rng.IntN(3) == 0 {
					hold = time.Duration(50+rng.IntN(100)) * time.Millisecond // in flight when a pause starts
				}
				runs.run(&h, &store, g, w, p, job, hold)
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	stopWorker()

	st := h.check(t, o)
	pt := runs.check(t, o.Retention.Done, &ev)
	t.Logf("paused soak: %d pauses (%d ms in all), %d executions, %d overlaps; %d successes (%d whose settle was not answered, %d found the lease ended), %d completed after their lease was lost; %d calls refused as done; %d runs in another process acquired before the success's mark reached Redis",
		pauses.Load(), paused.Load(), st.execs, st.overlaps, pt.successes, ev.unwritten.Load(), pt.notOwned, pt.leaseLost, runs.refusedDone.Load(), pt.raced)
	runs.checkDone(t, gs[0], &ev, procs)
	apart := 0
	for _, r := range runs.runs {
		if r.proc == procs {
			apart++
		}
	}
	t.Logf("paused soak: %d executions in the worker process", apart)
	minPauses, minSuccesses := int64(3), 20
	if testing.Short() {
		minPauses, minSuccesses = 1, 5
	}
	if pauses.Load() < minPauses || pt.successes < minSuccesses || ev.unwritten.Load() == 0 || apart == 0 {
		t.Errorf("the soak exercised too little: %d pauses, %d executions in the worker process, %+v", pauses.Load(), apart, pt)
	}
	// A job and a done key per job called, the gate's call durations, and
	// its upstream's budget (what it learned of a provider that sends no
	// rate-limit headers).
	checkAllExpire(t, srv.Client(t), o.Prefix, 2*int(first.Load()+window)+2)
}

// events logs what the gates saw, but refusals, and the pauses, to show
// how a job came to run twice; unwritten counts the successes whose settle
// Redis did not take in time (WarnSettleUnwritten with State Done): kept
// Done in-process.
type events struct {
	mu        sync.Mutex
	lines     []eventLine
	recorded  map[string]time.Time // job and fence: when its Done mark reached Redis
	unwritten atomic.Int64
}

func runKey(job string, fence int64) string { return job + "@" + formatFence(fence) }

// recordedAt returns when the success of job's run with fence reached
// Redis as a Done mark (EventSettled Done), or false.
func (l *events) recordedAt(job string, fence int64) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	at, ok := l.recorded[runKey(job, fence)]
	return at, ok
}

type eventLine struct {
	at   time.Time
	proc int // -1: the chaos
	job  string
	what string
}

func (l *events) note(proc int, at time.Time, what, job string) {
	l.mu.Lock()
	l.lines = append(l.lines, eventLine{at: at, proc: proc, job: job, what: what})
	l.mu.Unlock()
}

// about returns the log of job and of the chaos from from on, one line each.
func (l *events) about(job string, from, to time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	sort.SliceStable(l.lines, func(i, j int) bool { return l.lines[i].at.Before(l.lines[j].at) })
	out := ""
	for _, e := range l.lines {
		if (e.job == job || e.proc < 0) && !e.at.Before(from) && !e.at.After(to) {
			out += fmt.Sprintf("\n    %+8.1fms p%d %s", float64(e.at.Sub(from).Microseconds())/1000, e.proc, e.what)
		}
	}
	return out
}

// procEvents is one gate's observer.
type procEvents struct {
	proc int
	log  *events
}

func (p *procEvents) Observe(_ context.Context, e gate.Event) {
	if e.Kind == gate.EventRefused {
		return
	}
	now := time.Now()
	if e.Kind == gate.EventWarning && e.Reason == gate.WarnSettleUnwritten && e.State == gate.Done {
		p.log.unwritten.Add(1)
	}
	if e.Kind == gate.EventSettled && e.State == gate.Done && e.Err == nil {
		p.log.mu.Lock()
		if p.log.recorded == nil {
			p.log.recorded = map[string]time.Time{}
		}
		p.log.recorded[runKey(e.Job, e.Fence)] = now
		p.log.mu.Unlock()
	}
	p.log.note(p.proc, now, fmt.Sprintf("%v %v fence %d %s %s err=%v", e.Kind, e.State, e.Fence, e.Op, e.Reason, e.Err), e.Job)
}

// pausedRun is one execution in TestSoakPausedRedis: which process (gate)
// ran it, whether fn completed its work (not cancelled), and what Do said.
type pausedRun struct {
	e         *execution
	proc      int
	completed bool
	err       error
}

type pausedRuns struct {
	mu          sync.Mutex
	runs        []*pausedRun
	refusedDone atomic.Int64
}

// run calls g.Do for job; fn holds the job for hold, as a call to a model
// that honours its context does (cancelled: its work is not done), writes
// its fence to store and succeeds.
func (rs *pausedRuns) run(h *history, store *proof.FenceStore, g *gate.Gate, worker, proc int, job string, hold time.Duration) {
	e := &execution{worker: worker, job: job, called: time.Now(), outcome: succeed}
	r := &pausedRun{e: e, proc: proc}
	ran := false
	err := g.Do(context.Background(), job, func(fctx context.Context, l *gate.Lease) error {
		ran = true
		e.start, e.fence, e.gated = time.Now(), l.Fence(), l.Gated()
		select {
		case <-fctx.Done():
			e.end = time.Now()
			return context.Cause(fctx)
		case <-time.After(hold):
		}
		e.wroteAt = time.Now()
		e.wrote = store.Write(job, l.Fence(), strconv.Itoa(worker))
		e.end = time.Now()
		r.completed = true
		return nil
	})
	if errors.Is(err, gate.ErrDone) {
		rs.refusedDone.Add(1)
	}
	if !ran {
		return
	}
	e.err, r.err = err, err
	h.add(e)
	rs.mu.Lock()
	rs.runs = append(rs.runs, r)
	rs.mu.Unlock()
}

// pausedStats is what pausedRuns.check covered.
type pausedStats struct {
	// successes: executions whose fn completed and whose lease the gate
	// did not know lost when it did; notOwned: of them, those Do
	// answered ErrNotOwned (the lease had ended in Redis before the
	// settle). leaseLost: executions whose fn completed after the gate
	// found the lease lost (Do: ErrLeaseLost, nothing settled: the caller
	// is told the job may run again), not judged.
	successes, notOwned, leaseLost int
	// inProcess and crossProcess count executions that started after a
	// success of their job, in the process that succeeded, and in another
	// with an acquire sent after the success's Done mark reached Redis:
	// both fail the check. raced counts those in another process acquired
	// before it.
	inProcess, crossProcess, raced int
}

// check verifies that a success is paid for once: after an execution of a
// job completed its work (fn returned nil; Do answered nil or ErrNotOwned,
// not ErrLeaseLost, which tells the caller it may run again), within
// doneTTL, no execution of the job starts in the same process, nor in
// another with an acquire sent after the success's Done mark reached
// Redis (log.recordedAt). It fails t with the re-runs counted in-process
// and cross-process, and the log of the first ones.
func (rs *pausedRuns) check(t reporter, doneTTL time.Duration, log *events) pausedStats {
	t.Helper()
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var st pausedStats
	byJob := map[string][]*pausedRun{}
	for _, r := range rs.runs {
		byJob[r.e.job] = append(byJob[r.e.job], r)
		if errors.Is(r.err, gate.ErrLeaseLost) && r.completed {
			r.completed = false
			st.leaseLost++
		}
		if !r.completed {
			continue
		}
		st.successes++
		switch {
		case errors.Is(r.err, gate.ErrNotOwned):
			st.notOwned++
		case r.err != nil:
			t.Errorf("%s: a success answered %v", r.e.job, r.err)
		}
	}
	var msgs []string
	for _, runs := range byJob {
		sort.Slice(runs, func(i, j int) bool { return runs[i].e.start.Before(runs[j].e.start) })
		for i, a := range runs {
			if !a.completed {
				continue
			}
			recorded, ok := log.recordedAt(a.e.job, a.e.fence)
			for _, b := range runs[i+1:] {
				if b.e.start.Before(a.e.end) || b.e.start.Sub(a.e.end) >= doneTTL {
					continue // overlapping: invariant 1 judges it
				}
				where := "another process"
				switch {
				case b.proc == a.proc:
					where = "the same process"
					st.inProcess++
				case ok && b.e.called.After(recorded):
					st.crossProcess++
				default:
					st.raced++
					continue
				}
				msg := fmt.Sprintf("%s: fence %d started %v after fence %d succeeded (Do: %v), in %s",
					a.e.job, b.e.fence, b.e.start.Sub(a.e.end), a.e.fence, a.err, where)
				if len(msgs) < 3 {
					msg += log.about(a.e.job, a.e.called.Add(-pausedLease), b.e.end)
				}
				msgs = append(msgs, msg)
			}
			break // later successes are judged against this first one
		}
	}
	if len(msgs) > 0 {
		sort.Strings(msgs)
		t.Errorf("a success paid for twice: %d re-runs in the same process, %d in another after its mark reached Redis:\n%s",
			st.inProcess, st.crossProcess, strings.Join(msgs, "\n"))
	}
	return st
}

// checkDone polls until every job that succeeded is Done in Redis, as g
// reads it: a success whose settle Redis did not take is written again
// (backing off to a second between tries). Except in the process that has
// ended (exited, the worker process): its copy of an unwritten success
// lived in its memory and ended with it, so a success there whose Done
// mark had not reached Redis is logged, not checked.
func (rs *pausedRuns) checkDone(t *testing.T, g *gate.Gate, ev *events, exited int) {
	t.Helper()
	rs.mu.Lock()
	jobs := map[string]bool{}
	dropped := 0
	for _, r := range rs.runs {
		if !r.completed {
			continue
		}
		if _, ok := ev.recordedAt(r.e.job, r.e.fence); r.proc == exited && !ok {
			dropped++
			continue
		}
		jobs[r.e.job] = true
	}
	rs.mu.Unlock()
	if dropped > 0 {
		t.Logf("%d successes of the ended worker process were unwritten when it exited (kept in its memory only)", dropped)
	}
	deadline := time.Now().Add(5*time.Second + slack)
	for job := range jobs {
		for {
			st, err := g.Status(context.Background(), job)
			if err == nil && st.State == gate.Done {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s succeeded but is %v in Redis (%v), not done", job, st.State, err)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// TestPausedChecksCatchReruns feeds pausedRuns.check histories with and
// without a success paid for twice, so the paused soak can fail.
func TestPausedChecksCatchReruns(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ex := func(proc int, called, start, end int, fence int64, completed bool, err error) *pausedRun {
		e := &execution{job: "j", called: at(called), start: at(start), end: at(end), fence: fence, gated: true}
		return &pausedRun{e: e, proc: proc, completed: completed, err: err}
	}
	recorded := func(ms int) *events {
		return &events{recorded: map[string]time.Time{runKey("j", 1): at(ms)}}
	}
	for _, tc := range []struct {
		name string
		runs []*pausedRun
		log  *events
		bad  bool
	}{
		{"once", []*pausedRun{ex(0, 0, 1, 10, 1, true, nil)}, recorded(12), false},
		{"again in the same process", []*pausedRun{ex(0, 0, 1, 10, 1, true, nil), ex(0, 20, 21, 30, 2, true, nil)}, recorded(12), true},
		{"again in the same process, unrecorded", []*pausedRun{ex(0, 0, 1, 10, 1, true, nil), ex(0, 20, 21, 30, 2, true, nil)}, &events{}, true},
		{"again elsewhere after the mark", []*pausedRun{ex(0, 0, 1, 10, 1, true, nil), ex(1, 20, 21, 30, 2, true, nil)}, recorded(12), true},
		{"again elsewhere, acquired before the mark", []*pausedRun{ex(0, 0, 1, 10, 1, true, nil), ex(1, 11, 21, 30, 2, true, nil)}, recorded(12), false},
		{"again after ErrNotOwned", []*pausedRun{ex(0, 0, 1, 10, 1, true, gate.ErrNotOwned), ex(0, 20, 21, 30, 2, true, nil)}, &events{}, true},
		{"again after ErrLeaseLost", []*pausedRun{ex(0, 0, 1, 10, 1, true, gate.ErrLeaseLost), ex(0, 20, 21, 30, 2, true, nil)}, &events{}, false},
		{"again after a cancelled run", []*pausedRun{ex(0, 0, 1, 10, 1, false, gate.ErrLeaseLost), ex(0, 20, 21, 30, 2, true, nil)}, &events{}, false},
		{"overlapping", []*pausedRun{ex(0, 0, 1, 10, 1, true, nil), ex(1, 2, 5, 30, 2, true, nil)}, recorded(12), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recordingT{}
			rs := &pausedRuns{runs: tc.runs}
			rs.check(rec, time.Hour, tc.log)
			if rec.failed != tc.bad {
				t.Fatalf("check reported a violation: %v, want %v (%v)", rec.failed, tc.bad, rec.msgs)
			}
		})
	}
}
