package main

import (
	"sync"
	"time"
)

// result is a document's last successful evaluation.
type result struct {
	evaluation
	EvaluatedAt time.Time `json:"evaluated_at"`
	// Fence is the gate's fencing token of the call that produced it.
	Fence int64 `json:"fence"`
	// Via names the backup upstream that produced it, when the first one
	// was cooling or paused; empty for the first.
	Via string `json:"via,omitempty"`
}

// results keeps the last result per document in memory. Safe for
// concurrent use.
type results struct {
	mu sync.Mutex
	m  map[string]result
}

func newResults() *results { return &results{m: make(map[string]result)} }

// put stores r unless a result with a higher fence is already there: a
// stale call that lost its lease must not overwrite newer work.
func (s *results) put(id string, r result) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.m[id]; ok && cur.Fence > r.Fence {
		return false
	}
	s.m[id] = r
	return true
}

func (s *results) get(id string) (result, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[id]
	return r, ok
}
