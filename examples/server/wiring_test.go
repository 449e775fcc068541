package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// TestRoutesNameOneJob: the evaluate route, its retry-status route and the
// page's stream (docJob) name one job per document, so the page's
// countdown is the evaluate route's.
func TestRoutesNameOneJob(t *testing.T) {
	_, client := redistest.Miniredis(t)
	g, err := gate.New(client, gate.Options{Prefix: "retrygate-demo"})
	if err != nil {
		t.Fatal(err)
	}
	h := (&app{gate: g, results: newResults(), stats: &stats{}, logf: t.Logf}).routes()
	for _, d := range catalog {
		retry, err := httpmw.JobOf(h, httptest.NewRequest(http.MethodPost, "/documents/"+d.ID+"/evaluate", nil))
		if err != nil {
			t.Fatal(err)
		}
		status, err := httpmw.JobOf(h, httptest.NewRequest(http.MethodGet, "/documents/"+d.ID+"/retry-status", nil))
		if err != nil {
			t.Fatal(err)
		}
		if retry != status || retry != docJob(d.ID) {
			t.Errorf("%s: evaluate %q, retry-status %q, page stream %q: want one job", d.ID, retry, status, docJob(d.ID))
		}
	}
}
