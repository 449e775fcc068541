package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify/goopenai"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/pgtest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// model is a local OpenAI-compatible server: it answers its first call 429
// (retry-after-ms: 1200) and every other with a summary of the document.
type model struct {
	mu    sync.Mutex
	calls []string // the documents asked, in order
}

func (m *model) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req openai.ChatCompletionRequest
	_ = json.NewDecoder(r.Body).Decode(&req)
	doc := strings.TrimSuffix(strings.TrimPrefix(req.Messages[0].Content, "Summarise "), ".")
	m.mu.Lock()
	m.calls = append(m.calls, doc)
	n := len(m.calls)
	m.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if n == 1 {
		w.Header().Set("Retry-After-Ms", "1200")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":{"message":"Rate limit reached for gpt-4o-mini on requests per min (RPM)","type":"requests","code":"rate_limit_exceeded"}}`)
		return
	}
	fmt.Fprintf(w, `{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Summary of %s."},"finish_reason":"stop"}]}`, doc)
}

func (m *model) asked() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.calls...)
}

// summaries collects what the workers saved.
type summaries struct {
	mu   sync.Mutex
	byID map[string]string
}

func (s *summaries) save(_ context.Context, doc, summary string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byID[doc] = summary
	return nil
}

func (s *summaries) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

func setup(t *testing.T) (*gate.Gate, *openai.Client, *model, *summaries) {
	t.Helper()
	m := &model{}
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = srv.URL + "/v1"
	cfg.HTTPClient = &goopenai.Transport{Doer: cfg.HTTPClient}
	rdb := redistest.Server(t).Client(t)
	// A job refused while another probes the recovered upstream comes back
	// after UpstreamPolicy.Cooldown (10 s by default): 1 s keeps the test short.
	g, err := gate.New(rdb, gate.Options{Prefix: redistest.UniqueKey(t), Upstream: "openai", Retention: gate.Retention{Done: time.Hour},
		UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	return g, openai.NewClientWithConfig(cfg), m, &summaries{byID: map[string]string{}}
}

// Three documents, one of them twice, and a model whose first answer is a
// 429: every document is summarised once, the rate-limited one after the
// provider's hint, and the duplicate never calls the model.
// enqueue returns a check that the job has finished.
func check(t *testing.T, m *model, out *summaries, enqueue func(doc string) (finished func() bool)) {
	t.Helper()
	start := time.Now()
	for _, doc := range []string{"doc-1", "doc-2", "doc-3"} {
		enqueue(doc)
	}
	deadline := time.Now().Add(15 * time.Second)
	for out.len() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 documents summarised after 15 s; model asked %v", out.len(), m.asked())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("3 summaries in %v", time.Since(start))
	finished := enqueue("doc-1") // submitted again: Done, completed without a call
	for !finished() {
		if time.Now().After(deadline) {
			t.Fatal("the second job for doc-1 did not finish")
		}
		time.Sleep(10 * time.Millisecond)
	}
	asked := m.asked()
	if exp, got := 4, len(asked); exp != got {
		t.Fatalf("model calls: exp %d (one 429, three summaries), got %d: %v", exp, got, asked)
	}
	if elapsed := time.Since(start); elapsed < 1200*time.Millisecond {
		t.Fatalf("all done in %v, before the 429's 1.2 s hint ended", elapsed)
	}
	for doc, s := range out.byID {
		if exp := "Summary of " + doc + "."; s != exp {
			t.Errorf("%s: exp %q, got %q", doc, exp, s)
		}
	}
}

func TestAsynqWorker(t *testing.T) {
	g, client, m, out := setup(t)
	conn := asynq.RedisClientOpt{Addr: redistest.Server(t).Addr()}
	srv, mux := asynqServer(conn, asynq.Config{Concurrency: 4, TaskCheckInterval: 50 * time.Millisecond,
		DelayedTaskCheckInterval: 100 * time.Millisecond, LogLevel: asynq.FatalLevel}, g, client, out.save)
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown()
	enq := asynq.NewClient(conn)
	defer enq.Close()
	inspector := asynq.NewInspector(conn)
	defer inspector.Close()
	check(t, m, out, func(doc string) func() bool {
		info, err := enq.Enqueue(summariseTask(doc))
		if err != nil {
			t.Fatal(err)
		}
		return func() bool { // a completed task is deleted (no Retention)
			_, err := inspector.GetTaskInfo(info.Queue, info.ID)
			return errors.Is(err, asynq.ErrTaskNotFound)
		}
	})
}

func TestRiverWorker(t *testing.T) {
	g, client, m, out := setup(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.Shared(t).Database(t))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}
	rc, err := riverClient(pool, &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		FetchPollInterval: 50 * time.Millisecond,
		FetchCooldown:     10 * time.Millisecond,
		Logger:            slog.New(slog.NewTextHandler(io.Discard, nil)),
		TestOnly:          true,
	}, g, client, out.save)
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = rc.Stop(stopCtx)
	}()
	check(t, m, out, func(doc string) func() bool {
		res, err := rc.Insert(ctx, summariseArgs{Doc: doc}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return func() bool {
			row, err := rc.JobGet(ctx, res.Job.ID)
			return err == nil && row.State == rivertype.JobStateCompleted
		}
	})
}
