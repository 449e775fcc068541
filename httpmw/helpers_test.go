package httpmw_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

var errBoom = errors.New("boom")

// newGate builds a gate with a per-test prefix; Cooldown 5m without jitter
// unless set, so Retry-After values are predictable.
func newGate(t *testing.T, rdb gate.Client, opts gate.Options) *gate.Gate {
	t.Helper()
	if opts.Cooldown == 0 {
		opts.Cooldown = 5 * time.Minute
	}
	opts.Backoff.Jitter = -1
	return gatetest.New(t, rdb, opts)
}

// evaluatePattern is the gated route of router.
const evaluatePattern = "/documents/{id}/evaluate"

// router mounts h behind the middleware at POST /documents/{id}/evaluate
// and the StatusHandler at GET /documents/{id}/retry-status, both with
// opts, as the README shows. opts.Job defaults to
// URLParamAs(evaluatePattern, "id").
func router(g *gate.Gate, opts httpmw.Options, h http.HandlerFunc) http.Handler {
	if opts.Job == nil {
		opts.Job = httpmw.URLParamAs(evaluatePattern, "id")
	}
	r := chi.NewRouter()
	r.Route("/documents/{id}", func(r chi.Router) {
		r.With(httpmw.New(g, opts)).Post("/evaluate", h)
		r.Get("/retry-status", httpmw.StatusHandler(g, opts))
	})
	return r
}

// post sends POST target through h.
func post(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, target, nil))
	return rec
}

func get(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
	return rec
}

// problemBody mirrors the problem JSON; pointers tell absent from zero.
type problemBody struct {
	Type              string         `json:"type"`
	Title             string         `json:"title"`
	Status            int            `json:"status"`
	Detail            string         `json:"detail"`
	JobState          *string        `json:"job_state"`
	RetryAfterSeconds *int64         `json:"retry_after_seconds"`
	RetryAt           *string        `json:"retry_at"`
	Ahead             *int           `json:"ahead"`
	Attempts          *int           `json:"attempts"`
	Reason            *string        `json:"reason"`
	StatusURL         *string        `json:"status_url"`
	Upstreams         []httpmw.State `json:"upstreams"`
}

// decodeProblem checks the problem+json framing of rec and decodes it.
func decodeProblem(t *testing.T, rec *httptest.ResponseRecorder) problemBody {
	t.Helper()
	if exp, got := "application/problem+json", rec.Header().Get("Content-Type"); exp != got {
		t.Fatalf("Content-Type: exp %q, got %q (body %s)", exp, got, rec.Body)
	}
	if exp, got := "no-store", rec.Header().Get("Cache-Control"); exp != got {
		t.Errorf("Cache-Control: exp %q, got %q", exp, got)
	}
	checkLength(t, rec)
	var p problemBody
	dec := json.NewDecoder(strings.NewReader(rec.Body.String()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		t.Fatalf("decode problem %q: %v", rec.Body, err)
	}
	if exp, got := rec.Code, p.Status; exp != got {
		t.Errorf("status member: exp %d, got %d", exp, got)
	}
	if p.Type == "" || p.Title == "" || p.Detail == "" {
		t.Errorf("problem lacks type, title or detail: %+v", p)
	}
	return p
}

// checkLength fails unless Content-Length is the body's length: a client
// reading that many bytes must get the whole body, no more.
func checkLength(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	if exp, got := strconv.Itoa(rec.Body.Len()), rec.Header().Get("Content-Length"); exp != got {
		t.Errorf("Content-Length: exp %s (the body's length), got %q", exp, got)
	}
}

func str(p *string) string {
	if p == nil {
		return "<absent>"
	}
	return *p
}

// noLeak fails if a body carries internals: Redis or upstream error text,
// addresses, stacks.
func noLeak(t *testing.T, body string) {
	t.Helper()
	for _, bad := range []string{"redis", "ERR", "dial", "127.0.0.1", "refused", "boom", "secret",
		"goroutine", ".go:", "exploded", "gate:", "httpmw:"} {
		if strings.Contains(body, bad) {
			t.Errorf("body leaks %q: %s", bad, body)
		}
	}
}

// counter counts handler runs.
type counter struct{ n atomic.Int64 }

func (c *counter) wrap(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c.n.Add(1)
		h(w, r)
	}
}

func ok(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "evaluated") }

// status reads a job's state.
func status(t *testing.T, g *gate.Gate, job string) gate.Status {
	t.Helper()
	st, err := g.Status(context.Background(), job)
	if err != nil {
		t.Fatalf("Status(%q): %v", job, err)
	}
	return st
}

// key is the job key URLParam("id") gives the evaluate route for id.
func key(id string) string { return evaluatePattern + " " + id }

// waitReady polls until job is Ready: FastForward on miniredis, real time
// with a deadline elsewhere.
func waitReady(t *testing.T, tg redistest.Target, g *gate.Gate, job string, within time.Duration) {
	t.Helper()
	if tg.FastForward != nil {
		tg.FastForward(within)
	}
	deadline := time.Now().Add(within + 3*time.Second)
	for {
		st := status(t, g, job)
		if st.State == gate.Ready {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %q still %v after %v", job, st.State, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var errRedisSecret = errors.New("ERR redis secret internals at 10.0.0.7:6379")

// flaky fails every script while Down is set, with an error text that
// must never reach a client.
func flaky(rdb gate.Client) *gatetest.Flaky {
	return &gatetest.Flaky{Client: rdb, Err: errRedisSecret}
}

// closedPortClient is a client whose server is gone.
func closedPortClient(t *testing.T) *redis.Client {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Settle outcomes, as the events record them.
const (
	evSucceeded    = "succeeded"
	evReleased     = "released"
	evCooledDown   = "cooled_down"
	evMarkedFailed = "marked_failed"
)

// events records the outcome of the gate's settle events by job.
type events struct {
	mu   sync.Mutex
	last map[string]string
}

func (e *events) Observe(_ context.Context, ev gate.Event) {
	if ev.Kind != gate.EventSettled || ev.Err != nil {
		return
	}
	out := evSucceeded
	switch {
	case ev.State == gate.CoolingDown:
		out = evCooledDown
	case ev.State == gate.Failed:
		out = evMarkedFailed
	case ev.State == gate.Ready && ev.Reason != "":
		out = evReleased
	}
	e.mu.Lock()
	if e.last == nil {
		e.last = map[string]string{}
	}
	e.last[ev.Job] = out
	e.mu.Unlock()
}

func (e *events) of(job string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last[job]
}
