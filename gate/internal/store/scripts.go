package store

import (
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
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

// script is a Lua script and its SHA1, for EVALSHA once a server has it loaded
// (a trip sends EVAL before: see Trip.sendVia).
type script struct {
	src, hash string
}

func newScript(src string) *script {
	h := sha1.Sum([]byte(src))
	return &script{src: src, hash: hex.EncodeToString(h[:])}
}

// loadedScripts is what the store knows its servers have loaded: the scripts each
// one has run since the last NOSCRIPT. It is never changed, only
// replaced (knownScripts), so a trip reads it without a lock.
type loadedScripts struct {
	// epoch counts the NOSCRIPTs met. What a trip learnt under an older
	// epoch may predate the loss, and is not kept.
	epoch uint64
	known map[loadedScript]struct{}
}

// loadedScript is a script on a server ("" on one node).
type loadedScript struct {
	node   string
	script *script
}

func (h *loadedScripts) has(node string, s *script) bool {
	_, ok := h.known[loadedScript{node, s}]
	return ok
}

// knownScripts is the store's loadedScripts. The zero value knows none.
type knownScripts struct{ p atomic.Pointer[loadedScripts] }

// Load returns what the store knows now.
func (k *knownScripts) Load() *loadedScripts {
	if h := k.p.Load(); h != nil {
		return h
	}
	h := &loadedScripts{}
	if k.p.CompareAndSwap(nil, h) {
		return h
	}
	return k.p.Load()
}

// learn records that node ran s, learnt under from: kept only if no
// NOSCRIPT came since.
func (k *knownScripts) learn(from *loadedScripts, node string, s *script) {
	for {
		cur := k.Load()
		if cur.epoch != from.epoch || cur.has(node, s) {
			return
		}
		next := &loadedScripts{epoch: cur.epoch, known: make(map[loadedScript]struct{}, len(cur.known)+1)}
		for h := range cur.known {
			next.known[h] = struct{}{}
		}
		next.known[loadedScript{node, s}] = struct{}{}
		if k.p.CompareAndSwap(cur, next) {
			return
		}
	}
}

// lost forgets every script, on every server, after a NOSCRIPT met by a
// trip that read from: a server lost its cache, and others may have too
// (a failover, a restart).
func (k *knownScripts) lost(from *loadedScripts) {
	for {
		cur := k.Load()
		if cur.epoch != from.epoch { // another trip met it first
			return
		}
		if k.p.CompareAndSwap(cur, &loadedScripts{epoch: cur.epoch + 1}) {
			return
		}
	}
}

// ranScript reports whether a script's answer shows the server ran it,
// and so has it loaded: a reply. After an error (OOM, READONLY, the network,
// or one the script raised) it is not assumed loaded; the next trip sends
// its source again.
func ranScript(err error) bool { return err == nil || err == redis.Nil }
