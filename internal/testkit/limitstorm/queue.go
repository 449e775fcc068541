package limitstorm

import (
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
)

// QueueOptions are the gate options the queue adapters' storms run
// under: today's breaker, capped at 2 s as in this package's proof.
// OpenAI's 429 says the bucket is whole in a minute, and the gate would
// cool that long.
func QueueOptions(prefix string) gate.Options {
	return gate.Options{Prefix: prefix, Upstream: "llm", Lease: 2 * time.Second,
		Cooldown: time.Second,
		Backoff:  gate.Backoff{Max: 2 * time.Second, Jitter: -1}}
}

// CheckQueue fails t unless a storm run through a queue met the adapters'
// floor. Every job completed, none lost or given up (failed names how the
// queue gives up: "archived", say). Each took one call served, but where
// a lease was gone when its call ended (a process stalled past it) and
// the job ran again. At most 1 % of calls earned a 429, and goodput is
// at least 0.9 × the limit. unit names the queue's jobs in messages.
func (r Result) CheckQueue(t testing.TB, unit, failed string) {
	t.Helper()
	t.Log(r)
	if r.Lost != 0 || r.Failed != 0 || r.Completed != r.Jobs {
		t.Errorf("%d of %d %s completed, %d lost, %d %s", r.Completed, r.Jobs, unit, r.Lost, r.Failed, failed)
	}
	if int64(r.Completed) > r.Served {
		t.Errorf("%d %s completed by %d calls served", r.Completed, unit, r.Served)
	} else if extra := r.Served - int64(r.Completed); extra > 0 {
		t.Logf("%d calls more than %s: they ran again", extra, unit)
	}
	if got := r.RefusedShare(); got > 0.01 {
		t.Errorf("%.2f %% of calls earned a 429, want at most 1 %%", 100*got)
	}
	if got := r.Goodput(); got < 0.9 {
		t.Errorf("goodput %.2f × the limit, want at least 0.9", got)
	}
}
