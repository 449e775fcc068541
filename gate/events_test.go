package gate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// The events of a job's life reach the observer with what adapters
// (gateprom, gateslog) read from them: an acquisition with its fence and
// attempt, a settle with the state it led to, a refusal from Redis with
// the wait left, and a refusal decided in-process marked Local.
func TestEventsOfAJob(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			rec := newRecorder()
			g := newGate(t, tg.Client, gate.Options{Cooldown: time.Minute, Observer: rec, Backoff: gate.Backoff{Jitter: -1}})
			ctx := context.Background()
			var fence int64
			_ = g.Do(ctx, "job", func(_ context.Context, l *gate.Lease) error {
				fence = l.Fence()
				// A duplicate in this process, refused without Redis.
				if err := g.Do(ctx, "job", okFn); err == nil {
					t.Error("duplicate ran")
				}
				return errTransient
			})
			_ = blocked(t, g, "job")
			evs := rec.drain()
			want := []struct {
				kind  gate.EventKind
				state gate.State
				local bool
			}{
				{gate.EventAcquired, gate.Running, false},
				{gate.EventRefused, gate.Running, true},
				{gate.EventSettled, gate.CoolingDown, false},
				{gate.EventRefused, gate.CoolingDown, false},
			}
			if len(evs) != len(want) {
				t.Fatalf("events %+v, want %d", evs, len(want))
			}
			for i, w := range want {
				e := evs[i]
				if e.Kind != w.kind || e.State != w.state || e.Local != w.local || e.Job != "job" {
					t.Fatalf("event %d: %v %v local=%v job=%q, want %v %v local=%v", i, e.Kind, e.State, e.Local, e.Job, w.kind, w.state, w.local)
				}
			}
			if evs[0].Fence != fence || evs[0].Attempt != 1 {
				t.Fatalf("acquired: fence %d attempt %d, want %d and 1", evs[0].Fence, evs[0].Attempt, fence)
			}
			if evs[2].Cooldown != time.Minute || evs[2].Reason == "" || evs[2].Held <= 0 {
				t.Fatalf("settled: %+v, want the cooldown, reason and held time", evs[2])
			}
			if d := evs[3].Cooldown; d <= 0 || d > time.Minute {
				t.Fatalf("refused: wait %v, want the cooldown's time left", d)
			}
		})
	}
}

// One request, one refusal event (issue 22): a duplicate that waits for a
// running job, here polling (its client cannot subscribe) through many
// steps, sends one EventRefused, when its wait ends, with the refusal it
// ends with; a metric of refusals counts requests, not wait steps.
func TestOneRefusalEventPerWait(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			rec := newRecorder()
			prefix := redistest.UniqueKey(t)
			owner := newGate(t, tg.Client, gate.Options{Prefix: prefix, Lease: time.Minute})
			waiter := newGate(t, &flaky{Client: tg.Client}, gate.Options{Prefix: prefix, Lease: time.Minute, Observer: rec})
			ctx := context.Background()
			l, err := owner.Acquire(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			defer l.Release(ctx)
			start := time.Now()
			_, err = waiter.AcquireWait(ctx, "job", 300*time.Millisecond) // polls 10, 20, 40... ms
			if !errors.Is(err, gate.ErrInFlight) || time.Since(start) < 300*time.Millisecond {
				t.Fatalf("AcquireWait: %v after %v, want ErrInFlight after its budget", err, time.Since(start))
			}
			refused := 0
			for _, e := range rec.drain() {
				if e.Kind == gate.EventRefused {
					refused++
					if e.State != gate.Running || e.Cooldown <= 0 {
						t.Errorf("refusal event %+v, want the running job's wait", e)
					}
				}
			}
			if refused != 1 {
				t.Fatalf("%d refusal events for one waiting call, want 1", refused)
			}
		})
	}
}
