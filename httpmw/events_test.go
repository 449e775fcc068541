package httpmw_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// sseEvent is one server-sent event, or a comment line (comment set).
type sseEvent struct {
	id, event, data, comment string
	retry                    string
}

// openStream opens the retry-status event stream of document id and
// returns its events as they come.
func openStream(t *testing.T, base, id string, header http.Header) (*http.Response, <-chan sseEvent) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/documents/"+id+"/retry-status", nil)
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	out := make(chan sseEvent, 64)
	if resp.StatusCode != http.StatusOK {
		close(out)
		return resp, out
	}
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				out <- ev
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				ev.comment = line
			default:
				k, v, _ := strings.Cut(line, ": ")
				switch k {
				case "id":
					ev.id = v
				case "event":
					ev.event = v
				case "data":
					ev.data = v
				case "retry":
					ev.retry = v
				}
			}
		}
	}()
	return resp, out
}

// nextEvent returns the next event within d (comments skipped), or false
// if none comes.
func nextEvent(t *testing.T, events <-chan sseEvent, d time.Duration) (sseEvent, bool) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("stream ended")
			}
			if ev.comment != "" && ev.event == "" {
				continue
			}
			return ev, true
		case <-timer.C:
			return sseEvent{}, false
		}
	}
}

// nextStatus returns the next status event within d (comments skipped).
func nextStatus(t *testing.T, events <-chan sseEvent, d time.Duration) (sseEvent, httpmw.RetryStatus) {
	t.Helper()
	ev, ok := nextEvent(t, events, d)
	if !ok {
		t.Fatalf("no status event within %v", d)
	}
	if ev.event != "status" {
		t.Fatalf("event %+v, want a status event", ev)
	}
	noLeak(t, ev.data)
	var st httpmw.RetryStatus
	if err := json.Unmarshal([]byte(ev.data), &st); err != nil {
		t.Fatalf("event data %q: %v", ev.data, err)
	}
	return ev, st
}

// quietFor fails t if an event comes within d; comments (the heartbeat)
// may.
func quietFor(t *testing.T, events <-chan sseEvent, d time.Duration) {
	t.Helper()
	if ev, ok := nextEvent(t, events, d); ok {
		t.Fatalf("event %q (%s) with nothing changed, want none", ev.event, ev.data)
	}
}

// expectState reads status events until one has state, within d of now.
func expectState(t *testing.T, events <-chan sseEvent, state string, d time.Duration) (sseEvent, httpmw.RetryStatus) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ev, st := nextStatus(t, events, time.Until(deadline)+time.Millisecond)
		if st.JobState == state {
			return ev, st
		}
	}
}

// How long a test waits for a change made by another process to reach
// the stream. A push takes a round trip or two (well under 100 ms on an
// idle machine); nothing else would deliver these events before the hour
// an idle Watch sleeps, so the bound only has to survive a loaded machine.
const pushWithin = 2 * time.Second

// TestStatusEvents: a page watching a job's retry status as server-sent
// events sees, pushed from another process (another gate on the
// same Redis), the job fail into a cooldown, come out of it, be
// reset from the CLI after a permanent failure, and its upstream
// cool and recover; with a heartbeat when idle and no upstream text.
func TestStatusEvents(t *testing.T) {
	t.Cleanup(httpmw.SetHeartbeat(30 * time.Millisecond))
	for _, tg := range redistest.RealTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			opts := gate.Options{Prefix: prefix, Lease: time.Minute, Cooldown: 300 * time.Millisecond, Upstream: "llm"}
			g := newGate(t, tg.Client, opts)
			other := newGate(t, tg.Client, opts) // the other process, or the CLI
			srv := httptest.NewServer(router(g, httpmw.Options{}, ok))
			t.Cleanup(srv.Close)
			ctx := context.Background()
			job := key("7")

			resp, events := openStream(t, srv.URL, "7", nil)
			if exp, got := "text/event-stream", resp.Header.Get("Content-Type"); exp != got {
				t.Fatalf("Content-Type: exp %q, got %q", exp, got)
			}
			ev, st := nextStatus(t, events, 5*time.Second)
			if st.JobState != "ready" || ev.id != "1" || ev.retry == "" {
				t.Fatalf("first event %+v %+v, want ready, id 1 and a retry field", ev, st)
			}
			// Heartbeats while nothing happens.
			for deadline := time.Now().Add(5 * time.Second); ; {
				e := <-events
				if e.comment != "" {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("no heartbeat")
				}
			}

			l, err := other.Acquire(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			// An acquire publishes nothing (the success path pays one
			// publish, in the settle): the failure is the next event.
			start := time.Now()
			if err := l.Fail(ctx, errBoom); err != nil {
				t.Fatal(err)
			}
			_, st = expectState(t, events, "cooling_down", pushWithin)
			if st.Attempts != 1 || st.RetryAfterSeconds != 1 {
				t.Fatalf("cooling event %+v", st)
			}
			// The cooldown's end: no event from Redis, a local timer.
			expectState(t, events, "ready", time.Until(start.Add(opts.Cooldown))+pushWithin+50*time.Millisecond)

			// A permanent failure, then an operator's reset.
			l, err = other.Acquire(ctx, job)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Fail(ctx, classify.Permanent(errBoom)); err != nil {
				t.Fatal(err)
			}
			expectState(t, events, "failed", time.Second)
			start = time.Now()
			if err := other.Reset(ctx, job); err != nil {
				t.Fatal(err)
			}
			_, st = expectState(t, events, "ready", pushWithin)
			if st.Attempts != 0 {
				t.Fatalf("after reset: %+v", st)
			}

			// Another job's provider-wide failure cools the upstream: this job
			// shows upstream_cooling, and ready again after ResetUpstreams.
			l, err = other.Acquire(ctx, key("8"))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Fail(ctx, classify.WithHeader(rateLimited{}, http.Header{"Retry-After": {"30"}})); err != nil {
				t.Fatal(err)
			}
			_, st = expectState(t, events, "upstream_cooling", pushWithin)
			if st.RetryAfterSeconds < 25 {
				t.Fatalf("upstream event %+v", st)
			}
			if err := other.ResetUpstreams(ctx); err != nil {
				t.Fatal(err)
			}
			expectState(t, events, "ready", pushWithin)
		})
	}
}

// TestStatusEventsReconnect: a reconnection with Last-Event-ID gets the
// current state at once, with ids continuing after the last one seen.
func TestStatusEventsReconnect(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{Lease: time.Minute})
	srv := httptest.NewServer(router(g, httpmw.Options{}, ok))
	t.Cleanup(srv.Close)
	if _, err := g.Acquire(context.Background(), key("7")); err != nil {
		t.Fatal(err)
	}
	_, events := openStream(t, srv.URL, "7", http.Header{"Last-Event-Id": {"41"}})
	ev, st := nextStatus(t, events, 5*time.Second)
	if ev.id != "42" || st.JobState != "running" {
		t.Fatalf("after reconnect: id %q state %q, want 42 running", ev.id, st.JobState)
	}
	for _, bad := range []string{"-5", "x", "99999999999999999999999"} {
		_, events := openStream(t, srv.URL, "7", http.Header{"Last-Event-Id": {bad}})
		if ev, _ := nextStatus(t, events, 5*time.Second); ev.id != "1" {
			t.Fatalf("Last-Event-ID %q: first id %q, want 1", bad, ev.id)
		}
	}
}

// TestStatusEventsLimit: streams beyond MaxStreams get the 503 problem,
// and a closed stream frees its place; MaxStreams < 0 answers JSON.
func TestStatusEventsLimit(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{})
	srv := httptest.NewServer(router(g, httpmw.Options{MaxStreams: 1}, ok))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/documents/7/retry-status", nil)
	req.Header.Set("Accept", "text/event-stream")
	first, err := http.DefaultClient.Do(req)
	if err != nil || first.StatusCode != http.StatusOK {
		t.Fatalf("first stream: %v %v", first, err)
	}
	resp, _ := openStream(t, srv.URL, "7", nil)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("second stream: %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	cancel()
	_ = first.Body.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, _ := openStream(t, srv.URL, "7", nil)
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the closed stream's place was not freed")
		}
		time.Sleep(10 * time.Millisecond)
	}

	off := httptest.NewServer(router(g, httpmw.Options{MaxStreams: -1}, ok))
	t.Cleanup(off.Close)
	resp, _ = openStream(t, off.URL, "7", nil)
	if exp, got := "application/json", resp.Header.Get("Content-Type"); resp.StatusCode != 200 || exp != got {
		t.Fatalf("MaxStreams -1: %d %q, want the JSON answer", resp.StatusCode, got)
	}

}

// rateLimited is a provider's 429 (classify.StatusError): provider-wide
// under classify.Default, so it cools the gate's upstream.
type rateLimited struct{}

func (rateLimited) Error() string       { return "429 Too Many Requests" }
func (rateLimited) HTTPStatusCode() int { return 429 }
