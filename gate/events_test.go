package gate_test

import (
	"context"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/redistest"
)

// The events of a job's life reach the observer with what adapters
// (gateprom, gateslog) read from them: an acquisition with its fence and
// attempt, a settle with the state it led to, a refusal from Redis with
// the wait left, and a refusal decided in-process marked Local.
func TestEventsOfAJob(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			rec := newRecorder()
			g := newGate(t, tg.Client, gate.Options{Cooldown: time.Minute, Jitter: -1, Observer: rec})
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
