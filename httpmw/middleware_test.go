package httpmw_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
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

// row is one row of the status-code contract.
type row struct {
	status     int
	jobState   string // "" = member absent
	retryAfter [2]int64
	reason     string // "<absent>" = member absent
	attempts   string // "<absent>" or the number
	statusURL  bool
}

// checkRow asserts a refusal against its contract row.
func checkRow(t *testing.T, rec *httptest.ResponseRecorder, exp row) problemBody {
	t.Helper()
	if rec.Code != exp.status {
		t.Fatalf("status: exp %d, got %d (body %s)", exp.status, rec.Code, rec.Body)
	}
	p := decodeProblem(t, rec)
	if exp, got := exp.jobState, str(p.JobState); exp != got {
		t.Errorf("job_state: exp %q, got %q", exp, got)
	}
	ra := rec.Header().Get("Retry-After")
	if exp.retryAfter == [2]int64{} {
		if ra != "" || p.RetryAfterSeconds != nil || p.RetryAt != nil {
			t.Errorf("want no wait, got Retry-After %q, body %s", ra, rec.Body)
		}
	} else {
		n, err := strconv.ParseInt(ra, 10, 64)
		if err != nil || n < exp.retryAfter[0] || n > exp.retryAfter[1] {
			t.Errorf("Retry-After: exp in %v, got %q", exp.retryAfter, ra)
		}
		if p.RetryAfterSeconds == nil || *p.RetryAfterSeconds != n {
			t.Errorf("retry_after_seconds: exp %d, got %v", n, p.RetryAfterSeconds)
		}
		at, err := time.Parse(time.RFC3339, str(p.RetryAt))
		if err != nil {
			t.Errorf("retry_at %q: %v", str(p.RetryAt), err)
		} else if d := time.Until(at); d < time.Duration(n-2)*time.Second || d > time.Duration(n+1)*time.Second {
			t.Errorf("retry_at %v is %v away, Retry-After %d", at, d, n)
		}
	}
	if exp, got := exp.reason, str(p.Reason); exp != got {
		t.Errorf("reason: exp %q, got %q", exp, got)
	}
	gotAttempts := "<absent>"
	if p.Attempts != nil {
		gotAttempts = strconv.Itoa(*p.Attempts)
	}
	if exp, got := exp.attempts, gotAttempts; exp != got {
		t.Errorf("attempts: exp %s, got %s", exp, got)
	}
	if exp.statusURL {
		if exp, got := "/documents/42/retry-status", str(p.StatusURL); exp != got {
			t.Errorf("status_url: exp %q, got %q", exp, got)
		}
	} else if p.StatusURL != nil {
		t.Errorf("status_url: want absent, got %q", *p.StatusURL)
	}
	noLeak(t, rec.Body.String())
	return p
}

// TestContract drives every blocked row of the table through a chi router
// on every backend: the first request records the state, the second is
// refused without running the handler.
func TestContract(t *testing.T) {
	type tc struct {
		name  string
		gopts gate.Options
		// first runs the handler once and leaves the job in the row's state.
		first func(w http.ResponseWriter, r *http.Request)
		// firstStatus is what the first request itself answers;
		// firstRefusal says the middleware wrote it (Fail, nothing written).
		firstStatus  int
		firstRefusal bool
		exp          row
	}
	cases := []tc{
		{
			name:        "cooling down",
			first:       func(w http.ResponseWriter, r *http.Request) { httpmw.Fail(r, errBoom) },
			firstStatus: http.StatusTooManyRequests, firstRefusal: true,
			exp: row{status: 429, jobState: "cooling_down", retryAfter: [2]int64{299, 300}, reason: "unknown", attempts: "1", statusURL: true},
		},
		{
			name: "cooling down after a handler's 503 with Retry-After",
			first: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "900")
				w.WriteHeader(http.StatusServiceUnavailable)
			},
			firstStatus: http.StatusServiceUnavailable,
			// Provider-wide: the provider's wait, and no attempt counted.
			exp: row{status: 429, jobState: "cooling_down", retryAfter: [2]int64{899, 900}, reason: "overloaded", attempts: "0", statusURL: true},
		},
		{
			name:        "failed permanently",
			first:       func(w http.ResponseWriter, r *http.Request) { httpmw.Fail(r, classify.Permanent(errBoom)) },
			firstStatus: http.StatusUnprocessableEntity, firstRefusal: true,
			exp: row{status: 422, jobState: "failed", reason: "permanent", attempts: "1", statusURL: true},
		},
		{
			name:  "failed after MaxAttempts",
			gopts: gate.Options{Backoff: gate.Backoff{MaxAttempts: 1}},
			first: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusBadGateway)
			},
			firstStatus: http.StatusBadGateway,
			exp:         row{status: 422, jobState: "failed", reason: "upstream_5xx", attempts: "1", statusURL: true},
		},
		{
			name:        "done",
			gopts:       gate.Options{Retention: gate.Retention{Done: time.Minute}},
			first:       ok,
			firstStatus: http.StatusOK,
			exp:         row{status: 409, jobState: "done", reason: "<absent>", attempts: "<absent>", statusURL: true},
		},
	}
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					// The job's contract: a row with an upstream names one.
					c.gopts.UpstreamPolicy.Off = c.gopts.Upstream == ""
					g := newGate(t, tg.Client, c.gopts)
					var runs counter
					h := router(g, httpmw.Options{StatusURL: httpmw.SiblingURL("retry-status")}, runs.wrap(c.first))

					rec := post(t, h, "/documents/42/evaluate")
					if exp, got := c.firstStatus, rec.Code; exp != got {
						t.Fatalf("first request: exp %d, got %d (%s)", exp, got, rec.Body)
					}
					if c.firstRefusal {
						checkRow(t, rec, c.exp) // the state just recorded
					}
					checkRow(t, post(t, h, "/documents/42/evaluate"), c.exp)
					if exp, got := int64(1), runs.n.Load(); exp != got {
						t.Errorf("handler runs: exp %d, got %d", exp, got)
					}
				})
			}

			t.Run("running", func(t *testing.T) {
				g := newGate(t, tg.Client, gate.Options{Lease: 2 * time.Second})
				// Another process, configured with a longer lease (a deploy
				// in progress): it reports the lease actually held.
				other := newGate(t, tg.Client, gate.Options{Prefix: gatetest.Prefix(g), Lease: 30 * time.Second})
				started, release := make(chan struct{}), make(chan struct{})
				var runs counter
				blocking := runs.wrap(func(w http.ResponseWriter, r *http.Request) {
					close(started)
					<-release
				})
				opts := httpmw.Options{StatusURL: httpmw.SiblingURL("retry-status")}
				h := router(g, opts, blocking)
				done := make(chan int)
				go func() { done <- post(t, h, "/documents/42/evaluate").Code }()
				<-started

				exp := row{status: 409, jobState: "running", retryAfter: [2]int64{1, 2}, reason: "<absent>", attempts: "<absent>", statusURL: true}
				checkRow(t, post(t, h, "/documents/42/evaluate"), exp)                             // this process
				checkRow(t, post(t, router(other, opts, blocking), "/documents/42/evaluate"), exp) // another process
				close(release)
				if exp, got := http.StatusOK, <-done; exp != got {
					t.Errorf("running request: exp %d, got %d", exp, got)
				}
				if exp, got := int64(1), runs.n.Load(); exp != got {
					t.Errorf("handler runs: exp %d, got %d", exp, got)
				}
			})

			t.Run("done with replay", func(t *testing.T) {
				g := newGate(t, tg.Client, gate.Options{Retention: gate.Retention{Done: time.Minute}})
				var runs counter
				h := router(g, httpmw.Options{Replay: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					_, _ = fmt.Fprint(w, "stored result")
				})}, runs.wrap(ok))
				if exp, got := "evaluated", post(t, h, "/documents/42/evaluate").Body.String(); exp != got {
					t.Fatalf("first: exp %q, got %q", exp, got)
				}
				rec := post(t, h, "/documents/42/evaluate")
				if exp, got := "200 stored result", fmt.Sprint(rec.Code, " ", rec.Body); exp != got {
					t.Errorf("replay: exp %q, got %q", exp, got)
				}
				if exp, got := int64(1), runs.n.Load(); exp != got {
					t.Errorf("handler runs: exp %d, got %d", exp, got)
				}
			})

			t.Run("upstream cooling", func(t *testing.T) {
				for _, u := range []struct {
					name   string
					err    error
					exp    row
					paused bool
				}{
					{"rate limited", &classify.HTTPError{StatusCode: 429, Header: http.Header{"Retry-After": {"30"}}},
						row{status: 503, jobState: "upstream_cooling", retryAfter: [2]int64{29, 30}, reason: "rate_limited", attempts: "<absent>", statusURL: true}, false},
					{"quota paused", &classify.HTTPError{StatusCode: 429, Body: []byte(`{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}`)},
						row{status: 503, jobState: "upstream_cooling", retryAfter: [2]int64{599, 600}, reason: "quota_exhausted", attempts: "<absent>", statusURL: true}, true},
				} {
					t.Run(u.name, func(t *testing.T) {
						g := newGate(t, tg.Client, gate.Options{UpstreamPolicy: gate.UpstreamPolicy{Cooldown: 10 * time.Minute, PauseTTL: 10 * time.Minute}, Upstream: "openai"})
						var runs counter
						h := router(g, httpmw.Options{StatusURL: httpmw.SiblingURL("retry-status")},
							runs.wrap(func(w http.ResponseWriter, r *http.Request) {
								if !httpmw.Fail(r, u.err) {
									t.Error("Fail reported false inside the middleware")
								}
								http.Error(w, "upstream said no", http.StatusBadGateway)
							}))
						if exp, got := http.StatusBadGateway, post(t, h, "/documents/7/evaluate").Code; exp != got {
							t.Fatalf("first: exp %d, got %d", exp, got)
						}
						// Another job of the same upstream: refused, handler not run.
						checkRow(t, post(t, h, "/documents/42/evaluate"), u.exp)
						if exp, got := int64(1), runs.n.Load(); exp != got {
							t.Errorf("handler runs: exp %d, got %d", exp, got)
						}
						ups, err := g.Upstreams(context.Background())
						if err != nil {
							t.Fatal(err)
						}
						up := ups[0]
						if exp, got := u.paused, up.State == gate.Paused; exp != got {
							t.Errorf("upstream paused: exp %v, got %v (%+v)", exp, got, up)
						}
					})
				}
			})
		})
	}
}

// TestUnavailable: with Redis unreachable the gate fails closed; the client
// gets 503 with a short Retry-After and no internals, and the handler never
// runs.
func TestUnavailable(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	down := flaky(mc)
	down.Down.Store(true)
	for _, c := range []struct {
		name string
		rdb  gate.Client
	}{
		{"closed port", closedPortClient(t)},
		{"failing scripter", down},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := newGate(t, c.rdb, gate.Options{Redis: gate.RedisPolicy{Timeout: time.Second}})
			var runs counter
			var logged []error
			var mu sync.Mutex
			h := router(g, httpmw.Options{
				StatusURL: httpmw.SiblingURL("retry-status"),
				OnError:   func(_ *http.Request, err error) { mu.Lock(); logged = append(logged, err); mu.Unlock() },
			}, runs.wrap(ok))
			exp := row{status: 503, jobState: "unknown", retryAfter: [2]int64{5, 5}, reason: "<absent>", attempts: "<absent>"}
			checkRow(t, post(t, h, "/documents/42/evaluate"), exp)
			checkRow(t, get(t, h, "/documents/42/retry-status"), exp)
			if exp, got := int64(0), runs.n.Load(); exp != got {
				t.Errorf("handler runs: exp %d, got %d", exp, got)
			}
			mu.Lock()
			defer mu.Unlock()
			if exp, got := 2, len(logged); exp != got {
				t.Fatalf("OnError calls: exp %d, got %d", exp, got)
			}
			for _, err := range logged {
				if !errors.Is(err, gate.ErrUnavailable) {
					t.Errorf("OnError got %v, want ErrUnavailable", err)
				}
			}
		})
	}
}

// TestUnavailableAfterFail: a failure reported with Fail whose settle cannot
// reach Redis answers 503 with the lease as Retry-After (the lock's own TTL
// is the cooldown then).
func TestUnavailableAfterFail(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	f := flaky(mc)
	g := newGate(t, f, gate.Options{Lease: 20 * time.Second, Redis: gate.RedisPolicy{Timeout: time.Second}})
	h := router(g, httpmw.Options{}, func(w http.ResponseWriter, r *http.Request) {
		f.Down.Store(true)
		httpmw.Fail(r, errBoom)
	})
	checkRow(t, post(t, h, "/documents/42/evaluate"),
		row{status: 503, jobState: "unknown", retryAfter: [2]int64{20, 20}, reason: "<absent>", attempts: "<absent>"})
}

// TestSettleErrorReachesOnError: when the handler's answer is sent but its
// outcome cannot be recorded (Redis went away meanwhile), the client keeps
// the handler's answer and OnError gets the error, for the logs.
func TestSettleErrorReachesOnError(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	f := flaky(mc)
	g := newGate(t, f, gate.Options{Redis: gate.RedisPolicy{Timeout: time.Second}})
	var mu sync.Mutex
	var logged []error
	h := router(g, httpmw.Options{
		OnError: func(_ *http.Request, err error) { mu.Lock(); logged = append(logged, err); mu.Unlock() },
	}, func(w http.ResponseWriter, r *http.Request) {
		f.Down.Store(true)
		ok(w, r)
	})
	rec := post(t, h, "/documents/42/evaluate")
	if exp, got := "200 evaluated", fmt.Sprint(rec.Code, " ", rec.Body); exp != got {
		t.Errorf("response: exp %q, got %q", exp, got)
	}
	mu.Lock()
	defer mu.Unlock()
	if exp, got := 1, len(logged); exp != got {
		t.Fatalf("OnError calls: exp %d, got %d (%v)", exp, got, logged)
	}
	if !errors.Is(logged[0], gate.ErrUnavailable) {
		t.Errorf("OnError got %v, want ErrUnavailable", logged[0])
	}
}

// TestForeignKeysWithoutTTL: keys the gate did not write and that never
// expire (an operator's SET, a restore without TTLs) still get an honest
// wait, never "Retry available now.": a foreign value at a job's lock
// runs for one lease as far as anyone knows; a pause of the upstream
// without an end asks for UnavailableRetryAfter.
func TestForeignKeysWithoutTTL(t *testing.T) {
	ctx := context.Background()
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			t.Run("lock", func(t *testing.T) {
				g := newGate(t, tg.Client, gate.Options{Lease: 20 * time.Second})
				lock := keyspace.Job(gatetest.Prefix(g), key("42"))
				t.Cleanup(func() { tg.Client.Del(ctx, lock) })
				if err := tg.Client.Set(ctx, lock, "held-by-ops", 0).Err(); err != nil {
					t.Fatal(err)
				}
				var runs counter
				rec := post(t, router(g, httpmw.Options{}, runs.wrap(ok)), "/documents/42/evaluate")
				p := checkRow(t, rec, row{status: 409, jobState: "running", retryAfter: [2]int64{20, 20}, reason: "<absent>", attempts: "<absent>"})
				if exp, got := "This job is already running. Retry available in 20 s.", p.Detail; exp != got {
					t.Errorf("detail: exp %q, got %q", exp, got)
				}
				if exp, got := int64(0), runs.n.Load(); exp != got {
					t.Errorf("handler runs: exp %d, got %d", exp, got)
				}
			})
			t.Run("upstream pause", func(t *testing.T) {
				g := newGate(t, tg.Client, gate.Options{Upstream: "openai"})
				upstream, _ := keyspace.Upstream(gatetest.Prefix(g), "openai")
				t.Cleanup(func() { tg.Client.Del(ctx, upstream) })
				if err := tg.Client.Set(ctx, upstream, "p:manual", 0).Err(); err != nil {
					t.Fatal(err)
				}
				var runs counter
				rec := post(t, router(g, httpmw.Options{UnavailableRetryAfter: 7 * time.Second}, runs.wrap(ok)), "/documents/42/evaluate")
				p := checkRow(t, rec, row{status: 503, jobState: "upstream_cooling", retryAfter: [2]int64{7, 7}, reason: "manual", attempts: "<absent>"})
				if exp, got := "The upstream service is temporarily unavailable. Retry available in 7 s.", p.Detail; exp != got {
					t.Errorf("detail: exp %q, got %q", exp, got)
				}
				if exp, got := int64(0), runs.n.Load(); exp != got {
					t.Errorf("handler runs: exp %d, got %d", exp, got)
				}
			})
		})
	}
}
