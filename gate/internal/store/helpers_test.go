package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// budgetKeys names an upstream's budget keys: name, name:budget and
// name:calls.
func budgetKeys(name string) BudgetKeys {
	return BudgetKeys{Upstream: name, Budget: name + ":budget", Calls: name + ":calls"}
}

// recordReading records r as k's budget, in a trip of its own, with no
// call settled by it; an error fails t.
func recordReading(t *testing.T, s *Store, k BudgetKeys, r Reading) {
	t.Helper()
	ctx := context.Background()
	tr := s.Trip()
	rec := tr.RecordBudget(ctx, k, "", r, time.Minute)
	tr.Send(ctx)
	if err := rec.Err(); err != nil {
		t.Fatalf("record %+v as %s's budget: %v", r, k.Upstream, err)
	}
}

// replicaOf starts a redis-server replicating the master at port and
// waits, polling, until its link to the master is up.
func replicaOf(t *testing.T, port string) {
	t.Helper()
	replica := redistest.Server(t, redistest.WithArgs("--replicaof", "127.0.0.1", port))
	rc := replica.Client(t)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(rc.Info(context.Background(), "replication").Val(), "master_link_status:up") {
		if time.Now().After(deadline) {
			t.Fatal("the replica did not connect to its master")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
