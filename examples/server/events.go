package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
)

// maxPageStreams bounds the pages streaming at once (one stream each);
// one client (address) has at most an eighth (httpmw.Streams).
const maxPageStreams = 64

// Each event has pageWriteTimeout to reach the page's socket, and a
// stream ends after pageStreamLifetime (the page's EventSource reconnects
// by itself, retry: 1000): a client that stops reading holds its place at
// most the sum, as httpmw's status streams.
const (
	pageWriteTimeout   = 10 * time.Second
	pageStreamLifetime = 5 * time.Minute
)

// statsEvery is the shortest time between two counter updates on a
// stream: a storm refuses thousands of calls a second.
const statsEvery = 100 * time.Millisecond

// eventView is one document's update on the page's stream.
type eventView struct {
	ID     string             `json:"id"`
	Status httpmw.RetryStatus `json:"status"`
	Result *result            `json:"result,omitempty"`
	// LastFailure is the document's last failed evaluation (documentView).
	LastFailure *failure `json:"last_failure,omitempty"`
	// DoneSeconds is how long a success is kept Done: until then a
	// click would get that result, not a new evaluation, so the page
	// says when Evaluate comes back.
	DoneSeconds float64 `json:"done_seconds,omitempty"`
}

// events streams every document's retry status as server-sent events, so
// the page learns at once, without polling, that a countdown ended, that
// an operator reset a job (retrygate reset, from any process) or that the
// upstream cooled; and the counters (event "stats") as they change, so a
// refusal shows the moment the gate answers it, from any client. One stream for all documents: a browser keeps six
// HTTP/1.1 connections per host, fewer than the documents, so one
// httpmw.StatusHandler stream per document would starve the page's other
// requests.
func (a *app) events(w http.ResponseWriter, r *http.Request) {
	done, ok := a.pageStreams.Open(r)
	if !ok {
		w.Header().Set("Retry-After", "5")
		writeProblem(w, http.StatusServiceUnavailable, "Too many pages are open; reload in a moment.")
		return
	}
	defer done()
	ctx := r.Context()
	type update struct {
		id string
		st gate.Status
	}
	ups := make(chan update)
	for _, d := range catalog {
		ch, err := a.gate.Watch(ctx, docJob(d.ID))
		if err != nil {
			if ctx.Err() != nil {
				return // the browser closed the stream (or the server shuts down): not an outage
			}
			a.logf("GET %s: %v", r.URL.Path, err)
			writeProblem(w, http.StatusServiceUnavailable, "The gate's Redis cannot be reached.")
			return // the request's context ends the watches started
		}
		go func() {
			for st := range ch {
				select {
				case ups <- update{d.ID, st}:
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(pageWriteTimeout))
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("retry: 1000\n\n"))
	_ = rc.Flush()
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	end := time.NewTimer(pageStreamLifetime)
	defer end.Stop()
	changed := a.stats.changes()
	var sendStats <-chan time.Time // armed by a change, at most every statsEvery
	// A click's place in line, from now on: the watches send the state
	// at connect.
	moved := a.places.changes()
	_, seen := a.places.since(^uint64(0))
	id := 0
	for {
		var msg []byte
		select {
		case u := <-ups:
			id++
			doc, _ := findDocument(u.id)
			data, _ := json.Marshal(a.update(doc, u.st))
			msg = append([]byte("id: "+strconv.Itoa(id)+"\nevent: status\ndata: "), data...)
			msg = append(msg, "\n\n"...)
		case <-moved:
			moved = a.places.changes() // before reading: a change from now on wakes us again
			var sts map[string]gate.Status
			sts, seen = a.places.since(seen)
			for doc := range sts { // a click's place in line, or its end
				d, _ := findDocument(doc)
				id++
				data, _ := json.Marshal(a.update(d, sts[doc]))
				msg = append(msg, "id: "+strconv.Itoa(id)+"\nevent: status\ndata: "...)
				msg = append(msg, data...)
				msg = append(msg, "\n\n"...)
			}
			if len(msg) == 0 {
				continue
			}
		case <-changed:
			changed = nil
			if sendStats == nil {
				sendStats = time.After(statsEvery)
			}
			continue
		case <-sendStats:
			sendStats = nil
			changed = a.stats.changes() // before reading: a change from now on wakes us again
			data, _ := json.Marshal(a.stats.view())
			msg = append([]byte("event: stats\ndata: "), data...)
			msg = append(msg, "\n\n"...)
		case <-tick.C:
			msg = []byte(": heartbeat\n\n")
		case <-end.C:
			return // the page reconnects
		case <-ctx.Done():
			return
		}
		_ = rc.SetWriteDeadline(time.Now().Add(pageWriteTimeout))
		if _, err := w.Write(msg); err != nil || rc.Flush() != nil {
			return
		}
	}
}

// update is document d's update with its job's status st: what the stream
// sends on each change and the snapshot sends for every document.
func (a *app) update(d document, st gate.Status) eventView {
	dv := a.view(d)
	v := eventView{ID: d.ID, Status: httpmw.RetryStatusOf(st, nil), Result: dv.Result, LastFailure: dv.LastFailure}
	if st.State == gate.Done {
		v.DoneSeconds = st.TTL.Seconds()
	}
	return v
}

// snapshot answers GET /api/status with every document's update, as the
// stream would send it, in page order: what the page renders its cards
// from at load, and what it polls while its stream is cut or has not
// delivered (a proxy that buffers or blocks server-sent events, a page
// refused a stream beyond maxPageStreams).
func (a *app) snapshot(w http.ResponseWriter, r *http.Request) {
	out := make([]eventView, 0, len(catalog))
	for _, d := range catalog {
		st, err := a.gate.Status(r.Context(), docJob(d.ID))
		if err != nil {
			writeProblem(w, http.StatusServiceUnavailable, "The gate's Redis cannot be reached.")
			return
		}
		out = append(out, a.update(d, st))
	}
	writeJSON(w, http.StatusOK, out)
}
