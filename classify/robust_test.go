package classify_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
)

// selfErr unwraps to itself: errors.Is and errors.As loop forever on it.
type selfErr struct{}

func (e *selfErr) Error() string { return "self" }
func (e *selfErr) Unwrap() error { return e }

// pairErr forms a two-element cycle with its peer.
type pairErr struct{ peer *pairErr }

func (e *pairErr) Error() string { return "pair" }
func (e *pairErr) Unwrap() error { return e.peer }

// joinSelf is a multi-error whose branches are itself.
type joinSelf struct{}

func (e *joinSelf) Error() string   { return "join" }
func (e *joinSelf) Unwrap() []error { return []error{e, e, nil, e} }

// linkErr is one link of an arbitrarily deep chain.
type linkErr struct{ next error }

func (e *linkErr) Error() string { return "link" }
func (e *linkErr) Unwrap() error { return e.next }

func deepChain(depth int, bottom error) error {
	err := bottom
	for range depth {
		err = &linkErr{next: err}
	}
	return err
}

// joinWithMarkFirst joins n errors, mark first.
func joinWithMarkFirst(n int, mark error) error {
	errs := []error{mark}
	for range n - 1 {
		errs = append(errs, errors.New("other"))
	}
	return errors.Join(errs...)
}

// panicErr panics in Unwrap, as a typed nil pointer with a careless method
// does.
type panicErr struct{ inner *pairErr }

func (e *panicErr) Error() string { return "panic" }
func (e *panicErr) Unwrap() error { return e.inner.peer }

// badStatus panics in HTTPStatusCode.
type badStatus struct{ m map[string]int }

func (e *badStatus) Error() string       { return "bad status" }
func (e *badStatus) HTTPStatusCode() int { return e.m["x"] + 1/len(e.m) }

func TestDefaultBadInput(t *testing.T) {
	pair := &pairErr{}
	pair.peer = &pairErr{peer: pair}
	var nilAPI *openai.APIError
	var nilHTTP *classify.HTTPError
	unknown := transient(classify.ReasonUnknown, false, 0)
	rateLimited := transient(classify.ReasonRateLimited, true, 0)

	tests := []struct {
		name string
		err  error
		exp  classify.Verdict
	}{
		{"nil", nil, unknown},
		{"wrapping nil", fmt.Errorf("call: %w", nil), unknown},
		{"joined nils", errors.Join(errors.New("a"), nil), unknown},
		{"typed nil APIError", nilAPI, unknown},
		{"typed nil HTTPError", nilHTTP, unknown},
		{"wrapped typed nil", fmt.Errorf("x: %w", nilAPI), unknown},
		{"RequestError wrapping nil", &openai.RequestError{HTTPStatusCode: 502}, transient(classify.ReasonUpstream5xx, false, 0)},
		{"HTTPError wrapping nil", &classify.HTTPError{StatusCode: 429}, rateLimited},
		{"self cycle", &selfErr{}, unknown},
		{"two-error cycle", pair, unknown},
		{"multi-error self cycle", &joinSelf{}, unknown},
		{"cycle under a rate limit", &classify.HTTPError{StatusCode: 429, Err: &selfErr{}}, rateLimited},
		{"100k-deep chain", deepChain(100_000, errors.New("bottom")), unknown},
		{"deep chain, signal within the bound", deepChain(500, io.ErrUnexpectedEOF), transient(classify.ReasonNetwork, false, 0)},
		{"deep chain, signal beyond the bound", deepChain(100_000, io.ErrUnexpectedEOF), unknown},
		{"panicking Unwrap", &panicErr{}, unknown},
		{"panicking Unwrap below a signal", &classify.HTTPError{StatusCode: 503, Err: &panicErr{}}, transient(classify.ReasonOverloaded, true, 0)},
		{"panicking HTTPStatusCode", &badStatus{}, unknown},
		{"garbage headers", &classify.HTTPError{StatusCode: 429, Header: http.Header{
			"Retry-After-Ms": {"-1"}, "Retry-After": {"Inf"}, "X-Should-Retry": {"\x00"},
			"X-Ratelimit-Reset-Tokens": {"9999999999999999999h"}, "Date": {"yesterday"},
		}}, rateLimited},
		{"APIError with odd Code types", &openai.APIError{HTTPStatusCode: 400, Code: map[string]any{"x": 1}}, suspect(classify.ReasonInvalidRequest)},
		{"APIError with float Code", &openai.APIError{Code: float64(503)}, transient(classify.ReasonOverloaded, true, 0)},
		{"APIError with int Code", &openai.APIError{Code: 429}, rateLimited},
		{"APIError with string Code", &openai.APIError{Code: "insufficient_quota"}, systemic(classify.ReasonQuotaExhausted, true)},
		{"APIError with nil Code", &openai.APIError{HTTPStatusCode: 500}, transient(classify.ReasonUpstream5xx, false, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan classify.Verdict, 1)
			go func() { done <- classify.Default(tc.err) }()
			select {
			case got := <-done:
				assertVerdict(t, tc.exp, got, tc.err)
			case <-time.After(5 * time.Second):
				t.Fatal("Default did not return")
			}
		})
	}
}

// TestMarkBadInput: a mark is found over a cycle and under a deep chain,
// within the walk's bound.
func TestMarkBadInput(t *testing.T) {
	mark := classify.Permanent(errors.New("bad input"))
	tests := []struct {
		name string
		err  error
		exp  classify.Verdict
	}{
		{"self cycle", &selfErr{}, transient(classify.ReasonUnknown, false, 0)},
		{"mark over a cycle", classify.Transient(&selfErr{}, time.Second), transient(classify.ReasonMarkedTransient, false, time.Second)},
		{"mark under 100 links", deepChain(100, mark), permanent(classify.ReasonMarkedPermanent)},
		{"mark under 2000 links is past the bound", deepChain(2000, mark), transient(classify.ReasonUnknown, false, 0)},
		// The walk inspects 1024 errors: 1023 links and the mark, not 1024.
		{"mark as the 1024th error", deepChain(1023, mark), permanent(classify.ReasonMarkedPermanent)},
		{"mark as the 1025th error", deepChain(1024, mark), transient(classify.ReasonUnknown, false, 0)},
		{"mark first in a join", errors.Join(mark, errors.New("other")), permanent(classify.ReasonMarkedPermanent)},
		// A join's branches are stacked up to the bound, first branches last
		// pushed and so first inspected.
		{"mark first of 1023 joined errors", joinWithMarkFirst(1023, mark), permanent(classify.ReasonMarkedPermanent)},
		{"mark first of 1025 joined errors is past the bound", joinWithMarkFirst(1025, mark), transient(classify.ReasonUnknown, false, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertVerdict(t, tc.exp, classify.Default(tc.err), tc.err)
		})
	}
}
