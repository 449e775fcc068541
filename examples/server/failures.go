package main

import (
	"context"
	"sync"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

// failure is a document's last failed evaluation, as the gate recorded it.
type failure struct {
	// Reason is the gate's classification code; never upstream text.
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// failures remembers each document's last failure after its cooldown has
// ended (the gate then forgets the reason with the lock), so the page can
// say "Last attempt failed: …" instead of "Not evaluated yet". It reads
// the gate's settles (gate.Observer). Safe for concurrent use.
type failures struct {
	docOf map[string]string // job key → document id

	mu   sync.Mutex
	last map[string]failure
}

func newFailures() *failures {
	f := &failures{docOf: make(map[string]string, len(catalog)), last: make(map[string]failure)}
	for _, d := range catalog {
		f.docOf[docJob(d.ID)] = d.ID
	}
	return f
}

// Observe implements gate.Observer: a settle into a cooldown or a failed
// mark is remembered, and so is a provider-wide failure that cooled the
// upstream and left the job ready for the next one (a key-wide rate
// limit with a backup); a success forgets it.
func (f *failures) Observe(_ context.Context, e gate.Event) {
	if e.Kind != gate.EventSettled || e.Err != nil {
		return
	}
	id, ok := f.docOf[e.Job]
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case e.State == gate.CoolingDown || e.State == gate.Failed,
		e.State == gate.Ready && e.Reason != "" && e.Class != classify.ClassCanceled:
		f.last[id] = failure{Reason: e.Reason, At: time.Now().UTC()}
	case e.Reason == "": // a success (a release has a reason, e.g. canceled)
		delete(f.last, id)
	}
}

func (f *failures) get(id string) (failure, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.last[id]
	return v, ok
}

// observers sends every event to each of its observers.
type observers []gate.Observer

func (o observers) Observe(ctx context.Context, e gate.Event) {
	for _, x := range o {
		x.Observe(ctx, e)
	}
}
