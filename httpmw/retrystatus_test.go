package httpmw_test

import (
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
)

// RetryStatusOf, for a page that reports many jobs over one stream: the
// caller's RetryIn words the message, and nil means the default sentence.
func TestRetryStatusOfWordsTheWait(t *testing.T) {
	st := gate.Status{Job: "doc", State: gate.CoolingDown, RetryAfter: 90 * time.Second, Attempts: 2, Reason: "timeout"}
	custom := func(d time.Duration) string { return "réessayez dans " + d.String() }
	if exp, got := "réessayez dans 1m30s", httpmw.RetryStatusOf(st, custom).Message; exp != got {
		t.Fatalf("custom RetryIn: exp %q, got %q", exp, got)
	}
	out := httpmw.RetryStatusOf(st, nil)
	if exp := "Retry available in 1 min 30 s."; out.Message != exp || out.JobState != "cooling_down" || out.RetryAfterSeconds != 90 || out.Attempts != 2 {
		t.Fatalf("default RetryIn: %+v, want message %q", out, exp)
	}
}
