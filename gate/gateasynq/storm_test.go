package gateasynq_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate/gateasynq"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
	"github.com/retrygate/retrygate/internal/testkit/stormtest"
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
	return stormtest.RunWorker(raw, &cfg, func() (func() error, error) {
		rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: cfg.Addrs})
		g, err := stormtest.WorkerGate(rdb, cfg.Prefix, cfg.Window)
		if err != nil {
			_ = rdb.Close()
			return nil, err
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
			return stormtest.CallModel(ctx, cfg.Provider, t.Payload())
		})
		if err := srv.Start(mux); err != nil {
			_ = rdb.Close()
			return nil, err
		}
		return func() error {
			srv.Shutdown()
			_ = rdb.Close()
			return nil
		}, nil
	})
}

// 200 queued tasks, 2 worker processes, a provider that answers 429
// every time: at most one upstream call per upstream cooldown after the calls
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
			u := &stormtest.RateLimited{Window: window}
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
				stormtest.StartWorker(t, workerEnv, cfg)
			}

			burst, after := u.AwaitCalls(t, probes, 15*time.Second)
			elapsed := u.OnePerWindow(t, workers*slots)
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
