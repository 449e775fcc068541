package main

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// keyBudget is the requests one fake API key allows: a bucket of size
// requests, one more every refill, reported on every response with
// OpenAI's headers
// (https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers)
// so the gate's budget admission sees it running short and puts callers
// in line. The zero size reports nothing. It is safe for concurrent use.
type keyBudget struct {
	size   int
	refill time.Duration

	mu     sync.Mutex
	tokens float64
	at     time.Time
}

func newKeyBudget(size int, refill time.Duration) *keyBudget {
	return &keyBudget{size: size, refill: refill, tokens: float64(size), at: time.Now()}
}

// take spends a request of the key and writes the headers of what is
// left; false (and nothing spent) when the key has none left, which the
// fake answers with a key-wide 429.
func (b *keyBudget) take(h http.Header) bool {
	if b == nil || b.size <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	b.tokens = math.Min(float64(b.size), b.tokens+float64(now.Sub(b.at))/float64(b.refill))
	b.at = now
	ok := b.tokens >= 1
	if ok {
		b.tokens--
	}
	h.Set("x-ratelimit-limit-requests", strconv.Itoa(b.size))
	h.Set("x-ratelimit-remaining-requests", strconv.Itoa(int(b.tokens)))
	reset := time.Duration((float64(b.size) - b.tokens) * float64(b.refill)).Round(time.Millisecond)
	h.Set("x-ratelimit-reset-requests", reset.String())
	return ok
}
