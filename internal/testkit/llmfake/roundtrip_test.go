package llmfake_test

import (
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/internal/testkit/llmfake"
)

// The fake's headers read through classify.ParseBudget tell a caller, before
// each call, when it fits: a call made once Budget.Fits says so is never
// refused. That is what a gate admitting calls from the budget relies on.
// The expectation is the providers' documented meaning of their headers (a
// token bucket's remaining units and the time until it is whole), checked
// against the fake's own decision; neither side's code supplies it.
func TestBudgetPredictsAdmission(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config llmfake.Config
		tokens bool // the single Tokens quota describes the call (OpenAI)
		// slack bounds how late the estimate may be: remaining counts are
		// whole units, so up to one unit's refill (2 s at 30 a minute) is
		// unseen, plus the reset's rounding (OpenAI: up to the millisecond;
		// Anthropic: up to the second, against a Date rounded down).
		slack time.Duration
	}{
		{"OpenAI", llmfake.Config{RPM: 30, TPM: 3000}, true, 2*time.Second + time.Millisecond},
		{"Anthropic", llmfake.Config{Dialect: llmfake.Anthropic, RPM: 30}, false, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			tc.config.Now = clk.Now
			p := newProvider(t, tc.config)
			rng := rand.New(rand.NewPCG(1, 2))
			var last classify.Budget
			var predicted, admitted int
			for i := range 2000 {
				clk.Advance(time.Duration(rng.Int64N(int64(3 * time.Second))))
				chars, maxTokens := rng.IntN(400), rng.IntN(300)
				tokens := int64((chars+3)/4 + maxTokens)
				if !tc.tokens {
					tokens = 0
				}
				fits, known := last.Fits(tokens)
				mayCall := i == 0 || known && !clk.Now().Before(fits)

				w := call(p, chat(chars, maxTokens))
				b, ok := classify.ParseBudget(w.Header(), clk.Now())
				if !ok {
					t.Fatalf("call %d: no budget in %v", i, w.Header())
				}
				if mayCall {
					predicted++
					if w.Code != 200 {
						t.Fatalf("call %d: the budget %+v said it fits at %v, it was refused at %v: %s", i, last, fits, clk.Now(), w.Body)
					}
				}
				if w.Code == 200 {
					admitted++
					// Admitted before the budget said so: the estimate was
					// late, by no more than the headers hide.
					if late := fits.Sub(clk.Now()); !mayCall && known && late > tc.slack {
						t.Fatalf("call %d: admitted %v before the budget said it fits (slack %v)", i, late, tc.slack)
					}
				}
				last = b
			}
			if predicted == 0 || admitted == 2000 {
				t.Fatalf("the run did not test both sides: %d predicted, %d admitted of 2000", predicted, admitted)
			}
		})
	}
}

// A 429's stated wait, read by classify.Transport into Budget.RetryIn, is the
// time until that very call fits: not a millisecond more is needed, and the
// reset headers (the time until the bucket is whole) say far more.
func TestRetryInIsTheWaitForOneCall(t *testing.T) {
	clk := newClock()
	p := newProvider(t, llmfake.Config{RPM: 60, TPM: 6000, Now: clk.Now})
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	hc := &http.Client{Transport: &classify.Transport{}}

	var mu sync.Mutex
	var got []classify.Budget
	ctx := classify.WithBudgetFunc(context.Background(), func(b classify.Budget) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, b)
	})
	send := func(body string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	big := chat(0, 2500) // 2500 tokens of 6000/min
	for range 2 {
		if code := send(big); code != 200 {
			t.Fatalf("status %d", code)
		}
	}
	if code := send(big); code != 429 {
		t.Fatalf("the third 2500 of 6000: %d", code)
	}
	mu.Lock()
	b := got[len(got)-1]
	mu.Unlock()
	// 1000 left, 1500 more at 100/s: 15 s. The bucket is whole only when
	// all 5000 taken refill: 50 s.
	if b.RetryIn != 15*time.Second || b.Tokens.Remaining != 1000 || b.Tokens.Reset.Sub(b.At) != 51*time.Second { // "50s" said to the second: read as 51 s
		t.Fatalf("got %+v: want retry in 15s, 1000 tokens left, whole in 51s (50s and its resolution)", b)
	}
	if fits, ok := b.Fits(2500); !ok || fits.Sub(b.At) != 15*time.Second {
		t.Fatalf("Fits = %v, %v: the provider's stated wait wins", fits.Sub(b.At), ok)
	}
	clk.Advance(b.RetryIn)
	if code := send(big); code != 200 {
		t.Fatalf("after the stated wait: %d", code)
	}
}
