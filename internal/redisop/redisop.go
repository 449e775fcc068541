package redisop

// The operations.
const (
	Acquire = "acquire" // the acquire's round trip, and its takeover script
	Settle  = "settle"  // recording an outcome: release, cooldown, failed mark
	Renew   = "renew"   // extending a running lease
	Undo    = "undo"    // undoing an acquire an upstream or WaitReplicas refused
	// Upstream: an upstream's breaker (its probe claimed, given back or
	// cooled).
	Upstream = "upstream"
)

// All lists every operation.
var All = [...]string{Acquire, Settle, Renew, Undo, Upstream}
