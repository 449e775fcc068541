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
// processes never give one turn twice, and a turn given to a caller whose
// process is gone is skipped: each place has a lease, renewed by its live
// process every Lease/3 and never past its caller's deadline.
//
// A turn wakes its caller through the gate's hub: it lands on the
// caller's process's list of grants, published on that list's channel;
// one goroutine per line and process (while any of its callers wait)
// collects the list and wakes the callers. A line lost to a Redis restart
// is seen as a new epoch, and its callers join again.
//
// Cost: each waiting caller is two sorted-set members of about 50 bytes
// plus its tenant's name (see the benchmark); joining is one round trip,
// a turn one round trip for up to n callers, and a process collects all
// its turns in one round trip per wake.
//
// A Line is safe for concurrent use. Its keys and scripts are behind
// package store.
package line
