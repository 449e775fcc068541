package httpmw_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// TestOutcome: what the handler did decides what the gate records. A Fail
// wins over the status; otherwise the status maps as the package doc says,
// and a Retry-After the handler set is the cooldown's hint.
func TestOutcome(t *testing.T) {
	const cooldown = 5 * time.Minute
	httpDate := time.Now().Add(30 * time.Minute).UTC().Format(http.TimeFormat)
	cases := []struct {
		name    string
		handler http.HandlerFunc
		// exp is the job's state after the request; wait the cooldown
		// range; event the settle the gate saw.
		expCode   int
		expState  gate.State
		expReason string
		wait      [2]time.Duration
		event     string
	}{
		{"200", ok, 200, gate.Ready, "", [2]time.Duration{}, evSucceeded},
		{"nothing written", func(http.ResponseWriter, *http.Request) {}, 200, gate.Ready, "", [2]time.Duration{}, evSucceeded},
		{"204", status204, 204, gate.Ready, "", [2]time.Duration{}, evSucceeded},
		{"303", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusSeeOther) },
			303, gate.Ready, "", [2]time.Duration{}, evSucceeded},
		{"103 then 200", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusOK)
		}, 0, gate.Ready, "", [2]time.Duration{}, evSucceeded}, // the recorder keeps the 103
		{"103 then 500", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusEarlyHints) // informational: the 500 is the answer
			w.WriteHeader(http.StatusInternalServerError)
		}, 0, gate.CoolingDown, "upstream_5xx", [2]time.Duration{cooldown - time.Second, cooldown}, evCooledDown},
		{"503 then Flush", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.(http.Flusher).Flush() // flushing sends the 503, not a 200
		}, 503, gate.CoolingDown, "overloaded", [2]time.Duration{cooldown - time.Second, cooldown}, evCooledDown},
		{"500", code(500, ""), 500, gate.CoolingDown, "upstream_5xx", [2]time.Duration{cooldown - time.Second, cooldown}, evCooledDown},
		{"501 is transient too", code(501, ""), 501, gate.CoolingDown, "upstream_5xx", [2]time.Duration{cooldown - time.Second, cooldown}, evCooledDown},
		{"502 Retry-After seconds", code(502, "1200"), 502, gate.CoolingDown, "upstream_5xx", [2]time.Duration{20*time.Minute - time.Second, 20 * time.Minute}, evCooledDown},
		{"504 Retry-After HTTP-date", code(504, httpDate), 504, gate.CoolingDown, "upstream_5xx", [2]time.Duration{29 * time.Minute, 30 * time.Minute}, evCooledDown},
		{"503 Retry-After", code(503, "900"), 503, gate.CoolingDown, "overloaded", [2]time.Duration{15*time.Minute - time.Second, 15 * time.Minute}, evCooledDown},
		{"429 Retry-After", code(429, "600"), 429, gate.CoolingDown, "rate_limited", [2]time.Duration{10*time.Minute - time.Second, 10 * time.Minute}, evCooledDown},
		// The provider said when: its wait, even below the gate's Cooldown.
		{"429 Retry-After shorter than Cooldown", code(429, "3"), 429, gate.CoolingDown, "rate_limited", [2]time.Duration{2 * time.Second, 3 * time.Second}, evCooledDown},
		{"500 garbage Retry-After", code(500, "soon"), 500, gate.CoolingDown, "upstream_5xx", [2]time.Duration{cooldown - time.Second, cooldown}, evCooledDown},
		{"400 releases", code(400, ""), 400, gate.Ready, "", [2]time.Duration{}, evReleased},
		{"404 releases", code(404, ""), 404, gate.Ready, "", [2]time.Duration{}, evReleased},
		{"409 releases", code(409, ""), 409, gate.Ready, "", [2]time.Duration{}, evReleased},
		{"422 releases", code(422, ""), 422, gate.Ready, "", [2]time.Duration{}, evReleased},
		{"Fail wins over 200", func(w http.ResponseWriter, r *http.Request) {
			httpmw.Fail(r, classify.Permanent(errBoom))
			ok(w, r)
		}, 200, gate.Failed, "permanent", [2]time.Duration{}, evMarkedFailed},
		{"Fail wins over 400", func(w http.ResponseWriter, r *http.Request) {
			httpmw.Fail(r, errBoom)
			w.WriteHeader(400)
		}, 400, gate.CoolingDown, "unknown", [2]time.Duration{cooldown - time.Second, cooldown}, evCooledDown},
		{"Fail goes through the classifier", func(w http.ResponseWriter, r *http.Request) {
			httpmw.Fail(r, &classify.HTTPError{StatusCode: 400, Body: []byte(`{"error":{"type":"invalid_request_error","code":"context_length_exceeded"}}`)})
			w.WriteHeader(500)
		}, 500, gate.Failed, "context_length_exceeded", [2]time.Duration{}, evMarkedFailed},
		{"first Fail wins", func(w http.ResponseWriter, r *http.Request) {
			httpmw.Fail(r, classify.Permanent(errBoom))
			httpmw.Fail(r, errBoom)
		}, 422, gate.Failed, "permanent", [2]time.Duration{}, evMarkedFailed},
		{"Fail(nil) is ignored", func(w http.ResponseWriter, r *http.Request) {
			if httpmw.Fail(r, nil) {
				http.Error(w, "Fail(nil) reported true", http.StatusTeapot)
			}
		}, 200, gate.Ready, "", [2]time.Duration{}, evSucceeded},
		{"Fail with a cancellation while the client waits is transient", func(w http.ResponseWriter, r *http.Request) {
			httpmw.Fail(r, context.Canceled)
		}, 429, gate.CoolingDown, "canceled", [2]time.Duration{cooldown - time.Second, cooldown}, evCooledDown},
	}
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			var ev events
			g := newGate(t, tg.Client, gate.Options{Cooldown: cooldown, Observer: &ev, UpstreamPolicy: gate.UpstreamPolicy{Off: true}}) // each row its job's outcome
			for i, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					id := "job" + string(rune('a'+i))
					rec := post(t, router(g, httpmw.Options{}, c.handler), "/documents/"+id+"/evaluate")
					if exp, got := c.expCode, rec.Code; exp != 0 && exp != got {
						t.Errorf("response: exp %d, got %d (%s)", exp, got, rec.Body)
					}
					st := status(t, g, key(id))
					if exp, got := c.expState, st.State; exp != got {
						t.Fatalf("state: exp %v, got %v", exp, got)
					}
					if exp, got := c.expReason, st.Reason; exp != got {
						t.Errorf("reason: exp %q, got %q", exp, got)
					}
					if c.wait != [2]time.Duration{} && (st.RetryAfter < c.wait[0] || st.RetryAfter > c.wait[1]) {
						t.Errorf("cooldown: exp in %v, got %v", c.wait, st.RetryAfter)
					}
					if exp, got := c.event, ev.of(key(id)); exp != got {
						t.Errorf("settle: exp %v, got %v", exp, got)
					}
				})
			}
		})
	}
}

func status204(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }

// code answers status with an optional Retry-After.
func code(status int, retryAfter string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		http.Error(w, "handler said no", status)
	}
}

// TestReleaseKeepsAttempts: a 4xx between failures neither resets nor
// counts an attempt, and a success resets the count. A user cannot wipe a
// job's history with bad requests.
func TestReleaseKeepsAttempts(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			const cooldown = 40 * time.Millisecond
			g := newGate(t, tg.Client, gate.Options{Cooldown: cooldown})
			next := make(chan int, 1)
			h := router(g, httpmw.Options{}, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(<-next) })
			step := func(c int) {
				t.Helper()
				next <- c
				if exp, got := c, post(t, h, "/documents/1/evaluate").Code; exp != got {
					t.Fatalf("exp %d, got %d", exp, got)
				}
			}
			step(500)
			waitReady(t, tg, g, key("1"), cooldown)
			step(400)
			if exp, got := 1, status(t, g, key("1")).Attempts; exp != got {
				t.Fatalf("attempts after 400: exp %d, got %d", exp, got)
			}
			step(200)
			if exp, got := 0, status(t, g, key("1")).Attempts; exp != got {
				t.Fatalf("attempts after 200: exp %d, got %d", exp, got)
			}
		})
	}
}

// TestCooldownEnds: once the cooldown has passed, the next request runs the
// handler again.
func TestCooldownEnds(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			const cooldown = 40 * time.Millisecond
			if tg.FastForward != nil {
				// miniredis's TIME follows the real clock until it is first
				// moved: fixed here, the cooldown ends only in waitReady, not
				// between two requests a busy machine keeps 40 ms apart.
				tg.FastForward(0)
			}
			g := newGate(t, tg.Client, gate.Options{Cooldown: cooldown})
			var runs counter
			fail := true
			h := router(g, httpmw.Options{}, runs.wrap(func(w http.ResponseWriter, r *http.Request) {
				if fail {
					httpmw.Fail(r, errBoom)
					return
				}
				ok(w, r)
			}))
			if exp, got := 429, post(t, h, "/documents/1/evaluate").Code; exp != got {
				t.Fatalf("failing request: exp %d, got %d", exp, got)
			}
			if exp, got := 429, post(t, h, "/documents/1/evaluate").Code; exp != got {
				t.Fatalf("retry during the cooldown: exp %d, got %d", exp, got)
			}
			waitReady(t, tg, g, key("1"), cooldown)
			fail = false
			if exp, got := 200, post(t, h, "/documents/1/evaluate").Code; exp != got {
				t.Fatalf("retry after the cooldown: exp %d, got %d", exp, got)
			}
			if exp, got := int64(2), runs.n.Load(); exp != got {
				t.Errorf("handler runs: exp %d, got %d", exp, got)
			}
		})
	}
}

// TestPanic: a panicking handler cools the job down, and the panic still
// reaches chi's Recoverer.
func TestPanic(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	g := newGate(t, mc, gate.Options{})
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.With(httpmw.New(g, httpmw.Options{Job: httpmw.URLParam("id")})).
		Post(evaluatePattern, func(http.ResponseWriter, *http.Request) { panic("model exploded") })
	rec := post(t, r, "/documents/1/evaluate")
	if exp, got := http.StatusInternalServerError, rec.Code; exp != got {
		t.Errorf("Recoverer's answer: exp %d, got %d", exp, got)
	}
	st := status(t, g, key("1"))
	if exp, got := "cooling_down panic", st.State.String()+" "+st.Reason; exp != got {
		t.Errorf("state: exp %q, got %q", exp, got)
	}
	if strings.Contains(rec.Body.String(), "model exploded") {
		t.Errorf("panic value in body: %s", rec.Body)
	}
	// The retry is refused with the panic as reason, not the panic text.
	checkRow(t, post(t, r, "/documents/1/evaluate"),
		row{status: 429, jobState: "cooling_down", retryAfter: [2]int64{299, 300}, reason: "panic", attempts: "1"})
}

// TestClientGone: a handler that stops because the client went away, and
// writes nothing, releases the job without a cooldown, as gate.Do does.
func TestClientGone(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	var ev events
	g := newGate(t, mc, gate.Options{Observer: &ev})
	ctx, cancel := context.WithCancel(context.Background())
	h := router(g, httpmw.Options{}, func(w http.ResponseWriter, r *http.Request) {
		cancel() // the client hangs up while the model runs
		<-r.Context().Done()
	})
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/documents/1/evaluate", nil).WithContext(ctx))
	if exp, got := evReleased, ev.of(key("1")); exp != got {
		t.Errorf("settle: exp %v, got %v", exp, got)
	}
	if exp, got := gate.Ready, status(t, g, key("1")).State; exp != got {
		t.Errorf("state: exp %v, got %v", exp, got)
	}
}

// TestLease: the handler gets its lease, with a fence token that grows.
func TestLease(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	g := newGate(t, mc, gate.Options{})
	var fences []int64
	h := router(g, httpmw.Options{}, func(w http.ResponseWriter, r *http.Request) {
		l := httpmw.Lease(r.Context())
		if l == nil || !l.Gated() || l.Job() != key("1") {
			t.Fatalf("Lease: %+v", l)
		}
		fences = append(fences, l.Fence())
	})
	post(t, h, "/documents/1/evaluate")
	post(t, h, "/documents/1/evaluate")
	if len(fences) != 2 || fences[1] <= fences[0] {
		t.Errorf("fences: %v, want strictly increasing", fences)
	}
	if httpmw.Lease(context.Background()) != nil {
		t.Error("Lease outside the middleware is not nil")
	}
	if httpmw.Fail(httptest.NewRequest(http.MethodGet, "/", nil), errBoom) {
		t.Error("Fail outside the middleware reported true")
	}
}

// TestFailOpen: with gate.Options.Redis.FailOpen and Redis down, the handler runs
// ungated.
func TestFailOpen(t *testing.T) {
	g := newGate(t, closedPortClient(t), gate.Options{Redis: gate.RedisPolicy{FailOpen: true, Timeout: time.Second}})
	var gated []bool
	h := router(g, httpmw.Options{}, func(w http.ResponseWriter, r *http.Request) {
		gated = append(gated, httpmw.Lease(r.Context()).Gated())
		ok(w, r)
	})
	if exp, got := 200, post(t, h, "/documents/1/evaluate").Code; exp != got {
		t.Fatalf("exp %d, got %d", exp, got)
	}
	if len(gated) != 1 || gated[0] {
		t.Errorf("handler ran with Gated %v, want one ungated run", gated)
	}
}

// TestNoUpstreamText: whatever the handler's error says, a body the
// middleware writes never repeats it.
func TestNoUpstreamText(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	g := newGate(t, mc, gate.Options{})
	secret := errors.New("upstream: sk-secret-key rejected at https://api.example/v1 boom")
	h := router(g, httpmw.Options{}, func(w http.ResponseWriter, r *http.Request) { httpmw.Fail(r, secret) })
	for i := 0; i < 2; i++ {
		rec := post(t, h, "/documents/1/evaluate")
		if exp, got := 429, rec.Code; exp != got {
			t.Fatalf("exp %d, got %d", exp, got)
		}
		noLeak(t, rec.Body.String())
		if strings.Contains(rec.Body.String(), "api.example") {
			t.Errorf("body leaks the upstream URL: %s", rec.Body)
		}
	}
}

// TestHandlerStatusCoolsUpstream: a handler's 429 or 503 means the provider
// behind it is rate-limited or overloaded, so the gate's upstream
// cools for the handler's Retry-After; a single 500 does not.
func TestHandlerStatusCoolsUpstream(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			for _, c := range []struct {
				code    int
				cooling bool
			}{{429, true}, {503, true}, {500, false}} {
				g := newGate(t, tg.Client, gate.Options{Upstream: "openai"})
				post(t, router(g, httpmw.Options{}, code(c.code, "20")), "/documents/1/evaluate")
				ups, err := g.Upstreams(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				up := ups[0]
				if exp, got := c.cooling, up.State == gate.CoolingDown; exp != got {
					t.Errorf("%d: upstream cooling exp %v, got %+v", c.code, exp, up)
				}
				if c.cooling && (up.RetryAfter < 19*time.Second || up.RetryAfter > 20*time.Second) {
					t.Errorf("%d: upstream cooldown %v, want the handler's 20s", c.code, up.RetryAfter)
				}
			}
		})
	}
}

// TestOwnReasonReachesClient: a reason code the application sets with
// classify.WithReason reaches the client as is, in the refusal and in the
// status body, when it is a valid code: any of [a-z0-9_.-], up to 64 bytes.
func TestOwnReasonReachesClient(t *testing.T) {
	for _, reason := range []string{
		"quota.tier-0_az9",
		strings.Repeat("z", 63) + "a", // 64 bytes, the longest allowed
	} {
		t.Run(reason[:8], func(t *testing.T) {
			_, mc := redistest.Miniredis(t)
			g := newGate(t, mc, gate.Options{})
			h := router(g, httpmw.Options{}, func(w http.ResponseWriter, r *http.Request) {
				httpmw.Fail(r, classify.WithReason(errBoom, classify.ClassTransient, reason, 0))
			})
			exp := row{status: 429, jobState: "cooling_down", retryAfter: [2]int64{299, 300}, reason: reason, attempts: "1"}
			checkRow(t, post(t, h, "/documents/1/evaluate"), exp) // the state just recorded
			checkRow(t, post(t, h, "/documents/1/evaluate"), exp) // the refusal
			var st httpmw.RetryStatus
			if err := json.Unmarshal(get(t, h, "/documents/1/retry-status").Body.Bytes(), &st); err != nil {
				t.Fatal(err)
			}
			if exp, got := reason, st.Reason; exp != got {
				t.Errorf("status reason: exp %q, got %q", exp, got)
			}
		})
	}
}
