package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// streamEvent is one server-sent event of GET /api/events.
type streamEvent struct {
	name string
	data string
}

// openStream reads GET /api/events into a channel until the test ends.
func openStream(t *testing.T, s *server) <-chan streamEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/api/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	out := make(chan streamEvent, 256)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(resp.Body)
		var ev streamEvent
		for sc.Scan() {
			switch line := sc.Text(); {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			case line == "" && ev.name != "":
				out <- ev
				ev = streamEvent{}
			}
		}
	}()
	return out
}

// waitEvent returns the first event for which ok is true.
func waitEvent(t *testing.T, events <-chan streamEvent, within time.Duration, what string, ok func(streamEvent) bool) streamEvent {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case ev, open := <-events:
			if !open {
				t.Fatalf("%s: the stream ended", what)
			}
			if ok(ev) {
				return ev
			}
		case <-deadline:
			t.Fatalf("%s: no such event within %v", what, within)
		}
	}
}

// TestStreamPushesCountersFailuresAndDone: the page's stream carries the
// counters as they change (a refusal by another client moved nothing on
// the page), a document's last failure after its cooldown ended, and how
// long a success is kept Done.
func TestStreamPushesCountersFailuresAndDone(t *testing.T) {
	cfg := testConfig()
	cfg.DoneTTL = 6 * time.Second
	s := startServer(t, cfg)
	events := openStream(t, s)

	s.evaluate(t, "supplier-contract") // the model's 429: cooling down
	s.evaluate(t, "supplier-contract") // refused
	// Pushed on the change, well before the stream's 15 s heartbeat.
	waitEvent(t, events, 10*time.Second, "the refusal's counters", func(ev streamEvent) bool {
		var c countersView
		return ev.name == "stats" && json.Unmarshal([]byte(ev.data), &c) == nil && c.Refused == 1 && c.UpstreamCalls == 1
	})

	// The cooldown ends: the job is ready, its failure is still told.
	ev := waitEvent(t, events, 10*time.Second, "the end of the cooldown", func(ev streamEvent) bool {
		return ev.name == "status" && strings.Contains(ev.data, `"id":"supplier-contract"`) && strings.Contains(ev.data, `"job_state":"ready"`)
	})
	var v eventView
	if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
		t.Fatal(err)
	}
	if v.LastFailure == nil || v.LastFailure.Reason != "rate_limited" {
		t.Errorf("ready after a cooldown: last_failure %+v, want rate_limited", v.LastFailure)
	}
	var docs []documentView
	if err := json.Unmarshal([]byte(s.do(t, http.MethodGet, "/api/documents").raw), &docs); err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		if (d.ID == "supplier-contract") != (d.LastFailure != nil) {
			t.Errorf("/api/documents: %s has last_failure %+v", d.ID, d.LastFailure)
		}
	}

	// A success is kept Done: the stream says for how long.
	if r := s.evaluate(t, "welcome-letter"); r.code != http.StatusOK {
		t.Fatalf("welcome-letter: %d", r.code)
	}
	ev = waitEvent(t, events, 10*time.Second, "the done mark", func(ev streamEvent) bool {
		return ev.name == "status" && strings.Contains(ev.data, `"id":"welcome-letter"`) && strings.Contains(ev.data, `"job_state":"done"`)
	})
	v = eventView{}
	if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
		t.Fatal(err)
	}
	if v.DoneSeconds < 3 || v.DoneSeconds > 6 || v.LastFailure != nil {
		t.Errorf("done: done_seconds %v (want at most the 6 s DoneTTL), last_failure %+v", v.DoneSeconds, v.LastFailure)
	}
}

// TestStatusIsTheStreamInOneBody: GET /api/status, what the page reads
// without its stream, holds every document's update in page order, the
// same as the stream's update at connect: a failed job is failed, a
// cooling one counts down, a done one says how long it is held.
func TestStatusIsTheStreamInOneBody(t *testing.T) {
	cfg := testConfig()
	cfg.RateLimitHint, cfg.DoneTTL = time.Minute, time.Minute // outlast the test
	s := startServer(t, cfg)
	for id, code := range map[string]int{"patient-history": 422, "supplier-contract": 429, "welcome-letter": 200} {
		if r := s.evaluate(t, id); r.code != code {
			t.Fatalf("%s: %d %s, want %d", id, r.code, r.raw, code)
		}
	}
	r := s.do(t, http.MethodGet, "/api/status")
	var got []eventView
	if err := json.Unmarshal([]byte(r.raw), &got); err != nil || r.code != http.StatusOK {
		t.Fatalf("/api/status: %d %s: %v", r.code, r.raw, err)
	}
	if exp := len(catalog); len(got) != exp {
		t.Fatalf("/api/status: %d documents, want %d", len(got), exp)
	}
	events := openStream(t, s)
	streamed := map[string]eventView{}
	for len(streamed) < len(catalog) {
		ev := waitEvent(t, events, 10*time.Second, "every document's state at connect", func(ev streamEvent) bool { return ev.name == "status" })
		var v eventView
		if err := json.Unmarshal([]byte(ev.data), &v); err != nil {
			t.Fatal(err)
		}
		streamed[v.ID] = v
	}
	for i, v := range got {
		if v.ID != catalog[i].ID {
			t.Errorf("/api/status[%d] is %s, want %s (page order)", i, v.ID, catalog[i].ID)
		}
		w := streamed[v.ID]
		if v.Status.JobState != w.Status.JobState || v.Status.Reason != w.Status.Reason || (v.Result == nil) != (w.Result == nil) ||
			(v.LastFailure == nil) != (w.LastFailure == nil) || (v.DoneSeconds == 0) != (w.DoneSeconds == 0) {
			t.Errorf("%s: /api/status %+v, the stream %+v", v.ID, v, w)
		}
	}
	for id, exp := range map[string]string{"patient-history": "failed", "supplier-contract": "cooling_down", "welcome-letter": "done"} {
		if v := streamed[id]; v.Status.JobState != exp {
			t.Errorf("%s: %q, want %q", id, v.Status.JobState, exp)
		}
	}
	if v := got[slices.IndexFunc(got, func(v eventView) bool { return v.ID == "supplier-contract" })]; v.Status.RetryAfterSeconds < 30 {
		t.Errorf("cooling: retry_after_seconds %d, want the minute's hint", v.Status.RetryAfterSeconds)
	}
	if v := got[0]; v.ID != "welcome-letter" || v.DoneSeconds < 30 {
		t.Errorf("done: %+v, want done_seconds from the minute's DoneTTL", v)
	}
}

// TestPageStreamsSharedAmongClients: 300 page streams opened from one
// address get an eighth of maxPageStreams and 503 beyond; a page from
// another address still gets its stream and its first event.
func TestPageStreamsSharedAmongClients(t *testing.T) {
	s := startServer(t, testConfig())
	addr := strings.TrimPrefix(s.base, "http://")
	open := func(local net.Addr) (*bufio.Reader, int) {
		t.Helper()
		c, err := (&net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}).Dial("tcp", addr)
		if err != nil && local != nil {
			t.Skipf("cannot dial from %v (only Linux routes all of 127/8 to lo): %v", local, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		_, _ = io.WriteString(c, "GET /api/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("status line: %v", err)
		}
		code, _ := strconv.Atoi(strings.Fields(line + " 0 0")[1])
		return br, code
	}
	codes := map[int]int{}
	for range 300 {
		_, code := open(nil)
		codes[code]++
	}
	if exp := map[int]int{200: maxPageStreams / 8, 503: 300 - maxPageStreams/8}; fmt.Sprint(codes) != fmt.Sprint(exp) {
		t.Fatalf("300 page streams from one address: %v, want %v", codes, exp)
	}
	br, code := open(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)})
	if code != http.StatusOK {
		t.Fatalf("a page from another address: %d, want its stream", code)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("a page from another address: no event (%v)", err)
		}
		if strings.HasPrefix(line, "data: ") {
			return
		}
	}
}
