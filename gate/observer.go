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
	// EventRefused: a call was refused. State says why (Running,
	// CoolingDown, Failed, Done, UpstreamCooling). Cooldown holds the wait
	// left. Local is set when the refusal was decided in-process, without
	// Redis.
	EventRefused
	// EventSettled: a lease's outcome was recorded. State is what it led
	// to:
	//   - Ready or Done after a success (Reason empty);
	//   - Ready after a release (Reason set, e.g. "canceled"), or
	//     CoolingDown after a cancelled call with Backoff.Canceled;
	//   - CoolingDown (Cooldown set) or Failed after a failure (Class,
	//     Reason);
	//   - Ready after a provider-wide failure while another upstream is
	//     ready (Class and Reason set).
	//
	// Err is ErrNotOwned when the lock had passed to someone else and
	// nothing was written. State is then the state found at the key. Held
	// is how long the lock was held.
	EventSettled
	// EventRenewed: a renewal extended the lease, or failed to reach
	// Redis (Err set).
	EventRenewed
	// EventLeaseLost: the lease expired or was taken over while fn ran.
	// Unless Redis.ContinueOnLeaseLost, no settle follows. Held is then
	// set here.
	EventLeaseLost
	// EventRedisError: a Redis operation the gate ran failed. Err is set.
	// Op names the operation: "acquire", "settle", "renew", "undo" or
	// "upstream" (an upstream's breaker).
	EventRedisError
	// EventFailOpen: Redis was unreachable and fn ran ungated (Redis.FailOpen).
	EventFailOpen
	// EventUpstreamCooling: a provider-wide failure cooled the upstream
	// for Cooldown.
	EventUpstreamCooling
	// EventUpstreamPaused: a systemic failure (credentials, quota) paused
	// the upstream (loud). One call probes it after each pause. The first
	// pause is UpstreamPolicy.Cooldown, and pauses grow to PauseTTL. This
	// goes on until the cause is fixed or an operator resets it.
	EventUpstreamPaused
	// EventWarning: something an operator must look at (loud). Reason says
	// what, as a Warn* constant.
	EventWarning
)

// eventNames are the kinds' metric labels.
var eventNames = [...]string{"", "acquired", "refused", "settled", "renewed", "lease_lost",
	"redis_error", "fail_open", "upstream_cooling", "upstream_paused", "warning"}

// String returns the snake_case name, suitable as a metric label.
func (k EventKind) String() string {
	if int(k) < len(eventNames) && k > 0 {
		return eventNames[k]
	}
	return "unknown"
}

// Event is one thing that happened in a gate. Fields that do not apply to
// the kind are zero. Job is the caller's job key. Adapters must not use it
// as a metric label: its cardinality is unbounded.
type Event struct {
	Kind EventKind
	Job  string
	// Upstream is the upstream the event concerns: the one a lease ran
	// on, or the one a failure cooled. It is the gate's Options.Upstream
	// when no single upstream is concerned (a refusal, a Redis error on
	// the job).
	Upstream string
	// State is the job's state the event led to or was refused by.
	State State
	Fence int64
	// Attempt is the attempt number of the call.
	Attempt int
	Class   classify.Class
	Reason  string
	// Held is how long the lock was held (EventSettled, EventLeaseLost).
	Held time.Duration
	// Cooldown is the cooldown set, or the wait left on a refusal.
	Cooldown time.Duration
	// Local marks refusals decided in-process, without a Redis round trip.
	Local bool
	// Shadow marks every event of a shadow gate (Options.Shadow). Its
	// EventRefused is a call that would have been refused, and ran.
	Shadow bool
	// Op names the Redis operation of EventRedisError.
	Op  string
	Err error
	// Budget is, for EventAcquired, what the upstream's budget had left
	// after admitting the call. For EventRefused by an upstream, it is
	// that upstream's budget (Spent when its budget refused). It is zero
	// when the upstream has no budget. Limits and resets are not known
	// here: Upstreams reads them.
	Budget UpstreamBudget
	// Priority and Tenant are the call's class and tenant (WithPriority,
	// WithTenant) on EventAcquired and EventRefused.
	Priority Priority
	Tenant   string
	// Waited is, on EventAcquired and EventRefused, the time the call spent
	// in its upstream's line before the acquire or refusal. 0 if it never
	// waited.
	Waited time.Duration
}

// Observer receives events. Observe is called synchronously on the calling
// goroutine. Renewal events come on the renewal timer's goroutine. So
// Observe must be fast and safe for concurrent use. A panic in Observe is
// not recovered: on a door's goroutine it reaches that door's caller (the
// lease taken before an EventAcquired that panics is given back); on the
// renewal timer's, it ends the program.
type Observer interface {
	Observe(ctx context.Context, e Event)
}

// Warning reasons: the Reason of an EventWarning, and of a Warning Check
// reports.
const (
	// WarnEvictionPolicy: the server's maxmemory-policy may evict keys
	// with a TTL (volatile-*, allkeys-*). A cooldown or a failed mark can
	// then vanish early under memory pressure. The job runs again too
	// soon. Set maxmemory-policy to noeviction for the gate's Redis.
	WarnEvictionPolicy = "maxmemory_policy_evicts"
	// WarnUnchecked: the policy could not be read. CONFIG may be disabled
	// or renamed, as on many managed services. An ACL permission may be
	// missing. Or Check cannot inspect the client's type. Ask the provider
	// which policy it uses.
	WarnUnchecked = "config_unchecked"
	// WarnNoPersistence: the server persists nothing (appendonly no and no
	// save schedule). A restart forgets every cooldown, failed and done
	// mark. Those jobs run again. Set appendonly yes with appendfsync
	// everysec, or an RDB save schedule. Where CONFIG is refused, Check
	// reads INFO persistence. A server that refuses both is not warned
	// about.
	WarnNoPersistence = "no_persistence"
	// WarnServerVersion: the server implements a Redis older than 7.0
	// (Redis, KeyDB 6). It refuses the acquire's SET NX GET. Every call
	// fails closed with ErrRedisRefused. Use Redis 7.0 or later, or Valkey.
	WarnServerVersion = "server_version"
	// WarnMultiMaster: the server takes writes beside another master
	// (KeyDB's active-replica or multi-master). The last write wins. So two
	// processes can take the same job on two nodes. Turn it off and point
	// every gate at one master.
	WarnMultiMaster = "multi_master"
	// WarnScriptsNotAtomic: the server runs the gate's scripts
	// non-atomically, or not at all. Two servers do:
	//   - a Dragonfly whose scripts may touch undeclared keys
	//     (--default_lua_flags=disable-atomicity, or allow-undeclared-keys;
	//     the two cannot be told apart);
	//   - a Garnet started without --lua.
	//
	// Start it with atomic scripts.
	WarnScriptsNotAtomic = "scripts_not_atomic"
	// WarnScriptsUnchecked: whether the server runs scripts atomically
	// could not be read. Garnet does not say whether it was started with
	// --lua-transaction-mode. Without it, two processes can take the same
	// job. Make sure it was.
	WarnScriptsUnchecked = "scripts_unchecked"
	// WarnNoMaxmemory: the server has no maxmemory. So a flood of
	// distinct job ids can take the machine's memory. Each is kept for
	// Retention.Attempts. Set maxmemory, with maxmemory-policy noeviction.
	WarnNoMaxmemory = "no_maxmemory"
	// WarnMemoryNearlyFull: the server uses 90 % or more of its
	// maxmemory. Once full, it refuses every new job with OOM. Jobs
	// already known keep their answers. Raise maxmemory, or find what
	// fills it.
	WarnMemoryNearlyFull = "memory_nearly_full"
	// WarnSettleUnwritten: a failure's cooldown or failed mark, or a
	// success's done mark (Retention.Done), could not be written. Redis was
	// unreachable, or refused writes when full. State says which mark. The
	// process that ran the job refuses it in-process for the intended
	// cooldown or mark. It writes a done mark again until Redis takes it.
	// Other processes see only the running lease's TTL meanwhile.
	WarnSettleUnwritten = "settle_unwritten"
	// WarnPermanentWave: many distinct jobs of the upstream failed
	// permanently for the same reason in a short window
	// (UpstreamPolicy.PermanentWave). The cause may be a changed API, a
	// broken prompt template, or an unclassified billing error. The
	// upstream is paused for that reason. Its jobs cool instead of being
	// marked Failed. Fix the cause. Then reset the upstream and clear the
	// marks already written (retrygate reset --state failed --reason R).
	WarnPermanentWave = "permanent_wave"
	// WarnWaitPolling: waits and watches (AcquireWait, Watch) could not
	// subscribe to the job's channel. They poll Redis with backoff
	// instead. Err says why:
	//   - the client cannot subscribe;
	//   - Redis refused it (an ACL without channel permission: NOPERM; a
	//     server without SSUBSCRIBE);
	//   - the subscription's connection broke;
	//   - a cluster slot moved, and the client's slot map has not followed
	//     yet (MOVED).
	//
	// They are woken late, never wrongly. A Gate sends it at most once a
	// minute, however many waits poll.
	WarnWaitPolling = "wait_polling"
)
