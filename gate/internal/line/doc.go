// Package line is an upstream's line: the callers waiting for a turn when
// its budget cannot serve them all, kept in Redis so that every process
// shares one order. Its verbs: Join (take a place, or be told at once that
// the turn cannot come before the deadline, with the expected wait),
// Ticket.Wait (until the turn, the deadline or the context's end),
// Ticket.Place (how many turns come first, and the expected wait), Leave,
// and Turn (the budget can serve n more calls: give them out).
//
// The order is class (higher first), then, within a class, start-time
// fair queuing among the tenants asking (each turn advances its tenant's
// tag by 1/weight, and a tenant that was idle starts at the class's
// current tag: max-min fair, work-conserving, no credit for idle time),
// then arrival. Every step is one script on the upstream's slot, so two
// processes never give one turn twice. A process holds its callers'
// places under one lease, renewed every Lease/3 in one small round trip
// whatever their number; a turn skips a place whose process's lease ended
// or whose caller's deadline passed, and the places of a dead process are
// dropped, a few hundred per step, by whoever touches the line next.
//
// A turn wakes its caller through the gate's hub: it lands on the
// caller's process's list of grants, published on that list's channel;
// one goroutine per line and process (while any of its callers wait)
// collects the list and wakes the callers. A process whose places were
// dropped while it lived (a pause past its lease) or lost (a Redis
// restart) gets a new token at its next step, and its callers join again.
//
// Cost, measured by BenchmarkHundredThousandWaiting: about 310 bytes of
// Redis memory per waiting caller (a sorted-set member and a set member);
// a join is one round trip, a turn one for up to n callers, and a process
// collects all its turns in one round trip per wake: 1.04 round trips per
// admitted call.
//
// A Line is safe for concurrent use. Its keys and scripts are behind
// package store.
package line
