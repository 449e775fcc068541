package main

import (
	"context"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// TestRestartKeepsMarks: what docs/operating.md ("Persistence") says each
// Redis setting keeps across a restart, on a real redis-server through the
// public gate API. With an AOF or an RDB schedule a restart (SIGTERM: Redis
// writes its AOF or snapshot as it shuts down) keeps every failed and done
// mark and every cooldown, with its time left and attempt count; with
// appendfsync always even a crash (SIGKILL) keeps them. With nothing
// persisted all of them are gone and every job runs again: what
// retrygate check warns about.
func TestRestartKeepsMarks(t *testing.T) {
	for _, tc := range []struct {
		name  string
		args  []string
		crash bool
		keeps bool
	}{
		{"AOF everysec, restart", []string{"--appendonly", "yes", "--appendfsync", "everysec"}, false, true},
		{"AOF always, crash", []string{"--appendonly", "yes", "--appendfsync", "always"}, true, true},
		{"RDB schedule, restart", []string{"--save", "3600 1"}, false, true},
		{"nothing persisted, restart", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := redistest.Server(t, redistest.WithArgs(tc.args...))
			opts := gate.Options{Prefix: redistest.UniqueKey(t), Cooldown: time.Hour, Retention: gate.Retention{Done: time.Hour}, Classify: testClassify, Backoff: gate.Backoff{Jitter: -1}}
			g, err := gate.New(s.Client(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			coolJob(t, g, "cooling")
			if err := g.Do(ctx, "failed", func(context.Context, *gate.Lease) error { return errInvalid }); err == nil {
				t.Fatal("failed: expected a failure")
			}
			if err := g.Do(ctx, "done", func(context.Context, *gate.Lease) error { return nil }); err != nil {
				t.Fatal(err)
			}
			want := map[string]gate.State{"cooling": gate.CoolingDown, "failed": gate.Failed, "done": gate.Done}
			for job, st := range want {
				if got, err := g.Status(ctx, job); err != nil || got.State != st {
					t.Fatalf("%s before the restart: exp %v, got %+v, %v", job, st, got, err)
				}
			}

			if tc.crash {
				s.Kill()
			}
			s.Restart(t)
			g, err = gate.New(s.Client(t), opts) // a new process's gate
			if err != nil {
				t.Fatal(err)
			}
			for job, st := range want {
				got, err := g.Status(ctx, job)
				if err != nil {
					t.Fatalf("%s after the restart: %v", job, err)
				}
				if !tc.keeps {
					if got.State != gate.Ready {
						t.Errorf("%s after a restart without persistence: exp ready (forgotten), got %+v", job, got)
					}
					continue
				}
				if got.State != st {
					t.Errorf("%s after the restart: exp %v, got %+v", job, st, got)
				}
			}
			if !tc.keeps {
				return
			}
			st, _ := g.Status(ctx, "cooling")
			if st.RetryAfter < 59*time.Minute || st.Attempts != 1 {
				t.Errorf("cooling after the restart: exp about 1h left and 1 attempt, got %v and %d", st.RetryAfter, st.Attempts)
			}
			for _, job := range []string{"cooling", "failed", "done"} {
				if err := g.Do(ctx, job, func(context.Context, *gate.Lease) error { return nil }); err == nil {
					t.Errorf("%s ran again after the restart", job)
				}
			}
		})
	}
}
