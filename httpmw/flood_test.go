package httpmw_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// usedMemory is Redis's used_memory (INFO memory), in bytes.
func usedMemory(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no used_memory in INFO memory")
	return 0
}

// TestFloodOfMadeUpIds (issue 40): one client floods a route whose handler
// fails transiently (each failure keeps its job's key for a day,
// Retention.Attempts) with random ids, against a real redis-server whose
// maxmemory leaves 1 MiB of room (noeviction, the policy the gate asks
// for). With the documented wiring (Options.Exists: the app's own check
// that the id names a document), 100,000 ids get 404, the keys and memory
// they leave in Redis are measured (none, and under 256 KiB of noise),
// and legitimate users are answered throughout as before the flood: a
// new job runs (200), a cooling one is refused with its wait (429).
// Without Exists, 20,000 ids fill Redis: new jobs get 503 (OOM) while the
// cooling job keeps its answer, as docs/operating.md says.
func TestFloodOfMadeUpIds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wired bool
		flood int
	}{
		{"Exists", true, 100_000},
		{"no-Exists", false, 20_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.FullServer(t) // maxmemory: 1 MiB above its use at start
			rdb := srv.Client(t)
			ctx := context.Background()
			g := newGate(t, rdb, gate.Options{}) // Retention.Attempts: the default day
			known := map[string]bool{"cool": true}
			for i := range 10 {
				known["new-"+strconv.Itoa(i)] = true
			}
			var opts httpmw.Options
			if tc.wired {
				opts.Exists = func(r *http.Request) (bool, error) { return known[chi.URLParam(r, "id")], nil }
			}
			h := router(g, opts, func(w http.ResponseWriter, r *http.Request) {
				if strings.HasPrefix(chi.URLParam(r, "id"), "new-") {
					ok(w, r)
					return
				}
				httpmw.Fail(r, errBoom) // transient: the job's key stays a day
			})
			send := func(id string) *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodPost, "/documents/"+id+"/evaluate", nil)
				req.RemoteAddr = "203.0.113.7:40000" // one client
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				return rec
			}
			if rec := send("cool"); rec.Code != http.StatusTooManyRequests {
				t.Fatalf("priming the cooling job: %d", rec.Code)
			}
			keys0, mem0 := rdb.DBSize(ctx).Val(), usedMemory(t, rdb)

			id := make([]byte, 16)
			codes := map[int]int{}
			var newCodes, coolCodes []int
			for i := range tc.flood {
				_, _ = rand.Read(id)
				codes[send(hex.EncodeToString(id)).Code]++
				if (i+1)%(tc.flood/10) == 0 { // legitimate users, ten times during the flood
					newCodes = append(newCodes, send("new-"+strconv.Itoa(len(newCodes))).Code)
					rec := send("cool")
					coolCodes = append(coolCodes, rec.Code)
					if rec.Code == http.StatusTooManyRequests && rec.Header().Get("Retry-After") == "" {
						t.Errorf("the cooling job's refusal has no Retry-After")
					}
				}
			}
			keys, mem := rdb.DBSize(ctx).Val()-keys0, usedMemory(t, rdb)-mem0
			t.Logf("%d made-up ids: answers %v; Redis: %d keys, %d bytes more; legitimate new jobs %v, cooling job %v",
				tc.flood, codes, keys, mem, newCodes, coolCodes)
			for _, c := range coolCodes {
				if c != http.StatusTooManyRequests {
					t.Errorf("the cooling job during the flood: %v, want 429 each time", coolCodes)
					break
				}
			}
			if !tc.wired {
				if newCodes[len(newCodes)-1] != http.StatusServiceUnavailable {
					t.Errorf("without Exists: new jobs %v, want the last 503 (Redis full)", newCodes)
				}
				return
			}
			if codes[http.StatusNotFound] != tc.flood {
				t.Errorf("made-up ids: %v, want %d 404s", codes, tc.flood)
			}
			for _, c := range newCodes {
				if c != http.StatusOK {
					t.Errorf("legitimate new jobs during the flood: %v, want 200 each time", newCodes)
					break
				}
			}
			// What the flood leaves: nothing but the ten legitimate jobs'
			// keys, and used_memory within the noise of connections.
			if keys > 10*3 || mem > 256<<10 {
				t.Errorf("the flood left %d keys and %d bytes in Redis, want at most the legitimate jobs' and 256 KiB", keys, mem)
			}
		})
	}
}

// TestExists: Options.Exists runs before the gate, on the retry route and
// the status route: an unknown id gets the 404 problem without job_state
// and Redis is not asked (it is down here: asking would be a 503); an
// error of the check gets the 503 problem and goes to OnError; a known id
// reaches the gate.
func TestExists(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	fl := flaky(mc)
	g := newGate(t, fl, gate.Options{})
	var errs []error
	opts := httpmw.Options{
		Exists: func(r *http.Request) (bool, error) {
			switch chi.URLParam(r, "id") {
			case "known":
				return true, nil
			case "broken":
				return false, errBoom
			}
			return false, nil
		},
		OnError: func(_ *http.Request, err error) { errs = append(errs, err) },
	}
	h := router(g, opts, ok)
	fl.Down.Store(true)
	for _, target := range []string{"/documents/unknown/evaluate", "/documents/unknown/retry-status"} {
		var rec *httptest.ResponseRecorder
		if strings.HasSuffix(target, "evaluate") {
			rec = post(t, h, target)
		} else {
			rec = get(t, h, target)
		}
		if rec.Code != http.StatusNotFound {
			t.Fatalf("%s: %d, want 404 without asking Redis", target, rec.Code)
		}
		if p := decodeProblem(t, rec); p.JobState != nil {
			t.Errorf("%s: job_state %q on a 404", target, *p.JobState)
		}
	}
	if len(errs) != 0 {
		t.Errorf("OnError for unknown ids: %v", errs)
	}
	if rec := post(t, h, "/documents/broken/evaluate"); rec.Code != http.StatusServiceUnavailable || len(errs) != 1 || !errors.Is(errs[0], errBoom) {
		t.Fatalf("the check failing: %d, OnError %v; want 503 and the error", rec.Code, errs)
	}
	fl.Down.Store(false)
	if rec := post(t, h, "/documents/known/evaluate"); rec.Code != http.StatusOK {
		t.Fatalf("a known id: %d, want 200", rec.Code)
	}
}
