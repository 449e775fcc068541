package gateasynq_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/stormtest"
)

// asynqLateness bounds how late a retry may run after the gate's wait:
// asynq schedules retries in whole seconds (Config rounds up, so never
// early), then its forwarder (DelayedTaskCheckInterval, 100 ms here) and
// an idle worker's poll (TaskCheckInterval, 50 ms) pass, plus scheduling
// slack on 2 shared cores.
const asynqLateness = time.Second + 100*time.Millisecond + 50*time.Millisecond + 250*time.Millisecond

// A 429 with retry-after-ms: the task runs again no earlier than the hint
// and within asynq's second of it, and the retry is not counted.
func TestRetryAtTheProvidersHint(t *testing.T) {
	const hint = 1500 * time.Millisecond
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			p := &stormtest.Provider{Respond: func(_ context.Context, n int) error {
				if n == 1 {
					return stormtest.RateLimitError(hint)
				}
				return nil
			}}
			f := serve(t, b, gate.Options{Upstream: "llm", Cooldown: 10 * time.Second, Backoff: gate.Backoff{Jitter: -1}},
				func(ctx context.Context, _ *asynq.Task) error { return p.Call(ctx) })
			id := f.enqueue(t, "doc-1")
			info := f.waitState(t, id, asynq.TaskStateCompleted, 10*time.Second)

			if exp, got := 2, p.Calls(); exp != got {
				t.Fatalf("upstream calls: exp %d, got %d", exp, got)
			}
			gap := p.Gap(0, 1)
			if gap < hint || gap > hint+asynqLateness {
				t.Fatalf("the retry ran %v after the 429, want within [%v, %v]", gap, hint, hint+asynqLateness)
			}
			if exp, got := 0, info.Retried; exp != got {
				t.Fatalf("asynq's retry count: exp %d (a provider-wide 429 is not the task's failure), got %d", exp, got)
			}
			t.Logf("%s: retried %v after the 429 (hint %v)", b.name, gap.Round(time.Millisecond), hint)
		})
	}
}

// A permanent failure makes one call and archives the task, its reason in
// asynq's own record.
func TestPermanentFailureIsArchivedWithItsReason(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			p := &stormtest.Provider{Respond: func(context.Context, int) error {
				return &classify.HTTPError{StatusCode: http.StatusBadRequest, Type: "invalid_request_error", Code: "context_length_exceeded"}
			}}
			f := serve(t, b, gate.Options{}, func(ctx context.Context, _ *asynq.Task) error { return p.Call(ctx) })
			id := f.enqueue(t, "doc-1")
			info := f.waitState(t, id, asynq.TaskStateArchived, 10*time.Second)
			if exp, got := 1, p.Calls(); exp != got {
				t.Fatalf("upstream calls: exp %d, got %d", exp, got)
			}
			if !strings.Contains(info.LastErr, classify.ReasonContextLength) {
				t.Fatalf("the archived task's last error %q does not name the reason %q", info.LastErr, classify.ReasonContextLength)
			}
			// A new task for the same document is archived without a call.
			id2 := f.enqueue(t, "doc-1")
			info2 := f.waitState(t, id2, asynq.TaskStateArchived, 10*time.Second)
			if exp, got := 1, p.Calls(); exp != got {
				t.Fatalf("upstream calls after a second task for the failed job: exp %d, got %d", exp, got)
			}
			if !strings.Contains(info2.LastErr, classify.ReasonContextLength) {
				t.Fatalf("the refused task's last error %q does not name the reason", info2.LastErr)
			}
		})
	}
}

// A refusal never counts toward MaxRetry; a failure of the job's own does.
// The cooldown is long enough that the refusal goes back to asynq (a
// worker waits out only one shorter than a second) however late a worker
// picks the task up.
func TestOnlyTheJobsOwnFailuresCount(t *testing.T) {
	const cooldown = 2500 * time.Millisecond
	b := backends(t)[0]
	errServer := &classify.HTTPError{StatusCode: http.StatusInternalServerError}
	p := &stormtest.Provider{Respond: func(context.Context, int) error { return nil }}
	failOnce := map[string]bool{}
	f := serve(t, b, gate.Options{Cooldown: cooldown, Backoff: gate.Backoff{Jitter: -1}}, func(ctx context.Context, task *asynq.Task) error {
		if job, _ := byDocument(ctx, task); job == "summarise:flaky" && !failOnce[job] {
			failOnce[job] = true // one handler goroutine at a time runs this job
			return errServer
		}
		return p.Call(ctx)
	})
	ctx := context.Background()
	// doc-cool is cooling before its task is enqueued: the task is refused.
	if err := f.g.Do(ctx, "summarise:doc-cool", func(context.Context, *gate.Lease) error { return errServer }); !errors.Is(err, gate.ErrCoolingDown) {
		t.Fatalf("setting up the cooldown: %v", err)
	}
	refused := f.enqueue(t, "doc-cool")
	flaky := f.enqueue(t, "flaky")

	info := f.waitState(t, refused, asynq.TaskStateRetry, 5*time.Second)
	if !strings.Contains(info.LastErr, "cooling down") || info.Retried != 0 {
		t.Fatalf("refused task: exp retry state, Retried 0, a cooling-down error; got Retried %d, %q", info.Retried, info.LastErr)
	}
	info = f.waitState(t, refused, asynq.TaskStateCompleted, 10*time.Second)
	if exp, got := 0, info.Retried; exp != got {
		t.Fatalf("refused task's retry count: exp %d, got %d", exp, got)
	}
	info = f.waitState(t, flaky, asynq.TaskStateCompleted, 10*time.Second)
	if exp, got := 1, info.Retried; exp != got {
		t.Fatalf("flaky task's retry count: exp %d (its own 500 counts), got %d", exp, got)
	}
	if exp, got := 2, p.Calls(); exp != got {
		t.Fatalf("successful upstream calls: exp %d, got %d", exp, got)
	}
}

// A duplicate task enqueued while the first runs never calls the model:
// it comes back after the running lease and finds the job Done.
func TestDuplicateTaskNeverCallsTwice(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			p := &stormtest.Provider{Respond: func(ctx context.Context, _ int) error {
				select {
				case <-time.After(700 * time.Millisecond):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}}
			f := serve(t, b, gate.Options{Lease: time.Second, Retention: gate.Retention{Done: time.Hour}},
				func(ctx context.Context, _ *asynq.Task) error { return p.Call(ctx) })
			first := f.enqueue(t, "doc-1")
			waitFor(t, 5*time.Second, func() bool { return p.Calls() == 1 }, func() string { return "the first task never called" })
			dup := f.enqueue(t, "doc-1")
			f.waitState(t, first, asynq.TaskStateCompleted, 5*time.Second)
			info := f.waitState(t, dup, asynq.TaskStateCompleted, 5*time.Second)
			if exp, got := 1, p.Calls(); exp != got {
				t.Fatalf("upstream calls: exp %d, got %d", exp, got)
			}
			if exp, got := 0, info.Retried; exp != got {
				t.Fatalf("the duplicate's retry count: exp %d, got %d", exp, got)
			}
		})
	}
}
