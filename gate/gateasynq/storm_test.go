package gateasynq_test

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
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateasynq"
	"github.com/retrygate/retrygate/internal/redistest"
)

// workerEnv holds a worker process's configuration (JSON); the test
// binary started with it runs workerMain instead of the tests.
const workerEnv = "GATEASYNQ_TEST_WORKER"

type workerConfig struct {
	Addrs    []string
	Queue    string
	Prefix   string
	Provider string // the fake model's URL
	Window   time.Duration
}

// workerMain is one worker process: an asynq server whose handler calls
// the model over HTTP under a gate of its own. It runs until SIGTERM.
func workerMain(raw string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "worker config:", err)
		return 2
	}
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: cfg.Addrs})
	defer rdb.Close()
	g, err := gate.New(rdb, gate.Options{Prefix: cfg.Prefix, Scope: "llm", Lease: 2 * time.Second, Jitter: -1,
		ScopePolicy: gate.ScopePolicy{Cooldown: cfg.Window}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	b := backend{addrs: cfg.Addrs}
	srv := asynq.NewServer(b.asynq(), gateasynq.Config(asynq.Config{
		Concurrency: 4, Queues: map[string]int{cfg.Queue: 1},
		TaskCheckInterval: 50 * time.Millisecond, DelayedTaskCheckInterval: 100 * time.Millisecond,
		ShutdownTimeout: 2 * time.Second, LogLevel: asynq.FatalLevel,
	}))
	mux := asynq.NewServeMux()
	mux.Use(gateasynq.Middleware(g, gateasynq.Options{Job: byDocument}))
	mux.HandleFunc(taskType, func(ctx context.Context, t *asynq.Task) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.Provider, bytes.NewReader(t.Payload()))
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
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	if err := srv.Start(mux); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	<-stop
	srv.Shutdown()
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

// 200 queued tasks, 2 worker processes, a provider that answers 429
// every time: at most one upstream call per scope window after the calls
// in flight at the first 429, and no task's retry count moves.
func TestStormOneCallPerWindow(t *testing.T) {
	const (
		tasks   = 200
		workers = 2
		slots   = 4 // Concurrency per worker
		window  = 300 * time.Millisecond
		probes  = 4 // calls after the burst to observe before stopping
	)
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			u := &upstream{window: window}
			srv := httptest.NewServer(u)
			defer srv.Close()
			q := queueName()
			client := asynq.NewClient(b.asynq())
			defer client.Close()
			inspector := asynq.NewInspector(b.asynq())
			defer inspector.Close()
			for i := range tasks {
				body, _ := json.Marshal(payload{Doc: fmt.Sprint("doc-", i)})
				if _, err := client.Enqueue(asynq.NewTask(taskType, body), asynq.Queue(q), asynq.MaxRetry(25)); err != nil {
					t.Fatal(err)
				}
			}
			cfg := workerConfig{Addrs: b.addrs, Queue: q, Prefix: redistest.UniqueKey(t), Provider: srv.URL, Window: window}
			for range workers {
				startWorker(t, cfg)
			}

			// The calls in flight at the first 429 are those that arrived
			// before the gate could have written the scope (its settle,
			// a few ms after the answer).
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
			retry, err := inspector.ListRetryTasks(q, asynq.PageSize(tasks))
			if err != nil {
				t.Fatal(err)
			}
			pending, err := inspector.ListPendingTasks(q, asynq.PageSize(tasks))
			if err != nil {
				t.Fatal(err)
			}
			// Tasks move between pending, active and retry while they are
			// listed: the queue's own counts say none was archived or
			// completed.
			qi, err := inspector.GetQueueInfo(q)
			if err != nil {
				t.Fatal(err)
			}
			if qi.Archived != 0 || qi.Completed != 0 || qi.Pending+qi.Active+qi.Retry+qi.Scheduled != tasks {
				t.Fatalf("queue %+v: want all %d tasks pending, running or waiting to retry", qi, tasks)
			}
			for _, info := range append(retry, pending...) {
				if info.Retried != 0 {
					t.Fatalf("task %s retried %d times by asynq's count, want 0: %q", info.ID, info.Retried, info.LastErr)
				}
			}
			t.Logf("%s: %d calls in the first burst, then %d in %v; %d tasks waiting to retry and %d pending, none counted",
				b.name, len(burst), len(after), elapsed.Round(time.Millisecond), len(retry), len(pending))
		})
	}
}
