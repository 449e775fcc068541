package gate

import (
	_ "embed"

	"github.com/redis/go-redis/v9"
)

// Each script is wrapped once; go-redis runs it with EVALSHA and falls back
// to EVAL when the server does not have it cached.
var (
	//go:embed lua/acquire.lua
	acquireLua string
	//go:embed lua/renew.lua
	renewLua string
	//go:embed lua/settle.lua
	settleLua string
	//go:embed lua/release.lua
	releaseLua string
	//go:embed lua/scope_lib.lua
	scopeLibLua string
	//go:embed lua/scope.lua
	scopeLua string
	//go:embed lua/scope_check.lua
	scopeCheckLua string
	//go:embed lua/scope_unclaim.lua
	scopeUnclaimLua string
	//go:embed lua/wave.lua
	waveLua string
	//go:embed lua/scope_reset.lua
	scopeResetLua string
	//go:embed lua/status.lua
	statusLua string
	//go:embed lua/reset.lua
	resetLua string
	//go:embed lua/undo.lua
	undoLua string

	// acquire.lua reads the scope only with KEYS[3] (one node, with a
	// Scope): without one, the script runs without the scope library, so
	// the common acquire does not define functions it never calls.
	acquireScript      = redis.NewScript(acquireLua)
	acquireScopeScript = redis.NewScript(scopeLibLua + acquireLua)
	renewScript        = redis.NewScript(renewLua)
	settleScript       = redis.NewScript(scopeLibLua + settleLua)
	releaseScript      = redis.NewScript(releaseLua)
	scopeScript        = redis.NewScript(scopeLibLua + scopeLua)
	scopeCheckScript   = redis.NewScript(scopeLibLua + scopeCheckLua)
	unclaimScript      = redis.NewScript(scopeUnclaimLua)
	waveScript         = redis.NewScript(scopeLibLua + waveLua)
	scopeResetScript   = redis.NewScript(scopeResetLua)
	statusScript       = redis.NewScript(statusLua)
	statusScopeScript  = redis.NewScript(scopeLibLua + statusLua)
	resetScript        = redis.NewScript(resetLua)
	undoScript         = redis.NewScript(undoLua)
)

// Scripter is the narrow Redis interface the gate needs. *redis.Client,
// *redis.ClusterClient, *redis.Ring and every redis.UniversalClient satisfy
// it, and so does a wrapper that injects faults.
type Scripter = redis.Scripter

var (
	_ Scripter = (*redis.Client)(nil)
	_ Scripter = (*redis.ClusterClient)(nil)
	_ Scripter = (*redis.Ring)(nil)
	_ Scripter = redis.UniversalClient(nil)
)
