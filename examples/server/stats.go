package main

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/gate"
)

// stats counts what the page's counters show, and says when they change
// so the page's stream can show each refusal as it happens. Safe for
// concurrent use.
type stats struct {
	upstreamCalls atomic.Int64 // HTTP requests sent to the model
	refused       atomic.Int64 // calls the gate refused without calling the model
	renewals      atomic.Int64 // lease renewals

	mu      sync.Mutex
	changed chan struct{} // closed at the next change; nil when nobody waits
}

// countersView is the counters as the page shows them.
type countersView struct {
	// UpstreamCalls counts the requests sent to the model.
	UpstreamCalls int64 `json:"upstream_calls"`
	// Refused counts the calls the gate refused without calling the model.
	Refused       int64 `json:"refused_by_gate"`
	LeaseRenewals int64 `json:"lease_renewals"`
}

func (s *stats) view() countersView {
	return countersView{UpstreamCalls: s.upstreamCalls.Load(), Refused: s.refused.Load(), LeaseRenewals: s.renewals.Load()}
}

// add counts one on c and wakes whoever waits for a change.
func (s *stats) add(c *atomic.Int64) {
	c.Add(1)
	s.mu.Lock()
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
	s.mu.Unlock()
}

// changes returns a channel closed at the next change of a counter.
func (s *stats) changes() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.changed == nil {
		s.changed = make(chan struct{})
	}
	return s.changed
}

// Observe implements gate.Observer.
func (s *stats) Observe(_ context.Context, e gate.Event) {
	switch e.Kind {
	case gate.EventRefused:
		s.add(&s.refused)
	case gate.EventRenewed:
		s.add(&s.renewals)
	}
}

// countingDoer counts the requests that really leave for the model.
type countingDoer struct {
	next  openai.HTTPDoer
	stats *stats
}

func (c countingDoer) Do(req *http.Request) (*http.Response, error) {
	c.stats.add(&c.stats.upstreamCalls)
	return c.next.Do(req)
}
