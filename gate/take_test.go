package gate_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// burstClients are n clients of their own to tg's backend, as n processes
// have (no pool or in-process flight shared), in the form the gate sends
// through: the client itself, or a wrapper with only gate.Client's methods,
// which makes the gate take the cluster form on one node too.
func burstClients(t *testing.T, tg redistest.Target, n int, narrow bool) []gate.Client {
	out := make([]gate.Client, n)
	for i := range out {
		c := gate.Client(tg.OwnClient(t))
		if narrow {
			c = &gatetest.Flaky{Client: c}
		}
		out[i] = c
	}
	return out
}

// burstForms runs f on n clients of each target, in both forms
// burstClients makes.
func burstForms(t *testing.T, n int, f func(t *testing.T, clients []gate.Client)) {
	for _, tg := range redistest.Targets(t) {
		for _, narrow := range []bool{false, true} {
			name := tg.Name
			if narrow {
				name += "/cluster form"
			}
			t.Run(name, func(t *testing.T) { f(t, burstClients(t, tg, n, narrow)) })
		}
	}
}

// gatesOn is a gate with opts on each of clients.
func gatesOn(t *testing.T, clients []gate.Client, opts gate.Options) []*gate.Gate {
	gs := make([]*gate.Gate, len(clients))
	for i, c := range clients {
		gs[i] = newGate(t, c, opts)
	}
	return gs
}

// wantOneRun fails t unless a burst ran one call and told every other
// duplicate the job runs.
func wantOneRun(t *testing.T, round int, runs int64, errs []error) {
	t.Helper()
	if runs != 1 {
		t.Fatalf("round %d: %d calls ran, want 1 (refusals: %v)", round, runs, errs)
	}
	for _, err := range errs {
		if !errors.Is(err, gate.ErrInFlight) {
			t.Fatalf("round %d: a duplicate was told %v, want ErrInFlight", round, err)
		}
	}
}

// burst runs one Do of job in each gate at once and returns how many
// calls ran and the errors of the others. A call that runs holds its job
// until every other Do returned, so no duplicate can come after it ends.
// inside, if set, runs in the call once the others returned.
func burst(t *testing.T, gs []*gate.Gate, job string, inside func()) (runs int64, errs []error) {
	t.Helper()
	var (
		ran, refused atomic.Int64
		others       = make(chan struct{}) // closed once the others returned
		all          sync.WaitGroup
		start        = make(chan struct{})
		mu           sync.Mutex
	)
	for _, g := range gs {
		all.Add(1)
		go func() {
			defer all.Done()
			<-start
			err := g.Do(context.Background(), job, func(context.Context, *gate.Lease) error {
				ran.Add(1)
				select {
				case <-others:
				case <-time.After(20 * time.Second):
					t.Error("the duplicates never all returned")
				}
				if inside != nil {
					inside()
				}
				return nil
			})
			if err != nil {
				if refused.Add(1) == int64(len(gs)-1) {
					close(others)
				}
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	close(start)
	all.Wait()
	return ran.Load(), errs
}

// A burst of duplicates of one job from several processes, on an upstream
// that knows nothing yet (the default upstream, which runs one call at a
// time until one settles, issue 37.5): exactly one runs, every other is
// told the job runs (ErrInFlight), on one node and on a cluster, where the
// job's node and the upstream's are apart. Twenty rounds, each on a fresh
// upstream, for the race between the job's take and the upstream's
// admission.
func TestDuplicateBurstOnAFreshUpstreamRunsOnce(t *testing.T) {
	const n, rounds = 8, 20
	burstForms(t, n, func(t *testing.T, clients []gate.Client) {
		for round := range rounds {
			prefix := redistest.UniqueKey(t) + "-" + strconv.Itoa(round)
			gs := gatesOn(t, clients, gate.Options{Prefix: prefix, Lease: 30 * time.Second})
			runs, errs := burst(t, gs, "doc", nil)
			wantOneRun(t, round, runs, errs)
		}
	})
}

// At a budget's edge, one call left, a burst of duplicates of one job: the
// one that takes the job has the last call, and the others are told the
// job runs. Another job is then refused by the budget: the call was the
// last one.
func TestDuplicateBurstAtTheBudgetsEdgeRunsOnce(t *testing.T) {
	const n, rounds = 8, 10
	burstForms(t, n, func(t *testing.T, clients []gate.Client) {
		for round := range rounds {
			opts := budgetOptions(t)
			opts.Prefix += "-" + strconv.Itoa(round)
			opts.Lease = 30 * time.Second
			gs := gatesOn(t, clients, opts)
			// Two requests left of 10 in ten minutes, one kept in reserve:
			// one call fits, and the next refills in a minute. The call
			// that runs checks the edge: another job is refused by the
			// budget meanwhile.
			report(t, gs[0], "reading", openAIHeader(2, 10, "10m0s"))
			var edge error
			runs, errs := burst(t, gs, "doc", func() {
				edge = gs[1].Do(context.Background(), "other", okFn)
			})
			var b *gate.BlockedError
			if runs == 1 && (!errors.As(edge, &b) || !errors.Is(edge, gate.ErrUpstreamCooling) || b.Reason != classify.ReasonRateLimited) {
				t.Fatalf("round %d: another job beside the call: %v, want refused by the budget (the call had the last one)", round, edge)
			}
			// Every engine: a duplicate of the running job is told the
			// job runs, not the budget's wait (one node's script reads the
			// job when its upstreams refuse; elsewhere the job is taken
			// first).
			wantOneRun(t, round, runs, errs)
		}
	})
}
