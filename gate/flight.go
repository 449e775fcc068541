package gate

import (
	"context"
	"errors"
	"sync"
	"time"
)

// What this process knows of its jobs beyond Redis: the calls in flight
// (flight), and the outcomes Redis did not take (unwritten). Both answer a
// call before it reaches Redis.

// flight merges the calls of one job in one process, as singleflight does.
// While one call's acquire is in flight, the others wait for its answer.
// They do not ask Redis themselves. While its lease is held, they are
// refused in-process (ErrInFlight). The pending record lives from the
// acquire until the lease settles, or until the acquire is refused.
type flight struct {
	mu sync.Mutex
	m  map[string]*pending
}

// pending is one job's acquire in this process and, once taken, its lease.
// Its fields are guarded by flight.mu.
type pending struct {
	resolved bool
	done     chan struct{} // closed when resolved; made by the first follower
	lease    *Lease        // the lease it took, nil when refused
	err      error         // its refusal or error
}

// lead returns once this call leads the job's acquire in this process:
// p, which it must resolve. Until then it follows the calls in flight
// (follow; fresh and retryIn are follow's); with p nil, err is the answer
// one of them gave, or ctx's end.
func (f *flight) lead(ctx context.Context, job string, fresh bool, retryIn func(refuser) time.Duration) (p *pending, err error) {
	for {
		if ctx.Err() != nil {
			return nil, ctxError(ctx, "acquire")
		}
		p, leader := f.join(job)
		if leader {
			return p, nil
		}
		if err, again := f.follow(ctx, p, fresh, retryIn); !again {
			return nil, err
		}
	}
}

// join returns the job's pending record. leader is set when the caller
// made it and must resolve it.
func (f *flight) join(job string) (p *pending, leader bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.m[job]; p != nil {
		return p, false
	}
	if f.m == nil {
		f.m = make(map[string]*pending)
	}
	p = &pending{}
	f.m[job] = p
	return p, true
}

// resolve gives the acquire's answer to the calls waiting on p. A refused
// or failed acquire ends the record. A taken lease keeps it until forget.
func (f *flight) resolve(job string, p *pending, l *Lease, err error) {
	f.mu.Lock()
	p.resolved, p.lease, p.err = true, l, err
	if l == nil && f.m[job] == p {
		delete(f.m, job)
	}
	if p.done != nil {
		close(p.done)
	}
	f.mu.Unlock()
}

// wait returns once p is resolved, or ctx ends (false).
func (f *flight) wait(ctx context.Context, p *pending) bool {
	f.mu.Lock()
	if p.resolved {
		f.mu.Unlock()
		return true
	}
	if p.done == nil {
		p.done = make(chan struct{})
	}
	done := p.done
	f.mu.Unlock()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		return false
	}
}

// forget ends the record of l's job once l settled.
func (f *flight) forget(l *Lease) {
	f.mu.Lock()
	if p := f.m[l.job]; p != nil && p.lease == l {
		delete(f.m, l.job)
	}
	f.mu.Unlock()
}

// follow answers a call merged behind p: the same refusal, or ErrInFlight
// while p's lease runs. retryIn is the gate's: the wait a refusal carries.
// again is set when the caller must ask Redis itself:
//   - p's acquire failed for its own reasons (its caller gave up, Redis
//     erred);
//   - or fresh is set and p's refusal may predate what the caller waits
//     for (a waiter woken by a settle must read after it).
func (f *flight) follow(ctx context.Context, p *pending, fresh bool, retryIn func(refuser) time.Duration) (err error, again bool) {
	if !f.wait(ctx, p) {
		return ctxError(ctx, "acquire"), false
	}
	f.mu.Lock()
	l, perr := p.lease, p.err
	f.mu.Unlock()
	var b *BlockedError
	switch {
	case l != nil:
		return &BlockedError{Job: l.job, State: Running, Attempts: l.attempt - 1,
			RetryAfter: retryIn(refuser{state: Running, left: l.remaining(), ran: l.elapsed(), runner: l.recorded()}), token: l.token.Token, lease: l.remaining(), local: true}, false
	case fresh:
		return nil, true
	case errors.As(perr, &b):
		cp := *b
		cp.local = true
		return &cp, false
	}
	return nil, true
}

// unwritten holds the outcomes this process could not write to Redis
// (WarnSettleUnwritten). Redis never stored them. So the process that ran
// the job refuses it in-process until the intended cooldown, failed or
// done mark ends. No retry through that process runs early. Other
// processes see the lease's TTL. A success is written again meanwhile
// (unwritten.go). It holds at most maxUnwritten jobs.
type unwritten struct {
	mu sync.Mutex
	m  map[string]*unwrittenOutcome
}

type unwrittenOutcome struct {
	until time.Time
	b     BlockedError
}

const maxUnwritten = 4096

// add remembers b for ttl and returns its entry. b is the refusal an
// outcome Redis did not take stands for. current tells whether the entry
// is still job's.
func (u *unwritten) add(b BlockedError, ttl time.Duration) *unwrittenOutcome {
	job := b.Job
	f := &unwrittenOutcome{until: time.Now().Add(ttl), b: b}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m == nil {
		u.m = make(map[string]*unwrittenOutcome)
	}
	if len(u.m) >= maxUnwritten {
		now := time.Now()
		for k, v := range u.m {
			if !now.Before(v.until) {
				delete(u.m, k)
			}
		}
		for k := range u.m { // still full: drop a quarter
			if len(u.m) <= maxUnwritten*3/4 {
				break
			}
			delete(u.m, k)
		}
	}
	u.m[job] = f
	return f
}

// current reports whether f is still job's entry. When drop is set, it
// drops f, and the job's value in Redis rules again.
func (u *unwritten) current(job string, f *unwrittenOutcome, drop bool) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.m[job] != f {
		return false
	}
	if drop {
		delete(u.m, job)
	}
	return true
}

// refusal returns the refusal of a job whose outcome Redis did not take,
// while it lasts, and how long it lasts.
func (u *unwritten) refusal(job string) (*BlockedError, time.Duration) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f, ok := u.m[job]
	if !ok {
		return nil, 0
	}
	left := time.Until(f.until)
	if left < time.Millisecond {
		delete(u.m, job)
		return nil, 0
	}
	b := f.b
	return &b, left
}

// drop forgets job's unwritten outcome (an operator reset the job).
func (u *unwritten) drop(job string) {
	u.mu.Lock()
	delete(u.m, job)
	u.mu.Unlock()
}
