package httpmw_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A request whose own context ended before the gate could answer (a
// client that left, a timeout middleware's deadline) is the caller's:
// nothing reaches OnError, which is for Redis and the app's faults.
func TestCallerContextIsNotReported(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{})
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
	}{
		{"cancelled", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			return ctx, cancel
		}},
		{"deadline passed", func() (context.Context, context.CancelFunc) {
			return context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var errs []error
			h := router(g, httpmw.Options{OnError: func(_ *http.Request, err error) { errs = append(errs, err) }},
				func(http.ResponseWriter, *http.Request) { t.Error("the handler ran for a caller that left") })
			ctx, cancel := tc.ctx()
			defer cancel()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/documents/42/evaluate", nil).WithContext(ctx))
			if len(errs) != 0 {
				t.Fatalf("OnError got %v for the caller's own context", errs)
			}
		})
	}
}
