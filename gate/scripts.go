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
	//go:embed lua/notify.lua
	notifyLua string

	// acquire.lua reads the scope only with KEYS[3] (one node, with a
	// Scope): without one, the script runs without the scope library, so
	// the common acquire does not define functions it never calls.
	acquireScript      = redis.NewScript(acquireLua)
	acquireScopeScript = redis.NewScript(scopeLibLua + acquireLua)
	renewScript        = redis.NewScript(renewLua)
	scopeCheckScript   = redis.NewScript(scopeLibLua + scopeCheckLua)
	statusScript       = redis.NewScript(statusLua)
	statusScopeScript  = redis.NewScript(scopeLibLua + statusLua)

	// The scripts that change a job's or scope's state publish the change
	// (lua/notify.lua): PUBLISH on one node, SPUBLISH on a cluster.
	nodeScripts    = newWriteScripts("PUBLISH")
	clusterScripts = newWriteScripts("SPUBLISH")
)

// writeScripts are the scripts that change state, in one topology's form.
type writeScripts struct {
	settle, release, scope, scopeReset, reset, undo, unclaim, wave *redis.Script
}

func newWriteScripts(publish string) *writeScripts {
	pre := "local PUBLISH = '" + publish + "'\n" + notifyLua
	return &writeScripts{
		settle:     redis.NewScript(pre + scopeLibLua + settleLua),
		release:    redis.NewScript(pre + releaseLua),
		scope:      redis.NewScript(pre + scopeLibLua + scopeLua),
		scopeReset: redis.NewScript(pre + scopeResetLua),
		reset:      redis.NewScript(pre + resetLua),
		undo:       redis.NewScript(pre + undoLua),
		unclaim:    redis.NewScript(pre + scopeUnclaimLua),
		wave:       redis.NewScript(pre + scopeLibLua + waveLua),
	}
}

// New takes a redis.Scripter, the narrow interface the gate needs:
// *redis.Client, *redis.ClusterClient, *redis.Ring and every
// redis.UniversalClient satisfy it, and so does a wrapper that injects faults.
var (
	_ redis.Scripter = (*redis.Client)(nil)
	_ redis.Scripter = (*redis.ClusterClient)(nil)
	_ redis.Scripter = (*redis.Ring)(nil)
	_ redis.Scripter = redis.UniversalClient(nil)
)
