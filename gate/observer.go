package gate

import (
	"context"
	"time"

	"github.com/retrygate/retrygate/classify"
)

// EventKind names what happened.
type EventKind uint8

const (
	// EventAcquired: a lease was granted (Fence, Attempt set).
	EventAcquired EventKind = iota + 1
	// EventRefused: a call was refused; State says why (Running, CoolingDown,
	// Failed, Done, UpstreamCooling), Cooldown holds the wait left. Local is
	// set when the refusal came from in-process coalescing, without Redis.
	EventRefused
	// EventSucceeded: fn succeeded and the lock was released (or held Done).
	EventSucceeded
	// EventCooledDown: a failure put the job into cooldown for Cooldown.
	EventCooledDown
	// EventMarkedFailed: a failure marked the job Failed.
	EventMarkedFailed
	// EventReleased: the lock was released with no cooldown (the caller
	// cancelled, or Lease.Release).
	EventReleased
	// EventRenewed: the lease was extended.
	EventRenewed
	// EventRenewFailed: a renewal could not reach Redis (Err set).
	EventRenewFailed
	// EventLeaseLost: the lease expired or was taken over while fn ran.
	EventLeaseLost
	// EventNotOwned: a settle found the lock owned by someone else; nothing
	// was written ("lock not owned").
	EventNotOwned
	// EventRedisError: a Redis operation failed (Err set, Op names it).
	EventRedisError
	// EventFailOpen: Redis was unreachable and fn ran ungated (FailOpen).
	EventFailOpen
	// EventScopeCooling: a provider-wide failure cooled the upstream scope
	// for Cooldown.
	EventScopeCooling
	// EventScopePaused: a systemic failure paused the upstream scope; an
	// operator must act (loud).
	EventScopePaused
	// EventConfigWarning: a configuration problem found by Gate.Check
	// (Reason says which).
	EventConfigWarning
)

var eventNames = [...]string{"", "acquired", "refused", "succeeded", "cooled_down", "marked_failed",
	"released", "renewed", "renew_failed", "lease_lost", "not_owned", "redis_error", "fail_open",
	"scope_cooling", "scope_paused", "config_warning"}

// String returns the snake_case name, suitable as a metric label.
func (k EventKind) String() string {
	if int(k) < len(eventNames) && k > 0 {
		return eventNames[k]
	}
	return "unknown"
}

// Event is one thing that happened in a gate. Fields that do not apply to
// the kind are zero. Job is the caller's job key: adapters must not use it
// as a metric label (unbounded cardinality).
type Event struct {
	Kind  EventKind
	Job   string
	Scope string
	// State is the job's state the event led to or was refused by.
	State State
	Fence int64
	// Attempt is the attempt number of the call, or the failure count.
	Attempt int
	Class   classify.Class
	Reason  string
	// Held is how long the lock was held. It is set once per lease: on the
	// event of its settle (succeeded, cooled_down, marked_failed, released,
	// not_owned), or on lease_lost when the Fence policy skips the settle.
	Held time.Duration
	// Cooldown is the cooldown set, or the wait left on a refusal.
	Cooldown time.Duration
	// Local marks refusals decided in-process, without a Redis round trip.
	Local bool
	// Op names the Redis operation of EventRedisError ("acquire", "settle", ...).
	Op  string
	Err error
}

// Observer receives events. Observe is called synchronously on the calling
// goroutine (renewal events on the renewal timer's), so it must be fast and
// safe for concurrent use.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(ctx context.Context, e Event)

// Observe calls f.
func (f ObserverFunc) Observe(ctx context.Context, e Event) { f(ctx, e) }

// Observers fans events out to several observers, skipping nil ones.
func Observers(obs ...Observer) Observer {
	var list multiObserver
	for _, o := range obs {
		if o != nil {
			list = append(list, o)
		}
	}
	return list
}

type multiObserver []Observer

func (m multiObserver) Observe(ctx context.Context, e Event) {
	for _, o := range m {
		o.Observe(ctx, e)
	}
}

// emit sends e to the observer, if any. Callers check g.obs != nil first on
// hot paths so building the Event costs nothing without an observer.
func (g *Gate) emit(ctx context.Context, e Event) {
	if g.obs != nil {
		e.Scope = g.opts.Scope
		g.obs.Observe(ctx, e)
	}
}
