package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// After a wave of one permanent reason is fixed, an operator clears the
// failed marks of that reason in bulk, on every master of a cluster,
// after a dry run that changes nothing. Marks of other reasons, and other
// states, are left alone.
func TestBulkResetByReason(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			f := newFixture(t, tg) // doc-2 failed (invalid_request), doc-1 and doc 3/ü cooling, doc-4 running
			ctx := context.Background()
			billing := classify.WithReason(errors.New("400 account inactive"), classify.ClassPermanent, "account_inactive", 0)
			jobs := []string{"wave-a", "wave-b", "wave-c", "wave d/ü"}
			g, err := gate.New(tg.Client, gate.Options{Prefix: f.prefix}) // classify.Default reads the mark
			if err != nil {
				t.Fatal(err)
			}
			for _, job := range jobs {
				if err := g.Do(ctx, job, func(context.Context, *gate.Lease) error { return billing }); !errors.Is(err, gate.ErrFailed) {
					t.Fatalf("%s: %v", job, err)
				}
			}
			if tg.IsCluster {
				assertSpread(t, tg.Client.(*redis.ClusterClient), f.prefix, jobs...)
			}

			r := f.run(t, "--json", "reset", "--state", "failed", "--reason", "account_inactive", "--dry-run")
			mustOK(t, r)
			var dry bulkResetJSON
			if err := json.Unmarshal([]byte(r.stdout), &dry); err != nil {
				t.Fatal(err)
			}
			if len(dry.Jobs) != len(jobs) || !dry.DryRun || dry.Reset != 0 {
				t.Fatalf("dry run: %+v, want the %d jobs of the reason and nothing reset", dry, len(jobs))
			}
			for _, job := range jobs {
				if st := mustStatusOf(t, f.g, job); st.State != gate.Failed {
					t.Fatalf("dry run changed %s: %v", job, st.State)
				}
			}

			r = f.run(t, "reset", "--state", "failed", "--reason", "account_inactive")
			mustOK(t, r)
			if !strings.Contains(r.stdout, "reset 4 failed (account_inactive) jobs") {
				t.Fatalf("output:\n%s", r.stdout)
			}
			for _, job := range jobs {
				if st := mustStatusOf(t, f.g, job); st.State != gate.Ready || st.Attempts != 0 {
					t.Fatalf("%s after the bulk reset: %v, %d attempts", job, st.State, st.Attempts)
				}
			}
			for job, want := range map[string]gate.State{"doc-2": gate.Failed, "doc-1": gate.CoolingDown, "doc-4": gate.Running} {
				if st := mustStatusOf(t, f.g, job); st.State != want {
					t.Fatalf("%s: %v, want it left %v", job, st.State, want)
				}
			}

			for _, bad := range [][]string{
				{"reset", "--state", "running"},
				{"reset", "--state", "failed", "doc-2"},
				{"reset", "--reason", "x"},
			} {
				if r := f.run(t, bad...); r.code != exitUsage {
					t.Errorf("%v: exit %d, want %d (usage)", bad, r.code, exitUsage)
				}
			}
		})
	}
}

func mustStatusOf(t *testing.T, g *gate.Gate, job string) gate.Status {
	t.Helper()
	st, err := g.Status(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	return st
}
