package main

import (
	"net/http"
	"testing"
	"time"
)

// A fake key's budget reports what it has left as OpenAI does (limit,
// remaining, time until whole), spends one request a call, and answers
// none left with false; a zero budget reports nothing.
func TestKeyBudget(t *testing.T) {
	b := newKeyBudget(2, time.Hour)
	for i, exp := range []struct {
		ok        bool
		remaining string
	}{{true, "1"}, {true, "0"}, {false, "0"}} {
		h := http.Header{}
		if ok := b.take(h); ok != exp.ok || h.Get("x-ratelimit-remaining-requests") != exp.remaining ||
			h.Get("x-ratelimit-limit-requests") != "2" || h.Get("x-ratelimit-reset-requests") == "" {
			t.Fatalf("call %d: %v %v, want %v with %s left", i, ok, h, exp.ok, exp.remaining)
		}
	}
	h := http.Header{}
	if !newKeyBudget(0, time.Second).take(h) || len(h) != 0 {
		t.Fatalf("a zero budget: %v", h)
	}
}
