package main

import (
	"net/http"
	"slices"
	"testing"
	"time"
)

// TestEveryStoryShowsInPageOrder: clicking the page top to bottom once
// each, with the backup (make demo's default), every document tells its
// own story. The two key-wide stories used to hide each other: the
// provider's rate limit cooled the first key, so the credit balance's
// document ran on the backup and succeeded. In either order, the second
// now shows on the key it runs on.
func TestEveryStoryShowsInPageOrder(t *testing.T) {
	t.Parallel()
	// What each document's first click is answered: a success, or a
	// refusal with the reason of its story.
	story := map[string]struct {
		code   int
		reason string
	}{
		"welcome-letter":    {http.StatusOK, ""},
		"supplier-contract": {http.StatusTooManyRequests, "rate_limited"},
		"incident-report":   {http.StatusTooManyRequests, "overloaded"},
		"patient-history":   {http.StatusUnprocessableEntity, "context_length_exceeded"},
		"survey-answers":    {http.StatusTooManyRequests, "bad_output"},
		"annual-filing":     {http.StatusOK, ""},
		"press-release":     {0, "rate_limited"}, // a refusal; its status depends on the keys left
		"board-minutes":     {0, "quota_exhausted"},
	}
	pageOrder := make([]string, len(catalog))
	for i, d := range catalog {
		pageOrder[i] = d.ID
	}
	if exp := len(catalog); len(story) != exp {
		t.Fatalf("%d stories for %d documents", len(story), exp)
	}
	swapped := slices.Clone(pageOrder)
	i, j := slices.Index(swapped, "press-release"), slices.Index(swapped, "board-minutes")
	swapped[i], swapped[j] = swapped[j], swapped[i]
	for name, order := range map[string][]string{"page order": pageOrder, "key-wide stories swapped": swapped} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			cfg.Backup = true
			// Every key-wide wait outlasts the clicks, however slow the machine.
			cfg.UpstreamHint, cfg.UpstreamCooldown, cfg.UpstreamPause = time.Minute, time.Minute, time.Minute
			s := startServer(t, cfg)
			for _, id := range order {
				r, exp := s.evaluate(t, id), story[id]
				if exp.code == 0 && (r.code < 400 || r.code == http.StatusUnprocessableEntity) || exp.code != 0 && r.code != exp.code {
					t.Errorf("%s: %d %s, want %d (0: a refusal that is not a failed job)", id, r.code, r.raw, exp.code)
					continue
				}
				if got := r.body["reason"]; exp.reason != "" && got != exp.reason {
					t.Errorf("%s: reason %v, want %q: its story did not show (%s)", id, got, exp.reason, r.raw)
				}
			}
		})
	}
}
