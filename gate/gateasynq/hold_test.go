package gateasynq_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/stormtest"
)

// refusals counts the gate's refusals of calls (EventRefused).
type refusals struct{ n atomic.Int32 }

func (r *refusals) Observe(_ context.Context, e gate.Event) {
	if e.Kind == gate.EventRefused {
		r.n.Add(1)
	}
}

// coolFor makes doc's job cool for the gate's Cooldown (a 500 of its own)
// and returns when the cooldown ends at the earliest: it starts at the
// settle, after this call began.
func coolFor(t *testing.T, f *fixture, doc string, cooldown time.Duration) time.Time {
	t.Helper()
	began := time.Now()
	err := f.g.Do(context.Background(), "summarise:"+doc, func(context.Context, *gate.Lease) error {
		return &classify.HTTPError{StatusCode: http.StatusInternalServerError}
	})
	if !errors.Is(err, gate.ErrCoolingDown) {
		t.Fatalf("setting up the cooldown: %v", err)
	}
	return began.Add(cooldown)
}

// A refusal shorter than a second is waited out in the worker: the task
// runs when the gate's wait ends, in the same run, and asynq never sees
// it (no retry, no error recorded), where handing it back would cost it
// up to a second more.
func TestShortRefusalIsWaitedInTheWorker(t *testing.T) {
	const cooldown = 900 * time.Millisecond // under the worker's hold
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			var (
				mu     sync.Mutex
				called time.Time
			)
			obs := &refusals{}
			f := serve(t, b, gate.Options{Cooldown: cooldown, Backoff: gate.Backoff{Jitter: -1}, Observer: obs},
				func(context.Context, *asynq.Task) error {
					mu.Lock()
					called = time.Now()
					mu.Unlock()
					return nil
				})
			ends := coolFor(t, f, "doc-1", cooldown)
			info := f.waitState(t, f.enqueue(t, "doc-1"), asynq.TaskStateCompleted, 5*time.Second)
			if obs.n.Load() == 0 {
				t.Fatal("the task was never refused: it ran after the cooldown")
			}
			if info.Retried != 0 || info.LastErr != "" {
				t.Fatalf("the task went back to asynq: Retried %d, last error %q", info.Retried, info.LastErr)
			}
			mu.Lock()
			defer mu.Unlock()
			// A cooldown's end is read on Redis's clock: allow its rounding.
			if early := ends.Sub(called); early > 5*time.Millisecond {
				t.Fatalf("the task ran %v before the cooldown ended", early)
			}
		})
	}
}

// A refusal the worker could wait out goes back to asynq when the task's
// deadline is within a second: the hold never runs a task into its
// deadline, which asynq counts as a failure whatever the handler returns.
func TestRefusalNearTheDeadlineGoesBackToAsynq(t *testing.T) {
	const cooldown = 900 * time.Millisecond
	b := backends(t)[0]
	obs := &refusals{}
	f := serve(t, b, gate.Options{Cooldown: cooldown, Backoff: gate.Backoff{Jitter: -1}, Observer: obs},
		func(context.Context, *asynq.Task) error { return nil })
	coolFor(t, f, "doc-1", cooldown)
	body, _ := json.Marshal(payload{Doc: "doc-1"})
	// asynq keeps a Timeout in whole seconds: one second is the least.
	ti, err := f.client.Enqueue(asynq.NewTask(taskType, body), asynq.Queue(f.queue), asynq.MaxRetry(5),
		asynq.Retention(time.Hour), asynq.Timeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	info := f.waitState(t, ti.ID, asynq.TaskStateCompleted, 5*time.Second)
	if obs.n.Load() == 0 {
		t.Fatal("the task was never refused: it ran after the cooldown")
	}
	if info.Retried != 0 || !strings.Contains(info.LastErr, "cooling down") {
		t.Fatalf("exp the refusal handed back to asynq, not counted: Retried %d, last error %q", info.Retried, info.LastErr)
	}
}

// While an upstream refuses with waits of a second or less (a young probe
// in flight), a refused task waits in its worker; once the wait grows past
// a second (the probe runs on: gate/retry.go), and never later than 5 s
// into the run, it goes back to asynq: the worker turns over to other
// tasks. The retry is not counted, and the task completes once the probe
// settles.
func TestHeldTaskGoesBack(t *testing.T) {
	const holdRun = 5 * time.Second // the documented bound
	b := backends(t)[0]
	obs := &firstRefusal{job: "summarise:doc-1"}
	f := serve(t, b, gate.Options{Upstream: "llm", Backoff: gate.Backoff{Jitter: -1}, Observer: obs},
		func(context.Context, *asynq.Task) error { return nil })
	ctx := context.Background()
	// A 429 with a 50 ms hint cools the upstream; the first acquire after
	// it probes, and holds the probe while this test runs.
	if err := f.g.Do(ctx, "summarise:first", func(context.Context, *gate.Lease) error {
		return stormtest.RateLimitError(50 * time.Millisecond)
	}); err == nil {
		t.Fatalf("cooling the upstream: %v", err)
	}
	var probe *gate.Lease
	waitFor(t, 5*time.Second, func() bool {
		var err error
		probe, err = f.g.Acquire(ctx, "summarise:probe")
		return err == nil
	}, func() string { return "the probe was never admitted" })
	defer func() { _ = probe.Release(ctx) }()

	id := f.enqueue(t, "doc-1")
	info := f.waitState(t, id, asynq.TaskStateRetry, holdRun+5*time.Second)
	if obs.at().IsZero() {
		t.Fatal("the task was never refused")
	}
	if held := time.Since(obs.at()); held < 900*time.Millisecond || held > holdRun+time.Second {
		t.Fatalf("the task went back to asynq %v after its first refusal, want once the wait passed a second, within %v", held, holdRun)
	}
	if info.Retried != 0 || !strings.Contains(info.LastErr, "retry in") {
		t.Fatalf("exp the refusal handed back, not counted: Retried %d, last error %q", info.Retried, info.LastErr)
	}
	if err := probe.Succeed(ctx); err != nil {
		t.Fatal(err)
	}
	if info := f.waitState(t, id, asynq.TaskStateCompleted, 5*time.Second); info.Retried != 0 {
		t.Fatalf("asynq's retry count: exp 0, got %d", info.Retried)
	}
}

// firstRefusal records when the gate first refused a call of job.
type firstRefusal struct {
	job   string
	mu    sync.Mutex
	first time.Time
}

func (r *firstRefusal) Observe(_ context.Context, e gate.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Kind == gate.EventRefused && e.Job == r.job && r.first.IsZero() {
		r.first = time.Now()
	}
}

func (r *firstRefusal) at() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first
}
