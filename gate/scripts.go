package gate

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
)

// The Lua scripts, each wrapped once. Their arguments are built and their
// replies decoded in protocol.go, and nowhere else. Job scripts touch one
// job's key; breaker scripts one upstream's keys.
var (
	//go:embed lua/notify.lua
	notifyLua string
	//go:embed lua/read.lua
	readLua string
	//go:embed lua/job_acquire.lua
	jobAcquireLua string
	//go:embed lua/job_renew.lua
	jobRenewLua string
	//go:embed lua/job_settle.lua
	jobSettleLua string
	//go:embed lua/job_undo.lua
	jobUndoLua string
	//go:embed lua/job_reset.lua
	jobResetLua string
	//go:embed lua/breaker_claim.lua
	breakerClaimLua string
	//go:embed lua/breaker_cancel.lua
	breakerCancelLua string
	//go:embed lua/breaker_open.lua
	breakerOpenLua string
	//go:embed lua/breaker_trip.lua
	breakerTripLua string
	//go:embed lua/breaker_count.lua
	breakerCountLua string
	//go:embed lua/breaker_reset.lua
	breakerResetLua string

	// Scripts that change no state the waiters watch.
	readScript         = newScript(readLua)
	jobAcquireScript   = newScript(jobAcquireLua)
	jobRenewScript     = newScript(jobRenewLua)
	breakerClaimScript = newScript(breakerClaimLua)
	breakerCountScript = newScript(breakerCountLua)

	// The scripts that change state publish the change (lua/notify.lua):
	// PUBLISH on one node, SPUBLISH on a cluster.
	nodeScripts    = newWriteScripts("PUBLISH")
	clusterScripts = newWriteScripts("SPUBLISH")
)

// writeScripts are the state-changing scripts in one topology's form.
type writeScripts struct {
	jobSettle, jobUndo, jobReset                          *script
	breakerCancel, breakerOpen, breakerTrip, breakerReset *script
}

func newWriteScripts(publish string) *writeScripts {
	pre := "local PUBLISH = '" + publish + "'\n" + notifyLua
	return &writeScripts{
		jobSettle:     newScript(pre + jobSettleLua),
		jobUndo:       newScript(pre + jobUndoLua),
		jobReset:      newScript(pre + jobResetLua),
		breakerCancel: newScript(pre + breakerCancelLua),
		breakerOpen:   newScript(pre + breakerOpenLua),
		breakerTrip:   newScript(pre + breakerTripLua),
		breakerReset:  newScript(pre + breakerResetLua),
	}
}

// script is a Lua script and its SHA1, for EVALSHA (protocol.go falls
// back to EVAL when the server does not have it).
type script struct {
	src, hash string
}

func newScript(src string) *script {
	h := sha1.Sum([]byte(src))
	return &script{src: src, hash: hex.EncodeToString(h[:])}
}
