package store

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
)

// The Lua scripts, each wrapped once. Their arguments are built and their
// replies decoded in job.go and upstream.go, and nowhere else. Job scripts
// touch one job's key; upstream scripts one upstream's keys.
var (
	//go:embed lua/notify.lua
	notifyLua string
	//go:embed lua/read.lua
	readLua string
	//go:embed lua/job_take.lua
	jobTakeLua string
	//go:embed lua/job_acquire.lua
	jobAcquireLua string
	//go:embed lua/job_fence.lua
	jobFenceLua string
	//go:embed lua/job_renew.lua
	jobRenewLua string
	//go:embed lua/job_write.lua
	jobWriteLua string
	//go:embed lua/job_settle.lua
	jobSettleLua string
	//go:embed lua/job_settle_gone.lua
	jobSettleGoneLua string
	//go:embed lua/job_undo.lua
	jobUndoLua string
	//go:embed lua/job_reset.lua
	jobResetLua string
	//go:embed lua/job_forget_done.lua
	jobForgetDoneLua string
	//go:embed lua/upstream_value.lua
	upstreamValueLua string // upstream_parse, upstream_may: every script that reads an upstream's value
	//go:embed lua/upstream_claim.lua
	upstreamClaimLua string
	//go:embed lua/upstream_cancel.lua
	upstreamCancelLua string
	//go:embed lua/upstream_recover.lua
	upstreamRecoverLua string
	//go:embed lua/upstream_stop.lua
	upstreamStopLua string
	//go:embed lua/window_count.lua
	windowCountLua string
	//go:embed lua/upstream_reset.lua
	upstreamResetLua string
	//go:embed lua/upstream_pause.lua
	upstreamPauseLua string
	//go:embed lua/upstream_resume.lua
	upstreamResumeLua string
	//go:embed lua/calls_record.lua
	callsRecordLua string

	// Scripts that change no state the waiters watch.
	readScript          = newScript(readLua)
	jobAcquireScript    = newScript(jobTakeLua + jobAcquireLua)
	jobFenceScript      = newScript(jobFenceLua)
	jobRenewScript      = newScript(jobRenewLua)
	upstreamClaimScript = newScript(upstreamValueLua + upstreamClaimLua)
	windowCountScript   = newScript(windowCountLua)
	callsRecordScript   = newScript(callsRecordLua)
	jobForgetDoneScript = newScript(jobForgetDoneLua)

	// The scripts that change state publish the change (lua/notify.lua):
	// PUBLISH on one node, SPUBLISH on a cluster.
	nodeScripts    = newWriteScripts("PUBLISH")
	clusterScripts = newWriteScripts("SPUBLISH")
)

// writeScripts are the state-changing scripts in one topology's form.
type writeScripts struct {
	jobSettle, jobSettleGone, jobUndo, jobReset                  *script
	upstreamCancel, upstreamRecover, upstreamStop, upstreamReset *script
	upstreamPause, upstreamResume                                *script
}

func newWriteScripts(publish string) *writeScripts {
	pre := "local PUBLISH = '" + publish + "'\n" + notifyLua
	return &writeScripts{
		jobSettle:       newScript(pre + jobWriteLua + jobSettleLua),
		jobSettleGone:   newScript(pre + jobWriteLua + jobSettleGoneLua),
		jobUndo:         newScript(pre + jobUndoLua),
		jobReset:        newScript(pre + jobResetLua),
		upstreamCancel:  newScript(pre + upstreamValueLua + upstreamCancelLua),
		upstreamRecover: newScript(pre + upstreamValueLua + upstreamRecoverLua),
		upstreamStop:    newScript(pre + upstreamValueLua + upstreamStopLua),
		upstreamReset:   newScript(pre + upstreamResetLua),
		upstreamPause:   newScript(pre + upstreamPauseLua),
		upstreamResume:  newScript(pre + upstreamResumeLua),
	}
}

// script is a Lua script and its SHA1, for EVALSHA (Trip.Send falls back
// to EVAL when the server does not have it).
type script struct {
	src, hash string
}

func newScript(src string) *script {
	h := sha1.Sum([]byte(src))
	return &script{src: src, hash: hex.EncodeToString(h[:])}
}
