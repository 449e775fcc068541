package upstream

import (
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
)

// UnreachableJobs distinct jobs that could not reach the upstream's
// address cool it; one job failing again counts once; 0 is off.
func TestUnreachedCountsDistinctJobs(t *testing.T) {
	f := newFixture(t, []string{"a"}, Policy{FailWindow: time.Minute, UnreachableJobs: 2})
	unreached := func(job string) (Status, bool) {
		run := store.NewToken()
		c, refusal := f.choose(f.judge(), run)
		if refusal != nil {
			t.Fatalf("%s: refused %+v", job, refusal)
		}
		return f.record(c, Write{Op: Unreached, Reason: "network", TTL: time.Second, Job: job}, run)
	}
	for i := 0; i < 3; i++ {
		if _, wrote := unreached("job-a"); wrote {
			t.Fatalf("job-a's failure %d cooled the upstream: one job counts once", i+1)
		}
	}
	if st, wrote := unreached("job-b"); !wrote || st.Mode != store.ModeCooling || st.Reason != "network" || st.RetryAfter != time.Second {
		t.Fatalf("a second distinct job: %+v, wrote %v; want cooling (network) for a second", st, wrote)
	}

	off := newFixture(t, []string{"a"}, Policy{FailWindow: time.Minute})
	for _, job := range []string{"job-a", "job-b", "job-c"} {
		run := store.NewToken()
		c, _ := off.choose(off.judge(), run)
		if _, wrote := off.record(c, Write{Op: Unreached, Reason: "network", TTL: time.Second, Job: job}, run); wrote {
			t.Fatalf("UnreachableJobs 0: %s cooled the upstream", job)
		}
	}
	if k := off.set.all[0].(*guarded).unreachable; off.m.Exists(k) {
		t.Fatalf("UnreachableJobs 0: the jobs were counted in Redis (%s), want nothing written", k)
	}
}
