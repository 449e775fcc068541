package redisop

// The operations.
const (
	Acquire = "acquire" // the acquire script (and the refusal fast path's GET)
	Settle  = "settle"  // recording an outcome: release, cooldown, failed mark
	Renew   = "renew"   // extending a running lease
	Undo    = "undo"    // undoing an acquire the scope or WaitReplicas refused
	Scope   = "scope"   // updating the upstream scope (cluster form)
)

// All lists every operation.
var All = [...]string{Acquire, Settle, Renew, Undo, Scope}
