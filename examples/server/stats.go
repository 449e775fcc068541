package main

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

// stats counts what the page's counter shows. Safe for concurrent use.
type stats struct {
	upstreamCalls atomic.Int64 // HTTP requests sent to the model
	refused       atomic.Int64 // calls the gate refused without calling the model
	renewals      atomic.Int64 // lease renewals
}

// Observe implements gate.Observer.
func (s *stats) Observe(_ context.Context, e gate.Event) {
	switch e.Kind {
	case gate.EventRefused:
		s.refused.Add(1)
	case gate.EventRenewed:
		s.renewals.Add(1)
	}
}

// countingDoer counts the requests that really leave for the model.
type countingDoer struct {
	next classify.HTTPDoer
	n    *atomic.Int64
}

func (c countingDoer) Do(req *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.Do(req)
}
