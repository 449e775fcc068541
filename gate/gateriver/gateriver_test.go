package gateriver_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/stormtest"
)

// riverLateness bounds how late a snoozed job may run after the gate's
// wait: River makes a snooze of under 5 s available at once with its time
// set, and a producer polling every 50 ms fetches it, plus scheduling
// slack on 2 shared cores.
const riverLateness = 50*time.Millisecond + 250*time.Millisecond

// A 429 with retry-after-ms: the job runs again no earlier than the hint
// and within a second of it, and the snooze is not an attempt.
func TestRetryAtTheProvidersHint(t *testing.T) {
	const hint = 1500 * time.Millisecond
	p := &stormtest.Provider{Respond: func(_ context.Context, n int) error {
		if n == 1 {
			return stormtest.RateLimitError(hint)
		}
		return nil
	}}
	f := serve(t, gate.Options{Upstream: "llm", Cooldown: 10 * time.Second, Backoff: gate.Backoff{Jitter: -1}}, calling(p))
	id := f.insert(t, "doc-1")
	row := f.waitState(t, id, rivertype.JobStateCompleted, 10*time.Second)
	if exp, got := 2, p.Calls(); exp != got {
		t.Fatalf("upstream calls: exp %d, got %d", exp, got)
	}
	gap := p.Gap(0, 1)
	if gap < hint || gap > hint+riverLateness {
		t.Fatalf("the retry ran %v after the 429, want within [%v, %v]", gap, hint, hint+riverLateness)
	}
	if row.Attempt != 1 || snoozes(row) != 1 || len(row.Errors) != 0 {
		t.Fatalf("job row: exp attempt 1, 1 snooze, no errors; got attempt %d, %d snoozes, errors %s", row.Attempt, snoozes(row), lastError(row))
	}
	t.Logf("retried %v after the 429 (hint %v)", gap.Round(time.Millisecond), hint)
}

// A permanent failure makes one call and cancels the job, its reason in
// the job row.
func TestPermanentFailureIsCancelledWithItsReason(t *testing.T) {
	p := &stormtest.Provider{Respond: func(context.Context, int) error {
		return &classify.HTTPError{StatusCode: http.StatusBadRequest, Type: "invalid_request_error", Code: "context_length_exceeded"}
	}}
	f := serve(t, gate.Options{}, calling(p))
	row := f.waitState(t, f.insert(t, "doc-1"), rivertype.JobStateCancelled, 10*time.Second)
	if exp, got := 1, p.Calls(); exp != got {
		t.Fatalf("upstream calls: exp %d, got %d", exp, got)
	}
	if !strings.Contains(lastError(row), classify.ReasonContextLength) {
		t.Fatalf("the cancelled job's error %s does not name the reason %q", lastError(row), classify.ReasonContextLength)
	}
	// A new job for the same document is cancelled without a call.
	row = f.waitState(t, f.insert(t, "doc-1"), rivertype.JobStateCancelled, 10*time.Second)
	if exp, got := 1, p.Calls(); exp != got {
		t.Fatalf("upstream calls after a second job for the failed document: exp %d, got %d", exp, got)
	}
	if !strings.Contains(lastError(row), classify.ReasonContextLength) {
		t.Fatalf("the refused job's error %s does not name the reason", lastError(row))
	}
}

// A refusal is never an attempt; a failure of the job's own is.
func TestOnlyTheJobsOwnFailuresCount(t *testing.T) {
	const cooldown = 1500 * time.Millisecond
	errServer := &classify.HTTPError{StatusCode: http.StatusInternalServerError}
	p := &stormtest.Provider{Respond: func(context.Context, int) error { return nil }}
	flakyFailed := false
	f := serve(t, gate.Options{Cooldown: cooldown, Backoff: gate.Backoff{Jitter: -1}}, func(ctx context.Context, doc string) error {
		if doc == "flaky" && !flakyFailed {
			flakyFailed = true // one worker at a time runs this job
			return errServer
		}
		return p.Call(ctx)
	})
	ctx := context.Background()
	if err := f.g.Do(ctx, "summarise:doc-cool", func(context.Context, *gate.Lease) error { return errServer }); !errors.Is(err, gate.ErrCoolingDown) {
		t.Fatalf("setting up the cooldown: %v", err)
	}
	refused := f.insert(t, "doc-cool")
	flaky := f.insert(t, "flaky")

	row := f.waitState(t, refused, rivertype.JobStateCompleted, 5*time.Second)
	if row.Attempt != 1 || snoozes(row) < 1 || len(row.Errors) != 0 {
		t.Fatalf("refused job: exp attempt 1, snoozed, no errors; got attempt %d, %d snoozes, errors %s", row.Attempt, snoozes(row), lastError(row))
	}
	// River's own retry of the 500 (after ~1 s) comes before the gate's
	// 1.5 s cooldown ends: refused and snoozed, not a second attempt.
	row = f.waitState(t, flaky, rivertype.JobStateCompleted, 10*time.Second)
	if row.Attempt != 2 || len(row.Errors) != 1 || snoozes(row) < 1 {
		t.Fatalf("flaky job: exp attempt 2 with its 500 recorded and the early retry snoozed, got attempt %d, %d errors, %d snoozes",
			row.Attempt, len(row.Errors), snoozes(row))
	}
	if exp, got := 2, p.Calls(); exp != got {
		t.Fatalf("successful upstream calls: exp %d, got %d", exp, got)
	}
}

// A duplicate job inserted while the first runs never calls the model:
// it is snoozed for the running lease and finds the job Done.
func TestDuplicateJobNeverCallsTwice(t *testing.T) {
	// The first call runs until the duplicate has been snoozed, not for a
	// fixed time: on a loaded machine River may not pick the duplicate up
	// within a fixed call, and it would then find the job Done unsnoozed.
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	p := &stormtest.Provider{Respond: func(ctx context.Context, _ int) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	f := serve(t, gate.Options{Lease: time.Second, Retention: gate.Retention{Done: time.Hour}}, calling(p))
	t.Cleanup(free) // before serve's cleanup stops the client
	first := f.insert(t, "doc-1")
	waitFor(t, 5*time.Second, func() bool { return p.Calls() == 1 }, func() string { return "the first job never called" })
	dup := f.insert(t, "doc-1")
	var row *rivertype.JobRow
	waitFor(t, 10*time.Second, func() bool {
		var err error
		if row, err = f.client.JobGet(context.Background(), dup); err != nil {
			t.Fatal(err)
		}
		return snoozes(row) >= 1
	}, func() string { return "the duplicate was not snoozed while the first ran: " + string(row.State) })
	free()
	f.waitState(t, first, rivertype.JobStateCompleted, 5*time.Second)
	row = f.waitState(t, dup, rivertype.JobStateCompleted, 5*time.Second)
	if exp, got := 1, p.Calls(); exp != got {
		t.Fatalf("upstream calls: exp %d, got %d", exp, got)
	}
	if row.Attempt != 1 || snoozes(row) < 1 {
		t.Fatalf("the duplicate: exp attempt 1 after a snooze, got attempt %d, %d snoozes", row.Attempt, snoozes(row))
	}
}
