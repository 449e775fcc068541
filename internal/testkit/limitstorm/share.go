package limitstorm

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
)

// errorPause is how long a job waits after an error that states no wait
// (Redis unreachable, say) before it tries again; such errors are counted.
const errorPause = 100 * time.Millisecond

// Outcome is how a storm's jobs ended (in one process, or through a
// Config.Through).
type Outcome struct {
	Completed, Failed, Lost int
	// Stale counts calls whose lease was gone when they ended (ErrNotOwned,
	// ErrLeaseLost: the process stalled past the lease, or another owner
	// took the job): the job ran again, as a queue would run it. A
	// Config.Through leaves it 0: its queue runs such a job again itself,
	// and Result.Served less Completed counts them.
	Stale int
	// Errors counts other refusals that stated no wait and were not
	// ErrFailed; FirstError is the first one's text.
	Errors     int
	FirstError string
	// Last is the last completion.
	Last time.Time
	// Tokens is what the jobs served counted against the token limit, each
	// job once; Run fills it from Storm.Call.
	Tokens int64
	// Trips counts the Gates' Redis round trips: one per command, one per
	// pipeline, one per node a cluster's pipeline reaches.
	Trips int64
	// Admissions are the completed jobs' admissions (their call's start),
	// one per job.
	Admissions []Admission
	// Late counts the calls answered (admitted or refused) more than
	// lateSlack after their wait (gate.Options.Wait) ended, beyond how
	// late the process's own timers were then (Late.Excess); Latest is
	// the largest such excess.
	Late   int
	Latest time.Duration
	// Lates are the calls answered more than canaryPeriod past their
	// wait, judged or not; Canary is the latest wake-up of the processes'
	// canaries, of CanaryWakes.
	Lates       []Late
	Canary      time.Duration
	CanaryWakes int
	// Expired counts the calls refused once their whole wait passed: a
	// caller in line whose turn never came.
	Expired int
	// ExpiredAt are those calls' times, asked and answered, from the
	// storm's start.
	ExpiredAt [][2]time.Duration
	// Retried counts the refusals a job came back after, at the wait
	// they stated.
	Retried int

	killed int // jobs of a worker killed (Run's, not a worker's)
}

// Admission is a completed job's admission.
type Admission struct {
	Part int
	// Arrived and At are when the job arrived and when its call that
	// completed it started, from the storm's start.
	Arrived, At time.Duration
}

// lateSlack is how long after its wait ends, beyond how late its
// process's own timers were then (the canary, late.go), a call's answer
// may come: the goroutines that carry the answer and start the call wait
// for a CPU after the timer's. It still rules out an answer held for a
// Redis round trip's timeout (1 s), for a later turn, or delayed 0.5 s
// in the gate (a hack in AcquireWait: 42 and 60 calls of
// TestStormLineClasses's two storms failed it, up to 0.51 s beyond the
// canary).
const lateSlack = 250 * time.Millisecond

func (o *Outcome) add(p Outcome) {
	o.Completed += p.Completed
	o.Failed += p.Failed
	o.Lost += p.Lost
	o.Stale += p.Stale
	o.Errors += p.Errors
	o.Tokens += p.Tokens
	o.Trips += p.Trips
	o.Admissions = append(o.Admissions, p.Admissions...)
	o.Late += p.Late
	o.Expired += p.Expired
	o.ExpiredAt = append(o.ExpiredAt, p.ExpiredAt...)
	o.Retried += p.Retried
	o.Latest = max(o.Latest, p.Latest)
	o.Lates = append(o.Lates, p.Lates...)
	o.Canary = max(o.Canary, p.Canary)
	o.CanaryWakes += p.CanaryWakes
	if o.FirstError == "" {
		o.FirstError = p.FirstError
	}
	if p.Last.After(o.Last) {
		o.Last = p.Last
	}
}

// share is one process's part of a storm: its Gates, each with a Redis
// client of its own, and their jobs.
type share struct {
	c       Config
	storm   *Storm
	gates   map[int]*gate.Gate
	closers []func() error

	mu    sync.Mutex
	out   Outcome
	trips tripCounter

	// With a wait: the gates' answering events, and the calls answered
	// past their deadline, judged once the canary has seen their time.
	events *answerEvents
	late   []pendingLate
}

// pendingLate is a call answered past its deadline, before the canary's
// lateness then is known.
type pendingLate struct {
	Late
	asked, deadline, answered time.Time
}

// newShare builds the Gates process proc runs, calling the provider at url.
func newShare(c Config, url string, proc int) (*share, error) {
	s := &share{c: c, storm: newStorm(c, url), gates: map[int]*gate.Gate{}}
	s.closers = append(s.closers, func() error { s.storm.close(); return nil })
	opts := c.Gate
	if opts.Wait > 0 {
		s.events = &answerEvents{next: opts.Observer}
		opts.Observer = s.events
	}
	for k := range c.Gates {
		if k%c.procs() != proc {
			continue
		}
		rdb := newRedis(c.Redis, &s.trips)
		s.closers = append(s.closers, rdb.Close)
		g, err := gate.New(rdb, opts)
		if err != nil {
			s.close()
			return nil, err
		}
		s.gates[k] = g
	}
	return s, nil
}

func newRedis(r Redis, trips *tripCounter) redis.UniversalClient {
	if r.Cluster {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: r.Addrs,
			NewClient: func(o *redis.Options) *redis.Client {
				n := redis.NewClient(o)
				n.AddHook(trips) // per node: a pipeline over two nodes is two trips
				return n
			}})
	}
	c := redis.NewClient(&redis.Options{Addr: r.Addrs[0]})
	c.AddHook(trips)
	return c
}

// tripCounter is a go-redis hook that counts round trips: one per
// command, one per pipeline (as bench's).
type tripCounter struct{ n atomic.Int64 }

func (c *tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

func (s *share) close() {
	for _, f := range s.closers {
		_ = f()
	}
}

// run runs this process's jobs, arriving after start, until each
// completed, failed, or was lost at the end of the drain. Job j runs on
// Gate j mod Gates.
func (s *share) run(ctx context.Context, start time.Time) Outcome {
	s.storm.begin(s.c, start)
	var cn *canary
	if s.c.Gate.Wait > 0 { // only calls that wait are judged late
		cn = startCanary()
	}
	var wg sync.WaitGroup
	for _, j := range s.storm.Jobs {
		g, ok := s.gates[j.ID%s.c.Gates]
		if !ok {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.job(ctx, j, g)
		}()
	}
	wg.Wait()
	if cn != nil {
		// The canary's wake-ups after the last answer count for it too.
		sleep(ctx, 2*canaryPeriod)
		cn.stopCanary()
		s.judgeLate(cn)
	}
	s.out.Tokens = s.storm.tokens.Load()
	s.out.Trips = s.trips.n.Load()
	return s.out
}

// job runs one job: it arrives, calls through its Gate, and retries when
// gate.RetryAfter says, until it completes, fails, or would wait past the
// end of the drain.
func (s *share) job(ctx context.Context, j Job, g *gate.Gate) {
	if !sleep(ctx, time.Until(s.storm.Start.Add(j.At))) {
		s.note(func(o *Outcome) { o.Lost++ })
		return
	}
	for {
		// With DeclareTokens, the call's tokens as the provider counts
		// them, so the upstream reserves them with the call
		// (gate.WithTokens); else the default wiring, which says nothing.
		cctx := ctx
		if s.c.DeclareTokens {
			cctx = gate.WithTokens(ctx, j.tokens(s.storm.dialect))
		}
		if len(s.c.Parts) > 0 {
			p := s.c.Parts[j.Part]
			cctx = gate.WithTenant(gate.WithPriority(cctx, p.Priority), p.Tenant, 1)
		}
		asked := time.Now()
		var admitted time.Time
		err := g.Do(cctx, j.Key(), func(ctx context.Context, _ *gate.Lease) error {
			admitted = time.Now()
			return s.storm.Call(ctx, j.ID)
		})
		answered := admitted
		if answered.IsZero() {
			answered = time.Now()
		}
		if past := answered.Sub(asked.Add(s.c.Gate.Wait)); s.c.Gate.Wait > 0 && past > canaryPeriod {
			s.lateAnswer(j, asked, answered, err == nil)
		}
		if err != nil && s.c.Gate.Wait > 0 && answered.Sub(asked) >= s.c.Gate.Wait*19/20 {
			s.note(func(o *Outcome) {
				o.Expired++
				o.ExpiredAt = append(o.ExpiredAt, [2]time.Duration{asked.Sub(s.storm.Start), answered.Sub(s.storm.Start)})
			})
		}
		wait, ok := gate.RetryAfter(err)
		switch {
		case err == nil:
			now := time.Now()
			s.note(func(o *Outcome) {
				o.Completed++
				if now.After(o.Last) {
					o.Last = now
				}
				o.Admissions = append(o.Admissions, Admission{Part: j.Part, Arrived: j.At, At: admitted.Sub(s.storm.Start)})
			})
			return
		case errors.Is(err, gate.ErrFailed):
			s.note(func(o *Outcome) { o.Failed++ })
			return
		case errors.Is(err, gate.ErrNotOwned) || errors.Is(err, gate.ErrLeaseLost):
			s.note(func(o *Outcome) { o.Stale++ })
			wait = 0
		case ok:
			s.note(func(o *Outcome) { o.Retried++ })
		case !ok:
			s.note(func(o *Outcome) {
				o.Errors++
				if o.FirstError == "" {
					o.FirstError = err.Error()
				}
			})
			wait = errorPause
		}
		if time.Now().Add(wait).After(s.storm.End) || !sleep(ctx, wait) {
			s.note(func(o *Outcome) { o.Lost++ })
			return
		}
	}
}

func (s *share) note(f func(*Outcome)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.out)
}

// sleep waits d; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
