package gateriver_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/retrygate/retrygate/internal/testkit/pgtest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
	"github.com/retrygate/retrygate/internal/testkit/stormtest"

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
	return stormtest.RunWorker(raw, &cfg, func() (func() error, error) {
		ctx := context.Background()
		pool, err := pgxpool.New(ctx, cfg.DSN)
		if err != nil {
			return nil, err
		}
		rdb := redis.NewClient(&redis.Options{Addr: cfg.Redis})
		closeAll := func() {
			_ = rdb.Close()
			pool.Close()
		}
		g, err := stormtest.WorkerGate(rdb, cfg.Prefix, cfg.Window)
		if err != nil {
			closeAll()
			return nil, err
		}
		client, err := newClient(pool, g, 4, func(ctx context.Context, doc string) error {
			return stormtest.CallModel(ctx, cfg.Provider, []byte(doc))
		})
		if err == nil {
			err = client.Start(ctx)
		}
		if err != nil {
			closeAll()
			return nil, err
		}
		return func() error {
			defer closeAll()
			stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			return client.Stop(stopCtx)
		}, nil
	})
}

// 200 queued jobs, 2 worker processes, a provider that answers 429 every
// time: at most one upstream call per upstream cooldown after the calls in
// flight at the first 429, and no job is charged an attempt.
func TestStormOneCallPerWindow(t *testing.T) {
	const (
		jobs    = 200
		workers = 2
		slots   = 4 // MaxWorkers per process
		window  = 300 * time.Millisecond
		probes  = 5 // calls after the burst to observe before stopping
	)
	u := &stormtest.RateLimited{Window: window}
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
		stormtest.StartWorker(t, workerEnv, cfg)
	}

	burst, after := u.AwaitCalls(t, probes, 15*time.Second)
	elapsed := u.OnePerWindow(t, workers*slots)
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
