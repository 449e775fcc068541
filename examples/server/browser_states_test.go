package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/retrygate/retrygate/gate"
)

// cardText returns the text of sel inside the card of document id.
func cardText(t *testing.T, ctx context.Context, id, sel string) string {
	t.Helper()
	var s string
	if err := chromedp.Run(ctx, chromedp.Text(`li[data-doc="`+id+`"] `+sel, &s, chromedp.ByQuery)); err != nil {
		t.Fatalf("%s %s: %v", id, sel, err)
	}
	return s
}

// disabledSayWhy checks every disabled Evaluate button: its label is not
// "Evaluate", it has a title, and the line it is described by is visible
// text.
const disabledSayWhy = `[...document.querySelectorAll('.evaluate')].filter(b => b.disabled).every(b =>
	!/^Evaluate/.test(b.textContent) && b.title !== '' &&
	document.getElementById(b.getAttribute('aria-describedby')).textContent.trim() !== '')`

// TestPageSaysOneThing: the page's parts agree, and say what they know.
//   - The refused counter counts refusals as they happen, sent by anyone
//     (it moved only when the page itself fetched the stats).
//   - A card that cooled down remembers its last failure after the
//     cooldown, across a reload (it said "Not evaluated yet").
//   - A disabled button says why, also for the seconds a success is kept
//     as done (it was greyed with no reason).
//   - A paused upstream's banner shows when the next probe is due, the
//     same countdown as the cards (it said "an operator must act" beside
//     cards counting down).
func TestPageSaysOneThing(t *testing.T) {
	ctx := browser(t)
	cfg := testConfig()
	cfg.RateLimitHint = 6 * time.Second
	cfg.DoneTTL = 6 * time.Second
	// The first pause is the upstream's cooldown: it outlasts the test,
	// however slow the machine.
	cfg.UpstreamCooldown, cfg.UpstreamPause = 20*time.Second, 20*time.Second
	s := startServer(t, cfg)
	if err := chromedp.Run(ctx, chromedp.Navigate(s.base), chromedp.WaitVisible(`li[data-doc="board-minutes"] .evaluate`)); err != nil {
		t.Fatal(err)
	}

	// Refusals counted live: another client cools a document and retries it.
	if r := s.evaluate(t, "supplier-contract"); r.code != 429 {
		t.Fatalf("first call: %d", r.code)
	}
	for i := 0; i < 5; i++ {
		if r := s.evaluate(t, "supplier-contract"); r.code != 429 {
			t.Fatalf("retry %d: %d", i, r.code)
		}
	}
	// Pushed: the page no longer fetches the stats after a click of its
	// own, so without the stream the counters would never move (its
	// heartbeat comes every 15 s).
	if err := chromedp.Run(ctx, pollJS(`document.querySelector('#refused').textContent === '5' && document.querySelector('#calls').textContent === '1'`, 10*time.Second)); err != nil {
		t.Fatalf("counters not live: refused %q, calls %q: %v", pageText(t, ctx, "#refused"), pageText(t, ctx, "#calls"), err)
	}
	// The card, cooled by another client, shows the countdown on its button.
	if got := cardText(t, ctx, "supplier-contract", ".evaluate"); !regexp.MustCompile(`^Retry in 0:0[1-6]$`).MatchString(got) {
		t.Errorf("cooling card's button %q, want Retry in 0:0x", got)
	}
	if err := chromedp.Run(ctx, pollJS(disabledSayWhy, 10*time.Second)); err != nil {
		t.Errorf("a disabled button does not say why while cooling: %v", err)
	}

	// After the cooldown the card remembers the failure.
	const lastFailure = "Last attempt failed: the model provider rate-limited the request. Evaluate again. rate_limited"
	if err := chromedp.Run(ctx, pollJS(`document.querySelector('li[data-doc="supplier-contract"] .msg').textContent === '`+lastFailure+`'`, 20*time.Second)); err != nil {
		t.Fatalf("after the cooldown: %q: %v", cardText(t, ctx, "supplier-contract", ".msg"), err)
	}
	if got := cardText(t, ctx, "supplier-contract", ".evaluate"); got != "Evaluate again" {
		t.Errorf("button after the cooldown %q", got)
	}
	screenshot(t, ctx, "last-failure-desktop.png", 1000)
	if err := chromedp.Run(ctx, chromedp.Reload(), chromedp.WaitVisible(`li[data-doc="supplier-contract"] .evaluate`),
		pollJS(`document.querySelector('li[data-doc="supplier-contract"] .msg').textContent === '`+lastFailure+`'`, 10*time.Second)); err != nil {
		t.Fatalf("after a reload the failure is forgotten: %q: %v", cardText(t, ctx, "supplier-contract", ".msg"), err)
	}

	// A success is kept Done: the button says until when, and why.
	const welcome = `li[data-doc="welcome-letter"]`
	if err := chromedp.Run(ctx, chromedp.Click(welcome+` .evaluate`), chromedp.WaitVisible(welcome+` .result`),
		pollJS(`/^Again in 0:0[1-6]$/.test(document.querySelector('`+welcome+` .evaluate').textContent)`, 10*time.Second)); err != nil {
		t.Fatalf("kept Done: button %q: %v", cardText(t, ctx, "welcome-letter", ".evaluate"), err)
	}
	if got := cardText(t, ctx, "welcome-letter", ".msg"); !strings.HasPrefix(got, "Evaluated just now. The result is kept for a few seconds") {
		t.Errorf("kept Done: line %q", got)
	}
	if err := chromedp.Run(ctx, pollJS(disabledSayWhy, 10*time.Second)); err != nil {
		t.Errorf("the done button does not say why it is disabled: %v", err)
	}
	screenshot(t, ctx, "done-desktop.png", 1000)
	if err := chromedp.Run(ctx, pollJS(`!document.querySelector('`+welcome+` .evaluate').disabled && document.querySelector('`+welcome+` .evaluate').textContent === 'Evaluate again'`, 20*time.Second)); err != nil {
		t.Fatalf("the done mark ended but the button is %q: %v", cardText(t, ctx, "welcome-letter", ".evaluate"), err)
	}

	// The credit balance runs out: the upstream pauses; the banner counts
	// down to the next probe, with the cards.
	// The banner and the card are read in one evaluation, so the time
	// between two reads on a loaded machine cannot part them.
	var seen []string
	if err := chromedp.Run(ctx,
		chromedp.Click(`li[data-doc="board-minutes"] .evaluate`),
		pollJS(`document.querySelector('#banner').classList.contains('show') && document.querySelector('li[data-doc="welcome-letter"] .evaluate').classList.contains('countdown')`, 20*time.Second),
		chromedp.Evaluate(`[document.querySelector('#banner').textContent, document.querySelector('#banner .probe').textContent, document.querySelector('li[data-doc="welcome-letter"] .evaluate').textContent]`, &seen),
	); err != nil {
		t.Fatalf("paused upstream: %v", err)
	}
	banner, probe, card := seen[0], seen[1], seen[2]
	for _, bad := range []string{"must act", "all jobs paused"} {
		if strings.Contains(banner, bad) {
			t.Errorf("banner %q says %q", banner, bad)
		}
	}
	if !strings.Contains(banner, "Provider unavailable — every job waits") || !strings.Contains(banner, "quota_exhausted") {
		t.Errorf("banner %q", banner)
	}
	bm := regexp.MustCompile(`^Next probe in 0:(\d\d)$`).FindStringSubmatch(probe)
	cm := regexp.MustCompile(`^Retry in 0:(\d\d)$`).FindStringSubmatch(card)
	if bm == nil || cm == nil {
		t.Fatalf("banner %q and card %q: want both counting down", probe, card)
	}
	if b, c := atoi(t, bm[1]), atoi(t, cm[1]); b > 20 || b < 10 || c < b-1 || c > b+1 {
		t.Errorf("banner %q and card %q disagree (or the pause is not the 20s configured)", probe, card)
	}
	if err := chromedp.Run(ctx, pollJS(disabledSayWhy, 10*time.Second)); err != nil {
		t.Errorf("a disabled button does not say why while paused: %v", err)
	}
	screenshot(t, ctx, "paused-desktop.png", 1000)
	screenshot(t, ctx, "paused-375.png", 375)
}

// everyCard is each card's id, pill, button (and whether it is
// disabled) and message, for a test's failure.
const everyCard = `[...document.querySelectorAll('li.doc')].map(li => li.dataset.doc + ': ' +
	li.querySelector('.state').textContent + ' / ' + li.querySelector('.evaluate').textContent +
	(li.querySelector('.evaluate').disabled ? ' (disabled)' : '') + ' / ' + li.querySelector('.msg').textContent)`

func pageText(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	var s string
	_ = chromedp.Run(ctx, chromedp.Text(sel, &s, chromedp.ByQuery))
	return strconv.Quote(s)
}

// TestPageDoneViaBackup: with the backup upstream (make demo's default),
// a document whose key is rate-limited is not a countdown. Its first click
// shows on its own card (the banner may be off-screen on a phone): the
// provider rate-limited the key, and the next try runs on the backup. Its
// next click is done via the backup, the card says so, and the banner
// counts down to the first upstream's next probe while saying where jobs
// run meanwhile.
func TestPageDoneViaBackup(t *testing.T) {
	ctx := browser(t)
	cfg := testConfig()
	cfg.Backup = true
	// Every key-wide wait outlasts the test, however slow the machine.
	cfg.UpstreamHint, cfg.UpstreamCooldown, cfg.UpstreamPause = time.Minute, time.Minute, time.Minute
	s := startServer(t, cfg)
	const card = `li[data-doc="press-release"]`
	enabled := pollJS(`!document.querySelector('`+card+` .evaluate').disabled`, 20*time.Second)
	const firstClick = "Last attempt failed: the model provider rate-limited the request. Evaluate again: it runs on the backup. rate_limited"
	if err := chromedp.Run(ctx,
		chromedp.EmulateViewport(375, 900), // a phone
		chromedp.Navigate(s.base),
		chromedp.WaitVisible(card+` .evaluate`),
		enabled,
		chromedp.Click(card+` .evaluate`), // the first upstream answers 429 for the key
		pollJS(`document.querySelector('`+card+` .msg').textContent === '`+firstClick+`'`, 20*time.Second),
	); err != nil {
		t.Fatalf("first click: card %q: %v", cardText(t, ctx, "press-release", ".msg"), err)
	}
	if got := cardText(t, ctx, "press-release", ".state"); got != "Ready" {
		t.Errorf("pill %q after the key's rate limit, want Ready (the job may run on the backup)", got)
	}
	screenshot(t, ctx, "key-rate-limited-375.png", 375)
	if err := chromedp.Run(ctx,
		chromedp.EmulateViewport(1000, 900),
		pollJS(`document.querySelector('#banner').classList.contains('show')`, 20*time.Second),
		enabled,
		chromedp.Click(card+` .evaluate`), // runs on the backup
		chromedp.WaitVisible(card+` .result .via`),
	); err != nil {
		t.Fatalf("second click: %v", err)
	}
	if got := cardText(t, ctx, "press-release", ".result .via"); got != "via backup" {
		t.Errorf("result %q, want it marked via backup", got)
	}
	if got := cardText(t, ctx, "press-release", ".evaluate"); strings.HasPrefix(got, "Retry in") {
		t.Errorf("button %q: want no countdown, the job is done", got)
	}
	// The banner ticks: poll until it shows the probe's countdown (a
	// minute at most) and says jobs run on the backup.
	probe := `/^Next probe in (0:[0-5]\d|1:00)$/.test(document.querySelector('#banner .probe')?.textContent || '')`
	title := `document.querySelector('#banner-title').textContent.includes('jobs run on the backup')`
	if err := chromedp.Run(ctx, pollJS(probe+` && `+title, 20*time.Second)); err != nil {
		t.Errorf("banner %q, %q: want the first upstream's probe countdown and jobs on the backup: %v",
			pageText(t, ctx, "#banner-title"), pageText(t, ctx, "#banner .probe"), err)
	}
	if exp, got := int64(2), s.stats(t).UpstreamCalls; exp != got {
		t.Errorf("upstream calls %d, want %d: one on each upstream", got, exp)
	}
	screenshot(t, ctx, "done-via-backup.png", 1000)

	// The next story, clicked in page order: the credit balance of the
	// key it runs on, the backup, runs out. Its card shows it (it was done
	// via the backup, the story hidden), and the banner no longer says
	// jobs run on the backup.
	const credit = `li[data-doc="board-minutes"]`
	if err := chromedp.Run(ctx,
		chromedp.Click(credit+` .evaluate`),
		pollJS(`document.querySelector('#banner-title').textContent === 'Provider rate-limited, backup key unavailable — every job waits' &&
			document.querySelector('`+credit+` .msg').textContent.startsWith('Last attempt failed: the API quota is exhausted. quota_exhausted Every job waits')`, 20*time.Second),
	); err != nil {
		t.Fatalf("credit story after the rate limit: banner %s, card %s: %v", pageText(t, ctx, "#banner-title"), pageText(t, ctx, credit+` .msg`), err)
	}
	if got := cardText(t, ctx, "board-minutes", ".result"); got != "" {
		t.Errorf("board-minutes has a result %q: its story did not show", got)
	}
	if got := pageText(t, ctx, "#banner-text"); !strings.Contains(got, "The backup key: the API quota is exhausted. quota_exhausted") {
		t.Errorf("banner %s: want the backup key's reason", got)
	}
	screenshot(t, ctx, "both-keys-down.png", 1000)
}

// observerFunc is a gate.Observer from a function.
type observerFunc func(context.Context, gate.Event)

func (f observerFunc) Observe(ctx context.Context, e gate.Event) { f(ctx, e) }

// TestPageKeepsAFailureTheStreamReadFirst: the gate publishes a settle
// before it reports it to its observers, so the page's stream can carry
// the job's new state without the failure the demo has yet to record.
// Here that order is forced: the report waits until a stream has carried
// press-release's return to ready. The page must keep the failure its
// click was answered with, not fall back to "Not evaluated yet".
func TestPageKeepsAFailureTheStreamReadFirst(t *testing.T) {
	ctx := browser(t)
	cfg := testConfig()
	cfg.Backup = true
	cfg.UpstreamHint = time.Minute
	streamed := make(chan struct{})
	cfg.observer = observerFunc(func(_ context.Context, e gate.Event) {
		if e.Kind == gate.EventSettled && e.Job == docJob("press-release") {
			select {
			case <-streamed:
			case <-time.After(20 * time.Second):
			}
		}
	})
	s := startServer(t, cfg)

	// A stream of our own: once it carries press-release's settle (its
	// first update is the state at connect), the page's stream has had the
	// same message to read.
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, http.MethodGet, s.base+"/api/events", nil)
	resp, err := testClient.Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	go func() {
		updates := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var m struct {
				ID     string `json:"id"`
				Status struct {
					State string `json:"job_state"`
				} `json:"status"`
			}
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok || json.Unmarshal([]byte(data), &m) != nil || m.ID != "press-release" {
				continue
			}
			if updates++; updates > 1 && m.Status.State == "ready" {
				close(streamed)
				return
			}
		}
	}()

	const card = `li[data-doc="press-release"]`
	const firstClick = "Last attempt failed: the model provider rate-limited the request. Evaluate again: it runs on the backup. rate_limited"
	if err := chromedp.Run(ctx,
		chromedp.Navigate(s.base),
		chromedp.WaitVisible(card+` .evaluate`),
		// The page's stream has connected (its first update is the state
		// at connect) before the click: connected later, it would never
		// see the settle as a second update.
		pollJS(`document.querySelector('`+card+`').dataset.updates >= 1`, 20*time.Second),
		chromedp.Click(card+` .evaluate`),
		// Both of the page's updates applied: the state at connect and
		// the settle (applied after the click's answer, or after it came).
		pollJS(`document.querySelector('`+card+`').dataset.updates >= 2 && document.querySelector('`+card+` .msg').textContent === '`+firstClick+`'`, 20*time.Second),
	); err != nil {
		t.Fatalf("card %q after %s updates: %v", cardText(t, ctx, "press-release", ".msg"), attr(t, ctx, card, "data-updates"), err)
	}
	select {
	case <-streamed:
	default:
		t.Fatal("the stream never carried press-release's settle: the order this test forces did not happen")
	}
}

// attr reads an attribute of the element sel, for a failure's message.
func attr(t *testing.T, ctx context.Context, sel, name string) string {
	t.Helper()
	var v string
	var ok bool
	if err := chromedp.Run(ctx, chromedp.AttributeValue(sel, name, &v, &ok, chromedp.AtLeast(0))); err != nil || !ok {
		return "(none)"
	}
	return v
}
