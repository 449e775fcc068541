package main

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
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// TestFindHTTPJob: a job httpmw created from a chi route is named
// "/documents/{id}/evaluate 42". status 42 says no key holds that name and
// lists the job that contains it; status --route finds it by the route
// and the id, as the middleware built it; list --match finds it too.
func TestFindHTTPJob(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			g, err := gate.New(tg.Client, gate.Options{Prefix: prefix, Cooldown: time.Hour, Backoff: gate.Backoff{Jitter: -1},
				UpstreamPolicy: gate.UpstreamPolicy{Off: true}}) // two jobs each cooled by its own 503
			if err != nil {
				t.Fatal(err)
			}
			r := chi.NewRouter()
			r.With(httpmw.New(g, httpmw.Options{Job: httpmw.URLParam("id")})).
				Post("/documents/{id}/evaluate", func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(http.StatusServiceUnavailable) // the upstream failed
				})
			for _, id := range []string{"42", "a%20b%2F42"} {
				rec := httptest.NewRecorder()
				r.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/documents/"+id+"/evaluate", nil))
				if rec.Code != http.StatusServiceUnavailable {
					t.Fatalf("POST %s: %d", id, rec.Code)
				}
			}
			args := append(redisArgs(t, tg), "--prefix", prefix)

			// By the id alone: nothing, but the similar job is named.
			res := runCLI(t, nil, append(args, "status", "42")...)
			mustOK(t, res)
			for _, exp := range []string{"state     ready", "no key for 42", "/documents/{id}/evaluate 42  cooling_down",
				"retrygate --prefix " + prefix + " status '/documents/{id}/evaluate 42'"} {
				if !strings.Contains(res.stdout, exp) {
					t.Errorf("status 42: exp %q in\n%s", exp, res.stdout)
				}
			}
			st := statusOf(t, runCLI(t, nil, append(args, "--json", "status", "42")...))
			if len(st.Similar) != 2 || st.Similar[0].Job != "/documents/{id}/evaluate 42" || st.Similar[0].State != "cooling_down" {
				t.Errorf("status 42 --json: similar %+v", st.Similar)
			}

			// By route and id: the job itself.
			for _, tc := range []struct{ id, job string }{
				{"42", "/documents/{id}/evaluate 42"},
				{"a b/42", "/documents/{id}/evaluate a b/42"}, // the decoded id, as httpmw decodes it
			} {
				st := statusOf(t, runCLI(t, nil, append(args, "--json", "status", "--route", "/documents/{id}/evaluate", tc.id)...))
				if st.Job != tc.job || st.State != "cooling_down" || len(st.Similar) != 0 {
					t.Errorf("status --route ... %s: exp %q cooling down, got %+v", tc.id, tc.job, st)
				}
			}
			// A route that holds nothing says so plainly.
			st = statusOf(t, runCLI(t, nil, append(args, "--json", "status", "--route", "/images/{id}/evaluate", "7")...))
			if st.State != "ready" || st.Job != "/images/{id}/evaluate 7" {
				t.Errorf("status of another route: %+v", st)
			}

			res = runCLI(t, nil, append(args, "--json", "list", "--match", "42")...)
			mustOK(t, res)
			var l listJSON
			if err := json.Unmarshal([]byte(res.stdout), &l); err != nil {
				t.Fatal(err)
			}
			if len(l.Jobs) != 2 || l.Jobs[0].Job != "/documents/{id}/evaluate 42" {
				t.Errorf("list --match 42: %+v", l.Jobs)
			}
			res = runCLI(t, nil, append(args, "--json", "list", "--match", "nothing-like-it")...)
			mustOK(t, res)
			if !strings.Contains(res.stdout, `"jobs": []`) {
				t.Errorf("list --match with no match: %s", res.stdout)
			}

			// reset takes what status takes: the route and the id.
			res = runCLI(t, nil, append(args, "reset", "--route", "/documents/{id}/evaluate", "a b/42")...)
			mustOK(t, res)
			if st, err := g.Status(context.Background(), "/documents/{id}/evaluate a b/42"); err != nil || st.State != gate.Ready {
				t.Errorf("after reset --route: %v, %v", st.State, err)
			}
			if st, _ := g.Status(context.Background(), "/documents/{id}/evaluate 42"); st.State != gate.CoolingDown {
				t.Errorf("reset --route reset another job too: %v", st.State)
			}
			if res := runCLI(t, nil, append(args, "reset", "--route", "/d/{id}", "--state", "failed")...); res.code != exitUsage {
				t.Errorf("reset --route with --state: exit %d, want usage", res.code)
			}
		})
	}
}

// TestRouteJobIsHTTPMWKey checks routeJob against the key the middleware
// computes for a real routed request.
func TestRouteJobIsHTTPMWKey(t *testing.T) {
	var got string
	r := chi.NewRouter()
	r.Post("/documents/{id}/evaluate", func(w http.ResponseWriter, r *http.Request) {
		var err error
		if got, err = httpmw.URLParam("id")(r); err != nil {
			t.Fatal(err)
		}
	})
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/documents/x%25y%20z/evaluate", nil))
	exp, err := routeJob("/documents/{id}/evaluate", "x%y z")
	if err != nil {
		t.Fatal(err)
	}
	if exp != got {
		t.Fatalf("routeJob: exp the middleware's %q, got %q", got, exp)
	}
	if _, err := routeJob("/documents/{id}/evaluate", ""); !errors.Is(err, gate.ErrInvalidJob) {
		t.Fatalf("empty id: exp ErrInvalidJob, got %v", err)
	}
}

// TestJSONErrors: with --json, every error is a JSON object on stdout.
func TestJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no command", []string{"--json"}, exitUsage, "missing COMMAND"},
		{"unknown flag", []string{"--json", "status", "--nope", "a"}, exitUsage, "flag provided but not defined"},
		{"missing job", []string{"status", "--json"}, exitUsage, "missing JOB"},
		{"bad duration", []string{"calibrate", "--json", "--p99", "18 parsecs"}, exitUsage, "invalid value"},
		{"unreachable", []string{"--json", "--redis", "redis://127.0.0.1:1", "status", "a"}, exitRuntime, "connection refused"},
		{"bad route id", []string{"--json", "--redis", "redis://127.0.0.1:1", "status", "--route", "/d/{id}", ""}, exitUsage, "invalid job key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := assertJSONError(t, runCLI(t, nil, tc.args...), tc.code)
			if !strings.Contains(e.Error, tc.msg) {
				t.Errorf("error %q should contain %q", e.Error, tc.msg)
			}
		})
	}
	// calibrate's unmet SLO is in its JSON result: one JSON document.
	r := runCLI(t, nil, "calibrate", "--json", "--p99=18s", "--takeover-slo=10s")
	var j calibrationJSON
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || r.code != exitNotMet || j.Warning == "" || r.stderr != "" {
		t.Fatalf("calibrate --json, SLO not met: exit %d, %v, %q %q", r.code, err, r.stdout, r.stderr)
	}
}

// TestResetRunningJSON: reset of a running job says so in JSON, exit 4.
func TestResetRunningJSON(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		if tg.Name != "miniredis" {
			continue
		}
		f := newFixture(t, tg)
		r := f.run(t, "--json", "reset", "doc-4")
		if r.code != exitRunning || r.stderr != "" {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		var j resetJSON
		if err := json.Unmarshal([]byte(r.stdout), &j); err != nil {
			t.Fatalf("%v: %q", err, r.stdout)
		}
		if j.Reset || j.Was.State != "running" || !strings.Contains(j.Error, "is running") || j.Was.RetryAfterMs <= 0 {
			t.Fatalf("reset running --json: %+v", j)
		}
		if st, _ := f.g.Status(context.Background(), "doc-4"); st.State != gate.Running {
			t.Fatalf("doc-4 after a refused reset: %+v", st)
		}
	}
}

func TestUpstreamResetSaysJobsKeepCooldowns(t *testing.T) {
	_, client := redistest.Miniredis(t)
	prefix := redistest.UniqueKey(t)
	g, err := gate.New(client, gate.Options{UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Hour, PauseTTL: time.Hour}, Prefix: prefix,
		Upstream: "openai:prod", Cooldown: time.Hour, Classify: testClassify,
		Backoff: gate.Backoff{Jitter: -1}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_ = g.Do(ctx, "doc-9", func(context.Context, *gate.Lease) error { return errQuota })
	args := []string{"--redis", "redis://" + client.Options().Addr, "--prefix", prefix, "--upstream", "openai:prod"}
	r := runCLI(t, nil, append(args, "upstream", "reset")...)
	mustOK(t, r)
	if !strings.Contains(r.stdout, "keeps its own cooldown") {
		t.Fatalf("upstream reset: %q", r.stdout)
	}
	// What it says holds: the upstream runs other jobs, the job that hit the
	// quota still cools down.
	if err := g.Do(ctx, "doc-0", func(context.Context, *gate.Lease) error { return nil }); err != nil {
		t.Fatalf("another job after upstream reset: %v", err)
	}
	if err := g.Do(ctx, "doc-9", func(context.Context, *gate.Lease) error { return nil }); !errors.Is(err, gate.ErrCoolingDown) {
		t.Fatalf("the job that hit the quota after upstream reset: exp ErrCoolingDown, got %v", err)
	}
}

func TestCalibrateRoundsAndHelp(t *testing.T) {
	r := runCLI(t, nil, "calibrate", "--p99", "18s")
	mustOK(t, r)
	if !strings.Contains(r.stdout, "renew every     6.67s") {
		t.Errorf("calibrate --p99 18s: exp renew 6.67s in\n%s", r.stdout)
	}
	r = runCLI(t, nil, "help", "calibrate")
	mustOK(t, r)
	if strings.Contains(r.stdout, "-1ns") || !strings.Contains(r.stdout, "default: --jitter") {
		t.Errorf("help calibrate:\n%s", r.stdout)
	}
	// --detect still takes an explicit 0.
	r = runCLI(t, nil, "calibrate", "--json", "--p99", "18s", "--jitter", "4s", "--detect", "0s")
	var j calibrationJSON
	if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || j.DetectMs != 0 || j.TakeoverBoundMs != 24000 {
		t.Fatalf("--detect 0s: %+v, %v", j, err)
	}
	for _, d := range []struct {
		in  time.Duration
		exp string
	}{
		{20 * time.Second / 3, "6.67s"}, {200 * time.Second / 3, "1m7s"}, {1234567 * time.Microsecond, "1.23s"},
		{5 * time.Millisecond / 3, "2ms"}, {8 * time.Second, "8s"},
	} {
		if got := roundDur(d.in).String(); got != d.exp {
			t.Errorf("roundDur(%v): exp %s, got %s", d.in, d.exp, got)
		}
	}
}
