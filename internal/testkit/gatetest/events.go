package gatetest

import (
	"context"
	"slices"
	"sync"

	"github.com/retrygate/retrygate/gate"
)

// Events is a gate.Observer that keeps the events of Kinds (every event
// when Kinds is empty). It is safe for concurrent use.
type Events struct {
	Kinds []gate.EventKind

	mu   sync.Mutex
	list []gate.Event
}

// Observe keeps e if its kind is one of Kinds.
func (r *Events) Observe(_ context.Context, e gate.Event) {
	if len(r.Kinds) > 0 && !slices.Contains(r.Kinds, e.Kind) {
		return
	}
	r.mu.Lock()
	r.list = append(r.list, e)
	r.mu.Unlock()
}

// List is a copy of the events kept so far, in the order observed.
func (r *Events) List() []gate.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.list)
}
