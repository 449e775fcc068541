package main

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
)

// placeEvery is how often the demo reads the place of a click waiting in
// line: the line tells the process whose caller gets a turn, not the
// pages watching the document, so the demo follows each waiting click's
// place and pushes it to every page's stream.
const placeEvery = 250 * time.Millisecond

// places are the statuses of documents whose click waits for its turn,
// as they change. It is safe for concurrent use.
type places struct {
	mu      sync.Mutex
	seq     uint64
	latest  map[string]placed // by document id
	changed chan struct{}
}

// placed is a document's status and when (places.seq) it was set.
type placed struct {
	st  gate.Status
	seq uint64
}

func newPlaces() *places { return &places{latest: make(map[string]placed)} }

// set records document id's status, and wakes the streams.
func (p *places) set(id string, st gate.Status) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	p.latest[id] = placed{st, p.seq}
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
}

// changes returns a channel closed at the next set.
func (p *places) changes() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.changed == nil {
		p.changed = make(chan struct{})
	}
	return p.changed
}

// since returns the statuses set after seq, and the newest seq.
func (p *places) since(seq uint64) (map[string]gate.Status, uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]gate.Status{}
	for id, v := range p.latest {
		if v.seq > seq {
			out[id] = v.st
		}
	}
	return out, p.seq
}

// followPlace follows, while a click that may wait (Prefer: wait) is
// answered, its document's place in line, and records each change for
// the streams: the place, then its end.
func (a *app) followPlace(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Prefer") == "" {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			a.follow(ctx, documentOf(r).ID)
		}()
		next.ServeHTTP(w, r)
		cancel()
		<-done
	})
}

// follow reads document id's place every placeEvery until ctx ends.
func (a *app) follow(ctx context.Context, id string) {
	t := time.NewTicker(placeEvery)
	defer t.Stop()
	inLine, ahead := false, -1
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, err := a.gate.Status(ctx, docJob(id))
		if err != nil {
			continue
		}
		now := httpmw.RetryStatusOf(st, nil).InLine
		if now != inLine || now && st.Ahead != ahead {
			inLine, ahead = now, st.Ahead
			a.places.set(id, st)
		}
	}
}
