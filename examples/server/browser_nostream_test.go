package main

import (
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// statusPolls is what the page knows of its GET /api/status requests (the
// one at load included) and of its own age, from the Resource Timing API.
const statusPolls = `({polls: performance.getEntriesByType('resource').filter(e => new URL(e.name).pathname === '/api/status').length,
	ms: performance.now()})`

type pollCount struct {
	Polls int     `json:"polls"`
	MS    float64 `json:"ms"`
}

// TestPageWithoutItsStream: with its event stream cut, the page still
// shows what the server says: a job failed before the page loaded is
// Failed from the first paint (it was "Ready / Evaluate again"), and a
// cooldown and a reset made by another client show within a few polls of
// GET /api/status. Without the fallback the cards never change. The
// stream is cut the two ways a page meets: refused (blocked, as a
// firewall or an extension does; EventSource errs) and silent (the
// request hangs, as behind a proxy that buffers server-sent events; no
// error ever comes). The page polls at most once a second; with its
// stream live it does not poll at all.
func TestPageWithoutItsStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		cut  chromedp.Action // nil: the stream is not cut
	}{
		{"refused", chromedp.Tasks{network.Enable(), network.SetBlockedURLs([]string{"*/api/events"})}},
		// Paused requests wait for a ContinueRequest that never comes.
		{"silent", fetch.Enable().WithPatterns([]*fetch.RequestPattern{{URLPattern: "*/api/events", RequestStage: fetch.RequestStageRequest}})},
		{"streamed", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := browser(t)
			cfg := testConfig()
			cfg.RateLimitHint = time.Minute // testConfig's MaxCooldown: the cooldown outlasts the test, however slow the machine
			s := startServer(t, cfg)
			if r := s.evaluate(t, "patient-history"); r.code != http.StatusUnprocessableEntity {
				t.Fatalf("patient-history: %d %s, want 422 (failed)", r.code, r.raw)
			}

			const failed = `li[data-doc="patient-history"]`
			if tc.cut != nil {
				if err := chromedp.Run(ctx, tc.cut); err != nil {
					t.Fatalf("cut the stream: %v", err)
				}
			}
			// Read at once, without polling: the first paint is the server's.
			var first []string
			if err := chromedp.Run(ctx,
				chromedp.Navigate(s.base),
				chromedp.WaitVisible(failed+` .evaluate`),
				chromedp.Evaluate(`[document.querySelector('`+failed+` .state').textContent, document.querySelector('`+failed+` .evaluate').textContent]`, &first),
			); err != nil {
				t.Fatal(err)
			}
			if exp := []string{"Failed", "Won’t retry"}; first[0] != exp[0] || first[1] != exp[1] {
				t.Fatalf("failed job at load: pill and button %q, want %q", first, exp)
			}
			var live pollCount
			if tc.cut == nil {
				// Once the stream has delivered, the page stops polling.
				if err := chromedp.Run(ctx,
					pollJS(`document.querySelector('`+failed+`').dataset.updates >= 1`, 20*time.Second),
					chromedp.Evaluate(statusPolls, &live),
				); err != nil {
					t.Fatalf("the stream never delivered: %v", err)
				}
			}

			// Another client cools a document and resets the failed one.
			if r := s.evaluate(t, "supplier-contract"); r.code != http.StatusTooManyRequests {
				t.Fatalf("supplier-contract: %d %s, want 429", r.code, r.raw)
			}
			const cooling = `li[data-doc="supplier-contract"]`
			if err := chromedp.Run(ctx, pollJS(`document.querySelector('`+cooling+` .state').textContent === 'Cooling down' &&
				document.querySelector('`+cooling+` .evaluate').disabled &&
				/^Retry in (0:[0-5]\d|1:00)$/.test(document.querySelector('`+cooling+` .evaluate').textContent)`, 30*time.Second)); err != nil {
				t.Fatalf("the cooldown another client caused: pill %s, button %s: %v",
					pageText(t, ctx, cooling+` .state`), pageText(t, ctx, cooling+` .evaluate`), err)
			}
			if r := s.do(t, http.MethodPost, "/documents/patient-history/reset"); r.code != http.StatusNoContent {
				t.Fatalf("reset: %d %s", r.code, r.raw)
			}
			if err := chromedp.Run(ctx, pollJS(`document.querySelector('`+failed+` .state').textContent === 'Ready' &&
				!document.querySelector('`+failed+` .evaluate').disabled`, 30*time.Second)); err != nil {
				t.Fatalf("the reset another client made: pill %s: %v", pageText(t, ctx, failed+` .state`), err)
			}

			var end pollCount
			var streamed bool
			if err := chromedp.Run(ctx,
				chromedp.Evaluate(statusPolls, &end),
				chromedp.Evaluate(`[...document.querySelectorAll('li.doc')].some(li => li.dataset.updates)`, &streamed),
			); err != nil {
				t.Fatal(err)
			}
			if tc.cut == nil {
				if end.Polls != live.Polls {
					t.Errorf("%d polls of /api/status while the stream was live, want none", end.Polls-live.Polls)
				}
				return
			}
			if streamed {
				t.Fatal("a stream update reached the page: the stream was not cut, and the test proves nothing")
			}
			// The load's request, then at most one a second: a page that
			// polled on every render (four a second) would be far above.
			if max := int(end.MS/1000) + 2; end.Polls < 2 || end.Polls > max {
				t.Errorf("%d requests of /api/status in %.1f s: want the load's and some polls, at most %d", end.Polls, end.MS/1000, max)
			}
		})
	}
}
