package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestPageShowsAPlaceInLine: the provider's key allows 2 requests at
// once and one more every 6 s (its x-ratelimit headers say so), so after
// one evaluation the gate's budget has no room beside its reserve: three
// requests from another client (Prefer: wait) take places in line, and
// the page shows them in line; a click then takes the fourth. Its card
// shows "In line: 3 ahead, about … s" with a countdown on its button, its
// place counts down as the others get their turns, and at its turn it
// runs and shows its result. (Four clicks in a row, with a refill of 2 s,
// outlasted the refill on a loaded machine: the calls ahead ran and
// failed before the fourth click, which was never in line.)
func TestPageShowsAPlaceInLine(t *testing.T) {
	ctx := browser(t)
	cfg := testConfig()
	cfg.Budget, cfg.BudgetRefill = 2, 6*time.Second
	cfg.Backup = false // one key: a call its budget refuses waits for it
	cfg.SlowCall = time.Second
	s := startServer(t, cfg)

	card := func(id string) string { return `li[data-doc="` + id + `"]` }
	msg := func(id string) string { return `document.querySelector('` + card(id) + ` .msg').textContent` }
	pill := func(id string) string { return `document.querySelector('` + card(id) + ` .state').textContent` }
	last := card("annual-filing")
	if err := chromedp.Run(ctx,
		chromedp.Navigate(s.base),
		chromedp.WaitVisible(card("welcome-letter")+` .evaluate`),
		chromedp.Click(card("welcome-letter")+` .evaluate`),
		pollJS(pill("welcome-letter")+` === 'Evaluated'`, 20*time.Second),
	); err != nil {
		t.Fatalf("the first evaluation: %v", err)
	}
	ahead := []string{"incident-report", "supplier-contract", "survey-answers"}
	answered := make(chan error, len(ahead))
	for _, id := range ahead {
		go func() { answered <- waitForTurn(s, id) }()
	}
	inLine := `true`
	for _, id := range ahead {
		inLine += ` && ` + pill(id) + ` === 'In line'`
	}
	if err := chromedp.Run(ctx,
		pollJS(inLine, 20*time.Second),
		chromedp.Click(last+` .evaluate`),
		pollJS(pill("annual-filing")+` === 'In line' && `+msg("annual-filing")+`.startsWith('In line: 3 ahead, about ')`, 20*time.Second),
	); err != nil {
		var cards []string
		_ = chromedp.Run(ctx, chromedp.Evaluate(everyCard, &cards))
		t.Fatalf("the fourth click in line: %v (the cards: %q)", err, cards)
	}
	screenshot(t, ctx, "place-in-line", 1000)
	var btn, first string
	var disabled bool
	if err := chromedp.Run(ctx,
		chromedp.Text(last+` .evaluate`, &btn),
		chromedp.Evaluate(`document.querySelector('`+last+` .evaluate').disabled`, &disabled),
		chromedp.Text(last+` .msg`, &first),
	); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(btn, "Turn in 0:") || !disabled {
		t.Fatalf("the button of a click in line: %q (disabled %v), want a countdown to its turn", btn, disabled)
	}
	// Cards in line keep the page's rules: one look per state, disabled
	// buttons that say why, and live regions that do not tick with the
	// countdown (its sentence is the place the server said last).
	var problems, live1, live2 []string
	var why bool
	if err := chromedp.Run(ctx,
		chromedp.Evaluate(designProblems, &problems),
		chromedp.Evaluate(disabledSayWhy, &why),
		chromedp.Evaluate(liveRegions, &live1),
		chromedp.Sleep(1100*time.Millisecond), // the countdown ticks; a place may change too
		chromedp.Evaluate(liveRegions, &live2),
	); err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 || !why {
		t.Fatalf("cards in line: design problems %q; disabled buttons say why: %v", problems, why)
	}
	place := func(s string) string { p, _, _ := strings.Cut(s, ", about"); return p }
	for i := range live1 {
		// A card in line whose place did not move says the same.
		if i < len(live2) && strings.Contains(live1[i], "In line") && place(live1[i]) == place(live2[i]) && live1[i] != live2[i] {
			t.Errorf("a card in line changed its live region with the clock: %q → %q", live1[i], live2[i])
		}
	}
	// Its place counts down as the turns ahead of it come, then it runs.
	if err := chromedp.Run(ctx,
		pollJS(msg("annual-filing")+`.startsWith('In line: 1 ahead') || `+msg("annual-filing")+`.startsWith('In line: next')`, 30*time.Second),
		pollJS(`document.querySelector('`+last+` .result').textContent !== ''`, 30*time.Second),
		pollJS(pill("annual-filing")+` === 'Evaluated'`, 10*time.Second),
	); err != nil {
		var m, p string
		_ = chromedp.Run(ctx, chromedp.Text(last+` .msg`, &m), chromedp.Text(last+` .state`, &p))
		t.Fatalf("the click in line never reached its turn: %v (pill %q, message %q; first %q)", err, p, m, first)
	}
	for range ahead {
		if err := <-answered; err != nil {
			t.Errorf("a request ahead in line: %v", err)
		}
	}
}

// waitForTurn evaluates document id as another client's click does
// (Prefer: wait), and returns when the server answers: an error only when
// no answer came.
func waitForTurn(s *server, id string) error {
	req, err := http.NewRequest(http.MethodPost, s.base+"/documents/"+id+"/evaluate", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Prefer", "wait=60")
	resp, err := (&http.Client{Timeout: 70 * time.Second}).Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return err
}
