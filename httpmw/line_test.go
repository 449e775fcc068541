package httpmw_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// acquires keeps the gate's acquire and refusal events.
type acquires struct {
	mu     sync.Mutex
	events []gate.Event
}

func (a *acquires) Observe(_ context.Context, e gate.Event) {
	if e.Kind == gate.EventAcquired || e.Kind == gate.EventRefused {
		a.mu.Lock()
		a.events = append(a.events, e)
		a.mu.Unlock()
	}
}

func (a *acquires) of(job string) []gate.Event {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []gate.Event
	for _, e := range a.events {
		if strings.HasSuffix(e.Job, job) {
			out = append(out, e)
		}
	}
	return out
}

// spendBudget reports, through g, a budget of 60 requests a minute with 3
// left (OpenAI's headers, https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers):
// a request refills in a second, and the two calls it then admits beside
// its reserve of one are taken and held. The returned func settles them.
func spendBudget(t *testing.T, g *gate.Gate) (release func()) {
	t.Helper()
	ctx := context.Background()
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", "60")
	h.Set("x-ratelimit-remaining-requests", "3")
	h.Set("x-ratelimit-reset-requests", "57s")
	if err := g.Do(ctx, "report", func(_ context.Context, l *gate.Lease) error {
		b, _ := classify.ParseBudget(h, time.Now())
		l.ObserveBudget(b)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var ls []*gate.Lease
	for _, job := range []string{"held-1", "held-2"} {
		l, err := g.Acquire(ctx, job)
		if err != nil {
			t.Fatalf("%s with room in the budget: %v", job, err)
		}
		ls = append(ls, l)
	}
	return func() {
		for _, l := range ls {
			_ = l.Succeed(ctx)
		}
	}
}

// A request whose upstream's budget is short waits for its turn in line
// with Prefer: wait, its class and tenant from Options.Priority and
// Tenant; its status shows the place ("In line: next, about 1 s.", on the
// JSON status and so on every event of the stream); a request whose wait
// its turn cannot meet is refused at once with ahead and the expected
// wait; the turn comes with a settle, and the request runs.
func TestPreferWaitTakesAPlaceInLine(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			rec := &acquires{}
			g := newGate(t, tg.Client, gate.Options{Upstream: "openai", Observer: rec})
			release := spendBudget(t, g)
			opts := httpmw.Options{
				Priority: func(*http.Request) (gate.Priority, error) { return gate.PriorityInteractive, nil },
				Tenant:   func(r *http.Request) (string, error) { return r.Header.Get("X-Tenant"), nil },
			}
			ran := make(chan string, 2)
			h := router(g, opts, func(w http.ResponseWriter, r *http.Request) {
				ran <- r.URL.Path
				w.WriteHeader(http.StatusOK)
			})
			first := make(chan *httptest.ResponseRecorder, 1)
			go func() {
				req := httptest.NewRequest(http.MethodPost, "/documents/a/evaluate", nil)
				req.Header.Set("Prefer", "wait=30") // capped by MaxWait: 10 s
				req.Header.Set("X-Tenant", "acme")
				rr := httptest.NewRecorder()
				h.ServeHTTP(rr, req)
				first <- rr
			}()

			// Its place, from the status route.
			var st httpmw.RetryStatus
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
				rr := get(t, h, "/documents/a/retry-status")
				if err := json.Unmarshal(rr.Body.Bytes(), &st); err != nil {
					t.Fatalf("%v: %s", err, rr.Body)
				}
				if st.InLine {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the request never showed in line: %+v", st)
				}
			}
			// One request's refill, about a second, rounded up.
			if st.Ahead != 0 || st.RetryAfterSeconds < 1 || st.RetryAfterSeconds > 2 || st.JobState != "ready" ||
				st.Message != "In line: next, about "+strconv.FormatInt(st.RetryAfterSeconds, 10)+" s." {
				t.Fatalf("the status of the request in line: %+v, want next in line, about 1 s", st)
			}

			// One more behind it with a second to wait: its turn is 2 s away.
			req := httptest.NewRequest(http.MethodPost, "/documents/b/evaluate", nil)
			req.Header.Set("Prefer", "wait=1")
			rr := httptest.NewRecorder()
			h.ServeHTTP(rr, req)
			if rr.Code != http.StatusServiceUnavailable {
				t.Fatalf("a 1 s wait behind one caller at a request a second: %d %s, want 503", rr.Code, rr.Body)
			}
			p := decodeProblem(t, rr)
			if p.Ahead == nil || *p.Ahead != 1 || p.RetryAfterSeconds == nil || *p.RetryAfterSeconds < 2 || *p.RetryAfterSeconds > 3 ||
				rr.Header().Get("Retry-After") != strconv.FormatInt(*p.RetryAfterSeconds, 10) || !strings.HasPrefix(p.Detail, "1 caller is ahead of this one in line.") {
				t.Fatalf("its refusal: %s (Retry-After %q), want ahead 1 and 2 s", rr.Body, rr.Header().Get("Retry-After"))
			}

			release() // a settle: room for the caller in line
			var got *httptest.ResponseRecorder
			select {
			case got = <-first:
			case <-time.After(20 * time.Second):
				t.Fatal("the request in line was not given its turn")
			}
			if got.Code != http.StatusOK || got.Header().Get("Preference-Applied") != "wait=10" {
				t.Fatalf("the request in line: %d %s (Preference-Applied %q), want it run", got.Code, got.Body, got.Header().Get("Preference-Applied"))
			}
			if p := <-ran; p != "/documents/a/evaluate" {
				t.Fatalf("ran %s", p)
			}
			es := rec.of(" a")
			if len(es) == 0 || es[len(es)-1].Kind != gate.EventAcquired {
				t.Fatalf("events of the request in line: %+v", es)
			}
			if e := es[len(es)-1]; e.Priority != gate.PriorityInteractive || e.Tenant != "acme" || e.Waited <= 0 {
				t.Fatalf("its acquire: %+v, want class interactive, tenant acme and the time it waited", e)
			}
		})
	}
}
