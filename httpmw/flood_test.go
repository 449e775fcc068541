package httpmw_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
