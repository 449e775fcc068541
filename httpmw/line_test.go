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
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
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

// spendBudget reports, through g, a budget of limit requests with 3 left,
// whole in reset (OpenAI's headers, https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers),
// and takes and holds the two calls it then admits beside its reserve of
// one, returned to be settled.
func spendBudget(t *testing.T, g *gate.Gate, limit, reset string) []*gate.Lease {
	t.Helper()
	ctx := context.Background()
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", limit)
	h.Set("x-ratelimit-remaining-requests", "3")
	h.Set("x-ratelimit-reset-requests", reset)
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
	t.Cleanup(func() {
		for _, l := range ls {
			_ = l.Release(context.Background())
		}
	})
	return ls
}

// linePlaces reads the places in g's upstream's line, decoded as the
// gate decodes them.
func linePlaces(t *testing.T, tg redistest.Target, g *gate.Gate, upstream string) []keyspace.LineMember {
	t.Helper()
	line, _, _, _ := keyspace.Line(gatetest.Prefix(g), upstream)
	ms, err := tg.Client.ZRange(context.Background(), line, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []keyspace.LineMember
	for _, m := range ms {
		e, ok := keyspace.ParseLineMember(m)
		if !ok {
			t.Fatalf("a line member the gate cannot read: %q", m)
		}
		out = append(out, e)
	}
	return out
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
			held := spendBudget(t, g, "60", "57s") // a request a second
			opts := httpmw.Options{
				Priority: func(*http.Request) (gate.Priority, error) { return gate.PriorityInteractive, nil },
				Tenant:   func(r *http.Request) (string, error) { return r.Header.Get("X-Tenant"), nil },
				// acme's plan has twice the share: its turns advance its
				// tag by half a quantum.
				TenantWeight: func(t string) float64 { return map[string]float64{"acme": 2}[t] },
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

			// Its place as the line holds it: class, tenant, weight.
			members := linePlaces(t, tg, g, "openai")
			if len(members) != 1 || members[0].Class != int(gate.PriorityInteractive) || members[0].Tenant != "acme" || members[0].Quantum != 500 {
				t.Fatalf("the line holds %+v, want one interactive caller of acme with weight 2 (quantum 500)", members)
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

			for _, l := range held { // settles: room for the caller in line
				_ = l.Succeed(context.Background())
			}
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

// A live status stream follows its job's place in line, which no settle
// of the job announces: one ahead, then next when the caller ahead has
// its turn, then out of line when its own comes.
func TestStatusEventsFollowThePlaceInLine(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			opts := gate.Options{Prefix: redistest.UniqueKey(t), Upstream: "openai"}
			g := newGate(t, tg.Client, opts)
			other := newGate(t, tg.Client, opts) // the process whose callers wait
			// A request every 10 s: turns come from the settles below.
			held := spendBudget(t, g, "6", "30s")
			srv := httptest.NewServer(router(g, httpmw.Options{}, ok))
			t.Cleanup(srv.Close)
			turns := make(chan *gate.Lease, 2)
			for _, id := range []string{"a", "b"} {
				go func() {
					l, err := other.AcquireWait(ctx, key(id), time.Minute)
					if err == nil {
						turns <- l
					}
				}()
				for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
					if st, _ := g.Status(ctx, key(id)); st.InLine {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("%s never waited in line", id)
					}
				}
			}
			_, events := openStream(t, srv.URL, "b", nil)
			if _, st := nextStatus(t, events, 5*time.Second); !st.InLine || st.Ahead != 1 {
				t.Fatalf("first event: %+v, want in line, one ahead", st)
			}
			// The stream reads the job again every second while it waits;
			// a place that did not change is not sent again. (A loaded
			// machine reads less often: it can only make this pass.)
			quietFor(t, events, 2500*time.Millisecond)
			_ = held[0].Succeed(ctx) // room for one: a's turn
			var a *gate.Lease
			select {
			case a = <-turns:
			case <-time.After(20 * time.Second):
				t.Fatal("no turn after a settle")
			}
			defer func() { _ = a.Release(context.Background()) }()
			if _, st := nextStatus(t, events, 5*time.Second); !st.InLine || st.Ahead != 0 || !strings.HasPrefix(st.Message, "In line: next") {
				t.Fatalf("after the turn ahead: %+v, want in line, next", st)
			}
			_ = held[1].Succeed(ctx) // b's turn
			select {
			case b := <-turns:
				defer func() { _ = b.Release(context.Background()) }()
			case <-time.After(20 * time.Second):
				t.Fatal("no turn for b")
			}
			_, st := nextStatus(t, events, 5*time.Second)
			for st.InLine {
				_, st = nextStatus(t, events, 5*time.Second)
			}
			if st.JobState != "running" {
				t.Fatalf("after its turn: %+v, want running, out of line", st)
			}
		})
	}
}
