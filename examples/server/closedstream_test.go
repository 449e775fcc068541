package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// logLines collects what the app logs for operators.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logLines) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// A browser that closes the page's event stream is not a Redis outage:
// nothing is logged for operators. A Redis that cannot be reached is.
func TestClosedStreamIsNotAnOutage(t *testing.T) {
	_, client := redistest.Miniredis(t)
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { down.Close() })
	for _, tc := range []struct {
		name    string
		client  gate.Client
		closed  bool
		outages int
	}{
		{"browser closed the stream", client, true, 0},
		{"redis down", down, false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := gate.New(tc.client, gate.Options{Prefix: "retrygate-demo"})
			if err != nil {
				t.Fatal(err)
			}
			logs := &logLines{}
			a := &app{gate: g, results: newResults(), stats: &stats{}, logf: logs.logf, shutdown: make(chan struct{}),
				pageStreams: &httpmw.Streams{Max: maxPageStreams}, places: newPlaces()}
			ctx, cancel := context.WithCancel(context.Background())
			if tc.closed {
				cancel()
			} else {
				defer cancel()
			}
			req := httptest.NewRequest(http.MethodGet, "/api/events", nil).WithContext(ctx)
			a.routes().ServeHTTP(httptest.NewRecorder(), req)
			var outages int
			for _, l := range logs.all() {
				if strings.Contains(l, gate.ErrUnavailable.Error()) {
					outages++
				}
			}
			if got := logs.all(); outages != tc.outages || len(got) != tc.outages {
				t.Fatalf("logged %q, want %d outage line(s) and nothing else", got, tc.outages)
			}
		})
	}
}
