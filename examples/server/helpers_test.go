package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/internal/testkit/syncbuf"
)

// testConfig is the demo's configuration with short timings, on a free
// port, with the embedded Redis and the fake upstream. Tests wait for
// what they expect by polling with generous deadlines: a loaded machine
// makes them slower, never wrong.
func testConfig() config {
	return config{
		Addr:             "127.0.0.1:0",
		Model:            defaultModel,
		Cooldown:         400 * time.Millisecond,
		MaxCooldown:      time.Minute,
		Lease:            900 * time.Millisecond, // renewed every 300ms: a loaded machine's stalls do not lose it
		MaxAttempts:      3,
		DoneTTL:          time.Second,
		UpstreamCooldown: time.Second,
		UpstreamPause:    time.Second,
		RateLimitHint:    time.Second,
		UpstreamHint:     1500 * time.Millisecond,
		SlowCall:         3 * time.Second, // long enough to be seen running on a loaded machine
		ShutdownTimeout:  5 * time.Second,
	}
}

// server is a running demo.
type server struct {
	base string
	out  *syncbuf.Buffer
	stop func() error // cancels run and returns its error
}

// startServer runs the demo until the test ends.
func startServer(t *testing.T, cfg config) *server {
	t.Helper()
	ready := make(chan string, 1)
	cfg.ready = func(base string) { ready <- base }
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncbuf.Buffer{}
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, out) }()
	s := &server{out: out}
	var once bool
	var runErr error
	s.stop = func() error {
		if !once {
			once = true
			cancel()
			runErr = <-done
		}
		return runErr
	}
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("run: %v", err)
		}
	})
	select {
	case s.base = <-ready:
	case err := <-done:
		t.Fatalf("run ended before it was ready: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("server not ready after 10s")
	}
	return s
}

// testClient opens a connection per request: connections a keep-alive
// client dials but never uses would hold the server's graceful shutdown.
var testClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 20 * time.Second}

// reply is a decoded response.
type reply struct {
	code   int
	header http.Header
	body   map[string]any
	raw    string
}

func (s *server) do(t *testing.T, method, path string) reply {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := reply{code: resp.StatusCode, header: resp.Header, raw: string(raw)}
	if strings.Contains(resp.Header.Get("Content-Type"), "json") && len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &r.body); err != nil {
			t.Fatalf("%s %s: bad JSON %q: %v", method, path, raw, err)
		}
	}
	return r
}

func (s *server) evaluate(t *testing.T, id string) reply {
	t.Helper()
	return s.do(t, http.MethodPost, "/documents/"+id+"/evaluate")
}

func (s *server) status(t *testing.T, id string) reply {
	t.Helper()
	r := s.do(t, http.MethodGet, "/documents/"+id+"/retry-status")
	if r.code != http.StatusOK {
		t.Fatalf("retry-status of %s: %d %s", id, r.code, r.raw)
	}
	return r
}

// stats returns GET /api/stats.
func (s *server) stats(t *testing.T) statsView {
	t.Helper()
	r := s.do(t, http.MethodGet, "/api/stats")
	var v statsView
	if err := json.Unmarshal([]byte(r.raw), &v); err != nil {
		t.Fatalf("stats %q: %v", r.raw, err)
	}
	return v
}

// waitState polls a document's retry-status until its job_state is want.
func (s *server) waitState(t *testing.T, id, want string, within time.Duration) reply {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		r := s.status(t, id)
		if r.body["job_state"] == want {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: job_state %v after %v, want %q", id, r.body["job_state"], within, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
