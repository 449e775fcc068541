package gateriver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/pgtest"
	"github.com/retrygate/retrygate/internal/redistest"

	"github.com/jackc/pgx/v5/pgxpool"
)

// workerEnv holds a worker process's configuration (JSON); the test
// binary started with it runs workerMain instead of the tests.
const workerEnv = "GATERIVER_TEST_WORKER"

type workerConfig struct {
	DSN      string
	Redis    string
	Prefix   string
	Provider string // the fake model's URL
	Window   time.Duration
}

// workerMain is one worker process: a River client whose worker calls the
// model over HTTP under a gate of its own. It runs until SIGTERM.
func workerMain(raw string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "worker config:", err)
		return 2
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, cfg.DSN)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis})
	defer rdb.Close()
	g, err := gate.New(rdb, gate.Options{Prefix: cfg.Prefix, Scope: "llm", Lease: 2 * time.Second, Jitter: -1,
		ScopePolicy: gate.ScopePolicy{Cooldown: cfg.Window}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	client, err := newClient(pool, g, 4, func(ctx context.Context, doc string) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.Provider, strings.NewReader(doc))
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			return &classify.HTTPError{StatusCode: resp.StatusCode, Header: resp.Header, Body: body}
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	if err := client.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	<-stop
	stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		fmt.Fprintln(os.Stderr, "stop:", err)
		return 1
	}
	return 0
}

// startWorker runs the test binary as a worker process, stopped (SIGTERM)
// in t.Cleanup; its stderr is logged if the test fails.
func startWorker(t *testing.T, cfg workerConfig) {
	t.Helper()
	raw, _ := json.Marshal(cfg)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"="+string(raw))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("worker exited: %v\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("worker did not stop within 10 s of SIGTERM\n%s", stderr.String())
		}
	})
}

// upstream is a model that answers every call 429 with retry-after-ms:
// window, and records when calls arrived.
type upstream struct {
	window time.Duration
	mu     sync.Mutex
	calls  []time.Time
	first  time.Time // when the first 429 was sent
}

func (u *upstream) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	u.mu.Lock()
	u.calls = append(u.calls, time.Now())
	u.mu.Unlock()
	time.Sleep(10 * time.Millisecond) // a model takes a moment even to refuse
	w.Header().Set("Retry-After-Ms", fmt.Sprint(u.window.Milliseconds()))
	w.WriteHeader(http.StatusTooManyRequests)
	u.mu.Lock()
	if u.first.IsZero() {
		u.first = time.Now()
	}
	u.mu.Unlock()
}

// 200 queued jobs, 2 worker processes, a provider that answers 429 every
// time: at most one upstream call per scope window after the calls in
// flight at the first 429, and no job is charged an attempt.
func TestStormOneCallPerWindow(t *testing.T) {
	const (
		jobs    = 200
		workers = 2
		slots   = 4 // MaxWorkers per process
		window  = 300 * time.Millisecond
		probes  = 5 // calls after the burst to observe before stopping
	)
	u := &upstream{window: window}
	srv := httptest.NewServer(u)
	defer srv.Close()
	dsn := pgtest.Shared(t).Database(t)
	pool := database(t, dsn)
	ctx := context.Background()
	inserter, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	params := make([]river.InsertManyParams, jobs)
	for i := range params {
		params[i] = river.InsertManyParams{Args: summariseArgs{Doc: fmt.Sprint("doc-", i)}, InsertOpts: &river.InsertOpts{MaxAttempts: 25}}
	}
	if _, err := inserter.InsertMany(ctx, params); err != nil {
		t.Fatal(err)
	}
	cfg := workerConfig{DSN: dsn, Redis: redistest.Server(t).Addr(), Prefix: redistest.UniqueKey(t), Provider: srv.URL, Window: window}
	for range workers {
		startWorker(t, cfg)
	}

	// The calls in flight at the first 429 are those that arrived before
	// the gate could have written the scope (its settle, a few ms later).
	var burst, after []time.Time
	split := func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.first.IsZero() {
			return false
		}
		burst, after = burst[:0], after[:0]
		for _, c := range u.calls {
			if c.Before(u.first.Add(50 * time.Millisecond)) {
				burst = append(burst, c)
			} else {
				after = append(after, c)
			}
		}
		return len(after) >= probes
	}
	waitFor(t, 15*time.Second, split, func() string { return fmt.Sprintf("%d calls after the burst of %d", len(after), len(burst)) })

	if len(burst) > workers*slots {
		t.Fatalf("%d calls in the first burst, want at most the %d worker slots", len(burst), workers*slots)
	}
	for i := 1; i < len(after); i++ {
		if gap := after[i].Sub(after[i-1]); gap < window-50*time.Millisecond {
			t.Fatalf("upstream calls %d and %d only %v apart, want one per %v window", i-1, i, gap, window)
		}
	}
	elapsed := after[len(after)-1].Sub(u.first)
	if max := int(elapsed/window) + 1; len(after) > max {
		t.Fatalf("%d upstream calls in %v after the first 429, want at most %d", len(after), elapsed, max)
	}
	var charged, snoozed int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE errors IS NOT NULL OR attempt > 1),
		count(*) FILTER (WHERE (metadata->>'snoozes')::int > 0) FROM river_job`).Scan(&charged, &snoozed); err != nil {
		t.Fatal(err)
	}
	if charged != 0 {
		t.Fatalf("%d jobs were charged an attempt or an error for the provider's 429", charged)
	}
	t.Logf("%d calls in the first burst, then %d in %v; %d jobs snoozed, none charged an attempt",
		len(burst), len(after), elapsed.Round(time.Millisecond), snoozed)
}
