package main

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// pollJS waits until the JavaScript expression is true.
func pollJS(js string, within time.Duration) chromedp.Action {
	return chromedp.Poll(js, nil, chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(within))
}

// TestPageShowsResetFromAnotherProcess: a document failed permanently; an
// operator resets it from another process (another gate.Gate on the same
// Redis, as the retrygate CLI does). The page, which no longer polls,
// shows it Ready with its button enabled: pushed, since nothing else
// would tell it.
func TestPageShowsResetFromAnotherProcess(t *testing.T) {
	ctx := browser(t)
	srv := redistest.Server(t)
	cfg := testConfig()
	cfg.RedisURL = "redis://" + srv.Addr()
	s := startServer(t, cfg)

	const card = `li[data-doc="patient-history"]`
	if err := chromedp.Run(ctx,
		chromedp.Navigate(s.base),
		chromedp.WaitVisible(card+` .evaluate`),
		chromedp.Click(card+` .evaluate`),
		chromedp.WaitVisible(card+` .reset`),
		pollJS(`document.querySelector('`+card+` .evaluate').disabled`, 20*time.Second),
	); err != nil {
		t.Fatalf("evaluate into failed: %v", err)
	}
	other, err := gate.New(srv.Client(t), gate.Options{Prefix: "retrygate-demo"})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Reset(context.Background(), docJob("patient-history")); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Run(ctx,
		pollJS(`document.querySelector('`+card+` .state').textContent === 'Ready' && !document.querySelector('`+card+` .evaluate').disabled`, 10*time.Second),
	); err != nil {
		t.Fatalf("page not Ready after the reset: %v", err)
	}
}

// TestPageDoubleClickJoinsTheRunningCall: a double click on a slow
// document makes one model call, and both clicks get its result: the
// second request waits for the first (Prefer: wait) and is answered with
// the result the first stored.
func TestPageDoubleClickJoinsTheRunningCall(t *testing.T) {
	ctx := browser(t)
	cfg := testConfig()
	cfg.DoneTTL = 5 * time.Second
	s := startServer(t, cfg)

	const card = `li[data-doc="annual-filing"]`
	before := s.stats(t).UpstreamCalls
	var answers string
	if err := chromedp.Run(ctx,
		chromedp.Navigate(s.base),
		chromedp.WaitVisible(card+` .evaluate`),
		// Two clicks in a row, as a double click on a page that does not
		// disable the button while the call runs.
		chromedp.Click(card+` .evaluate`),
		chromedp.Click(card+` .evaluate`),
		pollJS(`document.querySelector('`+card+`').dataset.answers === '2'`, 10*time.Second),
		chromedp.AttributeValue(card, "data-answers", &answers, nil),
	); err != nil {
		t.Fatalf("double click: %v (answers %q)", err, answers)
	}
	if n, _ := strconv.Atoi(answers); n != 2 {
		t.Fatalf("answers %q, want 2", answers)
	}
	if exp, got := before+1, s.stats(t).UpstreamCalls; exp != got {
		t.Fatalf("model calls %d, want %d: the second click must join the first call", got, exp)
	}
	var text string
	if err := chromedp.Run(ctx, chromedp.Text(card+` .result`, &text)); err != nil || text == "" {
		t.Fatalf("result not shown: %q %v", text, err)
	}
}
