package gateriver_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateriver"
	"github.com/retrygate/retrygate/internal/testkit/pgtest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
	"github.com/retrygate/retrygate/internal/testkit/stormtest"
)

func TestMain(m *testing.M) {
	if cfg := os.Getenv(workerEnv); cfg != "" {
		os.Exit(workerMain(cfg)) // a worker process of TestStormOneCallPerWindow
	}
	pgtest.Main(m)
}

// summariseArgs is a job that summarises one document.
type summariseArgs struct {
	Doc string `json:"doc"`
}

func (summariseArgs) Kind() string { return "summarise" }

type summariseWorker struct {
	river.WorkerDefaults[summariseArgs]
	call func(ctx context.Context, doc string) error
}

func (w *summariseWorker) Work(ctx context.Context, job *river.Job[summariseArgs]) error {
	return w.call(ctx, job.Args.Doc)
}

func byDocument(_ context.Context, job *rivertype.JobRow) (string, error) {
	var a summariseArgs
	if err := json.Unmarshal(job.EncodedArgs, &a); err != nil {
		return "", err
	}
	return "summarise:" + a.Doc, nil
}

// database returns a pool on a fresh database of the shared PostgreSQL,
// with River's tables migrated.
func database(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}
	return pool
}

// newClient builds a River client that works summarise jobs with call,
// under g, polling fast so a snoozed job runs within ~50 ms of its time.
func newClient(pool *pgxpool.Pool, g *gate.Gate, workers int, call func(context.Context, string) error) (*river.Client[pgx.Tx], error) {
	w := river.NewWorkers()
	river.AddWorker(w, &summariseWorker{call: call})
	return river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           w,
		Middleware:        []rivertype.Middleware{gateriver.New(g, gateriver.Options{Job: byDocument})},
		FetchPollInterval: 50 * time.Millisecond,
		FetchCooldown:     10 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		TestOnly:          true,
	})
}

// fixture is one test's gate, River client and database.
type fixture struct {
	g      *gate.Gate
	rdb    *redis.Client
	client *river.Client[pgx.Tx]
}

// serve starts a River client on a fresh database with a gate over a
// redis-server of the test's own.
func serve(t *testing.T, opts gate.Options, call func(context.Context, string) error) *fixture {
	t.Helper()
	pool := database(t, pgtest.Shared(t).Database(t))
	rdb := redistest.Server(t).Client(t)
	if opts.Prefix == "" {
		opts.Prefix = redistest.UniqueKey(t)
	}
	g, err := gate.New(rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	client, err := newClient(pool, g, 4, call)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	})
	return &fixture{g: g, rdb: rdb, client: client}
}

func (f *fixture) insert(t *testing.T, doc string) int64 {
	t.Helper()
	res, err := f.client.Insert(context.Background(), summariseArgs{Doc: doc}, &river.InsertOpts{MaxAttempts: 5})
	if err != nil {
		t.Fatal(err)
	}
	return res.Job.ID
}

// waitState polls the job's row until it reaches state, for at most within.
func (f *fixture) waitState(t *testing.T, id int64, state rivertype.JobState, within time.Duration) *rivertype.JobRow {
	t.Helper()
	var row *rivertype.JobRow
	waitFor(t, within, func() bool {
		var err error
		if row, err = f.client.JobGet(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		return row.State == state
	}, func() string {
		return "job " + strconv.FormatInt(id, 10) + " is " + string(row.State) + ", errors " + lastError(row)
	})
	return row
}

func lastError(row *rivertype.JobRow) string {
	if row == nil || len(row.Errors) == 0 {
		return `""`
	}
	return strconv.Quote(row.Errors[len(row.Errors)-1].Error)
}

// snoozes reads River's count of a job's snoozes from its metadata.
func snoozes(row *rivertype.JobRow) int {
	var m struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(row.Metadata, &m)
	return m.Snoozes
}

// waitFor polls cond every 10 ms until it holds or within passes.
func waitFor(t *testing.T, within time.Duration, cond func() bool, why func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, why())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// calling is p's call as a River worker makes it, for a document.
func calling(p *stormtest.Provider) func(context.Context, string) error {
	return func(ctx context.Context, _ string) error { return p.Call(ctx) }
}
