package gateasynq_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateasynq"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

func TestMain(m *testing.M) {
	if cfg := os.Getenv(workerEnv); cfg != "" {
		os.Exit(workerMain(cfg)) // a worker process of TestStormOneCallPerWindow
	}
	redistest.Main(m)
}

const taskType = "summarise"

// backend is a real Redis the test runs asynq and the gate on.
type backend struct {
	name  string
	addrs []string // one address, or a cluster's
	rdb   redis.UniversalClient
}

func (b backend) asynq() asynq.RedisConnOpt {
	if len(b.addrs) > 1 {
		return asynq.RedisClusterClientOpt{Addrs: b.addrs}
	}
	return asynq.RedisClientOpt{Addr: b.addrs[0]}
}

// backends are the shared real redis-server and 3-master cluster.
func backends(t *testing.T) []backend {
	var out []backend
	for _, tg := range redistest.RealTargets(t) {
		b := backend{name: tg.Name, rdb: tg.Client}
		switch c := tg.Client.(type) {
		case *redis.ClusterClient:
			b.addrs = c.Options().Addrs
		case *redis.Client:
			b.addrs = []string{c.Options().Addr}
		}
		out = append(out, b)
	}
	return out
}

// queueName is a queue of the test's own: the backends are shared.
func queueName() string { return "q" + strconv.FormatUint(queueSeq.Add(1), 10) }

var queueSeq atomic.Uint64

// payload is a task's body: the document it summarises.
type payload struct {
	Doc string `json:"doc"`
}

func byDocument(_ context.Context, t *asynq.Task) (string, error) {
	var p payload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return "", err
	}
	return "summarise:" + p.Doc, nil
}

// fixture is one test's gate, asynq server, client and inspector.
type fixture struct {
	b         backend
	g         *gate.Gate
	queue     string
	client    *asynq.Client
	inspector *asynq.Inspector
}

// serve starts an asynq server on queue with the gate's middleware around
// handler, polling fast so a retry runs within ~100 ms of its due second.
func serve(t *testing.T, b backend, opts gate.Options, handler asynq.HandlerFunc) *fixture {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = redistest.UniqueKey(t)
	}
	g, err := gate.New(b.rdb, opts)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{b: b, g: g, queue: queueName(), client: asynq.NewClient(b.asynq()), inspector: asynq.NewInspector(b.asynq())}
	srv := asynq.NewServer(b.asynq(), gateasynq.Config(asynq.Config{
		Concurrency:              4,
		Queues:                   map[string]int{f.queue: 1},
		TaskCheckInterval:        50 * time.Millisecond,
		DelayedTaskCheckInterval: 100 * time.Millisecond,
		ShutdownTimeout:          2 * time.Second,
		LogLevel:                 asynq.FatalLevel,
	}))
	mux := asynq.NewServeMux()
	mux.Use(gateasynq.Middleware(g, gateasynq.Options{Job: byDocument}))
	mux.Handle(taskType, handler)
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Shutdown()
		_ = f.client.Close()
		_ = f.inspector.Close()
	})
	return f
}

func (f *fixture) enqueue(t *testing.T, doc string) string {
	t.Helper()
	body, _ := json.Marshal(payload{Doc: doc})
	info, err := f.client.Enqueue(asynq.NewTask(taskType, body), asynq.Queue(f.queue), asynq.MaxRetry(5), asynq.Retention(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return info.ID
}

// waitState polls the task until it reaches state, for at most within.
func (f *fixture) waitState(t *testing.T, id string, state asynq.TaskState, within time.Duration) *asynq.TaskInfo {
	t.Helper()
	var info *asynq.TaskInfo
	waitFor(t, within, func() bool {
		var err error
		info, err = f.inspector.GetTaskInfo(f.queue, id)
		if err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
			t.Fatal(err)
		}
		return err == nil && info.State == state
	}, func() string {
		if info == nil {
			return "task " + id + " not found"
		}
		return "task " + id + " is " + info.State.String() + ", last error " + strconv.Quote(info.LastErr)
	})
	return info
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
