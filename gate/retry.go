package gate

import "time"

// A refusal's wait says when a call refused by what it found may come
// back. It is worked out here alone, by retryIn. retryIn serves every
// refusal: the acquire's, the in-process flight's, an unwritten
// outcome's. It also serves Status and Reset. httpmw and the queue
// adapters read the wait from those.

// refuser is what refused a call, as retryIn needs it.
type refuser struct {
	// state is the job's state, or UpstreamCooling for an upstream.
	state State
	// left is how long that state lasts: a lease's, a cooldown's, or an
	// upstream's wait. While a probe runs, it is the probe's lease.
	left time.Duration
	// ran is how long a running job's call has taken. runner is the
	// call's own estimate of its length (0 for none).
	ran, runner time.Duration
	// foreign: the job's key holds a value no gate wrote. Nobody knows its
	// end but its TTL.
	foreign bool
	// probing: one call probes the upstream. The others wait for its
	// outcome. budget: the upstream's budget refused. Either it said when
	// one call fits (left), or only a call in flight can tell more of it
	// (left 0).
	probing, budget bool
}

// retryIn is the wait a refusal by r carries.
func (g *Gate) retryIn(r refuser) time.Duration {
	switch {
	case r.foreign:
		return r.left
	case r.state == Running:
		return g.calls.ends(r.left, r.ran, r.runner)
	case r.probing:
		// The probe is a running call. It has run for what its lease has
		// lost.
		return g.calls.ends(r.left, g.opts.Lease-r.left, 0)
	case r.budget && r.left <= 0:
		// A call in flight will say: one call's length, as far as known.
		return g.calls.ends(g.opts.Lease, 0, 0)
	case r.state == CoolingDown, r.state == UpstreamCooling:
		return r.left
	}
	return 0
}
