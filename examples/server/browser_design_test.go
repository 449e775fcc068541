package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// designProblems lists where the page breaks its own layout rules: a
// pill's colour depends on its state alone (a "Ready" was amber after a
// failure and green after a success), every card's message starts at the
// same place (the pill and the message wrapped differently card to card),
// and a reason code follows its sentence instead of running into it.
const designProblems = `(() => {
	const bad = [], colours = {};
	for (const p of document.querySelectorAll('.doc .pill')) {
		const s = getComputedStyle(p);
		(colours[p.textContent] ??= new Set()).add(s.backgroundColor + ' on ' + s.color);
	}
	for (const [text, set] of Object.entries(colours)) if (set.size > 1) bad.push('pill ' + text + ': ' + [...set].join(' | '));
	const lefts = new Set([...document.querySelectorAll('.doc .msg')].map(m => Math.round(m.getBoundingClientRect().left)));
	if (lefts.size > 1) bad.push('messages start at x = ' + [...lefts].join(', '));
	for (const c of document.querySelectorAll('.msg code, #banner-text code')) {
		const next = c.nextSibling;
		if (next && next.nodeType === Node.TEXT_NODE && /^\s*[.,;:a-z]/.test(next.textContent)) bad.push('code ' + c.textContent + ' runs into "' + next.textContent + '"');
		const r = document.createRange();
		r.setStart(c.parentNode, 0);
		r.setEndBefore(c);
		if (!/[.:]\s*$/.test(r.toString())) bad.push('code ' + c.textContent + ' inside a sentence: "' + r.toString() + '"');
	}
	return bad;
})()`

// liveRegions is the text of every live region on the page.
const liveRegions = `[...document.querySelectorAll('[aria-live], [role=status], [role=alert], [role=log], [role=timer]')]
	.filter(el => el.getAttribute('aria-live') !== 'off').map(el => el.id + ': ' + el.textContent)`

// TestPageOneLookPerState: cards in every state side by side, on a desktop
// and a phone, keep the layout rules (designProblems); and while every
// card and the banner count down, no live region changes: a screen reader
// hears each card's message when its state changes, never the clock (the
// whole list was aria-live and ticked every second).
func TestPageOneLookPerState(t *testing.T) {
	ctx := browser(t)
	cfg := testConfig()
	cfg.UpstreamHint = time.Minute // the provider's rate limit outlasts the test
	s := startServer(t, cfg)
	if err := chromedp.Run(ctx, chromedp.Navigate(s.base), chromedp.WaitVisible(`li[data-doc="welcome-letter"] .evaluate`)); err != nil {
		t.Fatal(err)
	}
	// Another client: a success, a cooldown that ends, a failure.
	for _, c := range []struct {
		id   string
		code int
	}{{"welcome-letter", 200}, {"supplier-contract", 429}, {"patient-history", 422}} {
		if r := s.evaluate(t, c.id); r.code != c.code {
			t.Fatalf("%s: %d %s, want %d", c.id, r.code, r.raw, c.code)
		}
	}
	card := func(id, pill, msg string) string {
		q := `document.querySelector('li[data-doc="` + id + `"] `
		return q + `.state').textContent === '` + pill + `' && ` + q + `.msg').textContent.startsWith('` + msg + `')`
	}
	if err := chromedp.Run(ctx, pollJS(card("welcome-letter", "Ready", "Evaluated at")+` && `+
		card("supplier-contract", "Ready", "Last attempt failed")+` && `+
		card("patient-history", "Failed", "Won’t be retried")+` && `+
		card("annual-filing", "Ready", "Not evaluated yet."), 20*time.Second)); err != nil {
		t.Fatalf("states: %s / %s / %s: %v", pageText(t, ctx, `li[data-doc="welcome-letter"] .msg`),
			pageText(t, ctx, `li[data-doc="supplier-contract"] .msg`), pageText(t, ctx, `li[data-doc="patient-history"] .msg`), err)
	}
	for _, width := range []int64{1000, 375} {
		var bad []string
		if err := chromedp.Run(ctx, chromedp.EmulateViewport(width, 900), chromedp.Evaluate(designProblems, &bad)); err != nil {
			t.Fatal(err)
		}
		if len(bad) > 0 {
			t.Errorf("at %d px: %s", width, strings.Join(bad, "; "))
		}
	}
	screenshot(t, ctx, "ready-three-ways-desktop.png", 1000)

	// The provider rate-limits the whole key: every card and the banner
	// count down. The server pushes each card's update on its own, so the
	// clock is read only once every card but the failed one counts down.
	if r := s.evaluate(t, "press-release"); r.code != http.StatusTooManyRequests {
		t.Fatalf("press-release: %d %s", r.code, r.raw)
	}
	var before, after []string
	var clock, icon string
	const button = `document.querySelector('li[data-doc="welcome-letter"] .evaluate').textContent`
	const everyCardCounts = `[...document.querySelectorAll('li.doc:not([data-doc="patient-history"]) .evaluate')].every(b => /^Retry in /.test(b.textContent))`
	if err := chromedp.Run(ctx,
		pollJS(`document.querySelector('#banner').classList.contains('show') && `+everyCardCounts, 20*time.Second),
		chromedp.Evaluate(`[...document.querySelectorAll('#banner .icon svg')].filter(s => getComputedStyle(s).display !== 'none').map(s => s.getAttribute('class')).join()`, &icon),
		chromedp.Evaluate(liveRegions, &before),
		chromedp.Evaluate(button, &clock),
		pollJS(button+` !== '`+clock+`'`, 10*time.Second), // a tick
		chromedp.Evaluate(liveRegions, &after),
	); err != nil {
		t.Fatalf("countdown: %v", err)
	}
	if icon != "cooling" {
		t.Errorf("banner icon %q for a rate limit, want the hourglass (cooling), not the pause", icon)
	}
	if strings.Join(before, "\n") != strings.Join(after, "\n") {
		t.Errorf("a live region changed with the clock:\nbefore %q\nafter  %q", before, after)
	}
	var msgs int
	if err := chromedp.Run(ctx, chromedp.Evaluate(`document.querySelectorAll('.doc .msg[role=status]').length`, &msgs)); err != nil {
		t.Fatal(err)
	}
	if msgs != len(catalog) || len(before) != len(catalog)+1 {
		t.Errorf("%d card messages live and %d live regions, want each card's message and the banner's sentence: %q", msgs, len(before), before)
	}
	if !strings.Contains(strings.Join(before, "\n"), "banner-live: Provider rate-limited — every job waits. ") {
		t.Errorf("the banner's change is not announced: %q", before)
	}
	var bad []string
	if err := chromedp.Run(ctx, chromedp.Evaluate(designProblems, &bad)); err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("while the provider is rate-limited: %s", strings.Join(bad, "; "))
	}
	screenshot(t, ctx, "rate-limited-desktop.png", 1000)
	screenshot(t, ctx, "rate-limited-375.png", 375)
}
