package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// TestFullRedis: on a full noeviction Redis (every write refused with
// OOM) an operator can still read a job and reset it: reset only deletes.
func TestFullRedis(t *testing.T) {
	s := redistest.FullServer(t, redistest.WithArgs("--save", "3600 1")) // persisting: check's only finding can be the policy's
	prefix := redistest.UniqueKey(t)
	g, err := gate.New(s.Client(t), gate.Options{Prefix: prefix, Cooldown: time.Hour, Classify: testClassify, Backoff: gate.Backoff{Jitter: -1}})
	if err != nil {
		t.Fatal(err)
	}
	coolJob(t, g, "doc-1")
	s.Fill(t)
	args := []string{"--redis", "redis://" + s.Addr(), "--prefix", prefix}
	if st := statusOf(t, runCLI(t, nil, append(args, "--json", "status", "doc-1")...)); st.State != "cooling_down" {
		t.Fatalf("status on a full Redis: %+v", st)
	}
	mustOK(t, runCLI(t, nil, append(args, "reset", "doc-1")...))
	st, err := g.Status(context.Background(), "doc-1")
	if err != nil || st.State != gate.Ready {
		t.Fatalf("doc-1 after reset on a full Redis: %+v, %v", st, err)
	}
	// A new job cannot start: the acquire is a write.
	err = g.Do(context.Background(), "doc-2", func(context.Context, *gate.Lease) error { return nil })
	if !redistest.IsOOM(unwrapRedis(err)) {
		t.Fatalf("a new job on a full Redis: exp an OOM refusal, got %v", err)
	}
	// noeviction: the policy is right; what check warns about is the
	// memory, full.
	r := runCLI(t, nil, append(args, "check")...)
	if r.code != exitNotMet || !strings.Contains(r.stdout, "warning: "+gate.WarnMemoryNearlyFull+": gate: Redis ") ||
		strings.Count(r.stdout, "warning:") != 1 {
		t.Fatalf("check on a full Redis: exp exit 3 and one %s warning, got %d %q", gate.WarnMemoryNearlyFull, r.code, r.stdout)
	}
}

// unwrapRedis returns the last error of err's tree, where the gate keeps
// Redis's reply.
func unwrapRedis(err error) error {
	for {
		switch e := err.(type) {
		case interface{ Unwrap() []error }:
			errs := e.Unwrap()
			if len(errs) == 0 {
				return err
			}
			err = errs[len(errs)-1]
		case interface{ Unwrap() error }:
			if e.Unwrap() == nil {
				return err
			}
			err = e.Unwrap()
		default:
			return err
		}
	}
}

// TestClusterSlotMigration: while the slot of a job's key migrates, the
// CLI reads the job wherever its key is (a job is one key, so its keys are
// never split between two nodes); once the slot has moved the job is
// intact, cooldown and all.
func TestClusterSlotMigration(t *testing.T) {
	c := redistest.Cluster(t, 3, 0)
	cc := c.Client(t)
	prefix := redistest.UniqueKey(t)
	g, err := gate.New(cc, gate.Options{Prefix: prefix, Cooldown: time.Hour, Classify: testClassify, Backoff: gate.Backoff{Jitter: -1}})
	if err != nil {
		t.Fatal(err)
	}
	coolJob(t, g, "doc-1")
	args := []string{"--cluster", strings.Join(c.Addrs(), ","), "--prefix", prefix}
	status := func() result { return runCLI(t, nil, append(args, "--json", "status", "doc-1")...) }

	lock := keyspace.Job(prefix, "doc-1")
	m := c.StartMigration(t, lock)
	if st := statusOf(t, status()); st.State != "cooling_down" {
		t.Fatalf("status with the slot migrating, no key moved: %+v", st)
	}
	if n := m.MoveKeys(t, 10); n != 1 {
		t.Fatalf("moved %d keys, want the job's one", n)
	}
	// The key on the target, the slot still MIGRATING: -ASK, followed.
	if st := statusOf(t, status()); st.State != "cooling_down" {
		t.Fatalf("status with the key moved, slot not yet handed over: %+v", st)
	}
	m.Finish(t)
	st := statusOf(t, status())
	if st.State != "cooling_down" || st.RetryAfterMs < (59*time.Minute).Milliseconds() || st.Attempts != 1 {
		t.Fatalf("status after the migration: exp the cooldown with its time left, got %+v", st)
	}
	if err := g.Do(context.Background(), "doc-1", func(context.Context, *gate.Lease) error { return nil }); err == nil {
		t.Fatal("doc-1 ran after the migration: its cooldown was lost")
	}
}
