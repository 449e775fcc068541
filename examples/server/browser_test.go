package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browser starts headless Chromium for the test, or skips the test where
// it is missing (fails instead when RETRYGATE_REQUIRE_BROWSER=1).
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("RETRYGATE_REQUIRE_BROWSER") == "1" {
			t.Fatal("chromium not on PATH and RETRYGATE_REQUIRE_BROWSER=1")
		}
		t.Skip("chromium not on PATH: install Debian's chromium package to run the browser test")
	}
	// A fresh profile under the test's directory. A Chromium helper may
	// still write to it while exiting, so the cleanup below removes it,
	// retrying, before t.TempDir's own cleanup (which would fail the test
	// on a directory that refills) finds it.
	profile := filepath.Join(t.TempDir(), "chromium")
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("hide-scrollbars", true),
		// A page the browser considers in the background gets its timers
		// throttled, which would freeze the countdown.
		chromedp.Flag("disable-background-timer-throttling", true),
		chromedp.Flag("disable-backgrounding-occluded-windows", true),
		chromedp.Flag("disable-renderer-backgrounding", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1000, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(actx)
	// A backstop for a hung browser; every step polls with its own deadline.
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelBrowser()
		cancelAlloc() // kills Chromium and waits for it
		for deadline := time.Now().Add(time.Minute); os.RemoveAll(profile) != nil && time.Now().Before(deadline); {
			time.Sleep(50 * time.Millisecond)
		}
	})
	if err := chromedp.Run(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// screenshot saves the page as PNG for a person to look at: in
// $RETRYGATE_SCREENSHOT_DIR when set, else in the test's own directory, so
// concurrent runs never overwrite each other's.
func screenshot(t *testing.T, ctx context.Context, name string, width int64) {
	t.Helper()
	dir := os.Getenv("RETRYGATE_SCREENSHOT_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var png []byte
	if err := chromedp.Run(ctx,
		chromedp.EmulateViewport(width, 900),
		chromedp.FullScreenshot(&png, 100),
	); err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPageCountdown is what a user does: Evaluate a rate-limited document,
// watch the button turn into a countdown, wait for it to end, click again
// and see the result.
func TestPageCountdown(t *testing.T) {
	ctx := browser(t)
	cfg := testConfig()
	cfg.RateLimitHint = 4 * time.Second
	cfg.UpstreamHint = time.Minute // outlasts the test, however slow the machine
	srv := startServer(t, cfg)

	const card = `li[data-doc="supplier-contract"]`
	var text string
	disabled := func(want bool) chromedp.Action {
		js := `document.querySelector('` + card + ` .evaluate').disabled === ` + map[bool]string{true: "true", false: "false"}[want]
		return chromedp.Poll(js, nil, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(20*time.Second))
	}
	var clicked time.Time
	if err := chromedp.Run(ctx,
		chromedp.Navigate(srv.base),
		chromedp.WaitVisible(card+` .evaluate`),
		disabled(false),
		chromedp.ActionFunc(func(context.Context) error { clicked = time.Now(); return nil }),
		chromedp.Click(card+` .evaluate`),
		chromedp.WaitVisible(card+` .evaluate.countdown`),
		chromedp.Text(card+` .evaluate`, &text),
	); err != nil {
		t.Fatalf("click Evaluate: %v", err)
	}
	if !regexp.MustCompile(`^Retry in 0:0[1-4]$`).MatchString(text) {
		t.Fatalf("button %q, want the countdown Retry in 0:0x", text)
	}
	if err := chromedp.Run(ctx, disabled(true)); err != nil {
		t.Fatalf("button not disabled while cooling down: %v", err)
	}
	calls := srv.stats(t).UpstreamCalls
	if err := chromedp.Run(ctx, chromedp.Click(card+` .evaluate`)); err == nil {
		// A click on the disabled button must not reach the model.
		if got := srv.stats(t).UpstreamCalls; got != calls {
			t.Fatalf("upstream calls %d after clicking the disabled button, want %d", got, calls)
		}
	}
	screenshot(t, ctx, "cooling-desktop.png", 1000)

	// Enabled when the countdown ends, by the page's own clock: never
	// before the cooldown could have ended (load only makes it later), and
	// without waiting for the stream's heartbeat (15 s).
	if err := chromedp.Run(ctx, disabled(false)); err != nil {
		t.Fatalf("button not enabled after the countdown: %v", err)
	}
	if waited := time.Since(clicked); waited < cfg.RateLimitHint-500*time.Millisecond {
		t.Fatalf("button enabled %v after the click, before the %v cooldown ended", waited, cfg.RateLimitHint)
	}
	if err := chromedp.Run(ctx,
		chromedp.Click(card+` .evaluate`),
		chromedp.WaitVisible(card+` .result`),
		chromedp.Text(card+` .result`, &text),
	); err != nil {
		t.Fatalf("second click: %v", err)
	}
	if !strings.Contains(text, "400 units") {
		t.Fatalf("result %q, want the model's summary", text)
	}

	// The other states, for the screenshots: failed, and the provider-wide
	// pause with its banner.
	var banner string
	for i, a := range []chromedp.Action{
		chromedp.Click(`li[data-doc="patient-history"] .evaluate`),
		chromedp.WaitVisible(`li[data-doc="patient-history"] .reset`),
		chromedp.Click(`li[data-doc="welcome-letter"] .evaluate`),
		chromedp.WaitVisible(`li[data-doc="welcome-letter"] .result`),
		chromedp.Click(`li[data-doc="press-release"] .evaluate`),
		pollJS(`document.querySelector('#banner').classList.contains('show')`, 20*time.Second),
		chromedp.Text(`#banner-title`, &banner, chromedp.ByQuery),
	} {
		if err := chromedp.Run(ctx, a); err != nil {
			t.Fatalf("other states, step %d: %v", i, err)
		}
	}
	if exp := "Provider rate-limited — every job waits"; banner != exp {
		t.Fatalf("banner %q, want %q", banner, exp)
	}
	probe := `/^Next probe in (0:[0-5]\d|1:00)$/.test(document.querySelector('#banner .probe')?.textContent || '')`
	if err := chromedp.Run(ctx, pollJS(probe, 20*time.Second)); err != nil {
		t.Fatalf("banner's probe %s, want a countdown from the minute's hint: %v", pageText(t, ctx, "#banner .probe"), err)
	}
	if err := chromedp.Run(ctx, pollJS(`[...document.querySelectorAll('.evaluate')].every(b => b.disabled)`, 20*time.Second)); err != nil {
		t.Fatalf("every button should be disabled while the provider is paused: %v", err)
	}
	// A retry storm from the page: every retry is either the one model
	// call of its document or refused by the gate.
	var storm, refusedBefore string
	if err := chromedp.Run(ctx,
		chromedp.Text(`#refused`, &refusedBefore, chromedp.ByQuery),
		chromedp.Click(`#storm`, chromedp.ByQuery),
		pollJS(`document.querySelector('#storm-text').textContent.includes('→')`, 30*time.Second),
		chromedp.Text(`#storm-text`, &storm, chromedp.ByQuery),
	); err != nil {
		t.Fatalf("retry storm: %v", err)
	}
	retries := 20 * len(catalog) // the page sends 20 retries of every document
	m := regexp.MustCompile(`^` + strconv.Itoa(retries) + ` retries → (\d+) model calls?, (\d+) refused by the gate\.$`).FindStringSubmatch(storm)
	if m == nil {
		t.Fatalf("storm result %q", storm)
	}
	if calls, refused := atoi(t, m[1]), atoi(t, m[2]); calls > len(catalog) || calls+refused != retries {
		t.Fatalf("storm: %d calls and %d refusals, want at most one call per document and the rest refused", calls, refused)
	}
	// What the README says moves the refused counter: the storm does.
	moved := `Number(document.querySelector('#refused').textContent) >= ` + strconv.Itoa(atoi(t, refusedBefore)+atoi(t, m[2]))
	if err := chromedp.Run(ctx, pollJS(moved, 20*time.Second)); err != nil {
		t.Fatalf("refused counter %s after the storm's %s refusals (it was %s): %v", pageText(t, ctx, "#refused"), m[2], refusedBefore, err)
	}
	screenshot(t, ctx, "states-desktop.png", 1000)
	screenshot(t, ctx, "states-375.png", 375)
}
