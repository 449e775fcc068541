package classify_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
)

var errBadJSON = errors.New("model output is not valid JSON")

func TestChain(t *testing.T) {
	queueFull := transient("queue_full", false, 0)
	badOutput := func(err error) (classify.Verdict, bool) {
		if errors.Is(err, errBadJSON) {
			return transient(classify.ReasonBadOutput, false, time.Second), true
		}
		return classify.Verdict{}, false
	}
	pass := func(error) (classify.Verdict, bool) { return classify.Verdict{Class: classify.ClassPermanent}, false }
	huge := func(error) (classify.Verdict, bool) { return transient("huge", false, 1000*time.Hour), true }
	http400 := &openai.APIError{HTTPStatusCode: 400, Type: "invalid_request_error"}

	tests := []struct {
		name  string
		rules []classify.Rule
		err   error
		exp   classify.Verdict
	}{
		{"no rules is Default", nil, http400, suspect(classify.ReasonInvalidRequest)},
		{"nil rules are skipped", []classify.Rule{nil, nil}, http400, suspect(classify.ReasonInvalidRequest)},
		{"a passing rule falls through", []classify.Rule{pass}, http400, suspect(classify.ReasonInvalidRequest)},
		{"custom rule decides", []classify.Rule{pass, nil, badOutput}, fmt.Errorf("parse: %w", errBadJSON),
			transient(classify.ReasonBadOutput, false, time.Second)},
		{"custom rule passes on other errors", []classify.Rule{badOutput}, http400, suspect(classify.ReasonInvalidRequest)},
		{"first deciding rule wins", []classify.Rule{classify.StatusRule(400, queueFull), badOutput}, http400, queueFull},
		{"StatusRule other status passes", []classify.Rule{classify.StatusRule(409, queueFull)}, http400, suspect(classify.ReasonInvalidRequest)},
		{"StatusRule sees a RequestError", []classify.Rule{classify.StatusRule(400, queueFull)}, &openai.RequestError{HTTPStatusCode: 400}, queueFull},
		{"StatusRule leaves marks alone", []classify.Rule{classify.StatusRule(400, queueFull)}, classify.Permanent(http400),
			permanent(classify.ReasonMarkedPermanent)},
		{"CodeRule on code", []classify.Rule{classify.CodeRule("server_is_busy", queueFull)}, &openai.APIError{HTTPStatusCode: 400, Code: "server_is_busy"}, queueFull},
		{"CodeRule on type", []classify.Rule{classify.CodeRule("busy_error", queueFull)}, &classify.HTTPError{StatusCode: 400, Body: []byte(`{"error":{"type":"busy_error","message":"busy"}}`)}, queueFull},
		{"CodeRule on a number decoded by encoding/json", []classify.Rule{classify.CodeRule("1300", queueFull)}, &openai.APIError{Code: float64(1300)}, queueFull},
		{"CodeRule on a number decoded by go-openai", []classify.Rule{classify.CodeRule("1300", queueFull)}, &openai.APIError{Code: 1300}, queueFull},
		{"CodeRule empty code never matches", []classify.Rule{classify.CodeRule("", queueFull)}, http400, suspect(classify.ReasonInvalidRequest)},
		{"rule hints are clamped", []classify.Rule{huge}, http400, transient("huge", false, classify.MaxHint)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := classify.Chain(tc.rules...)(tc.err)
			assertVerdict(t, tc.exp, got, tc.err)
		})
	}
}

func TestChainCopiesRules(t *testing.T) {
	decide := func(error) (classify.Verdict, bool) { return permanent("first"), true }
	rules := []classify.Rule{decide}
	f := classify.Chain(rules...)
	rules[0] = nil
	if exp, got := "first", f(errors.New("x")).Reason; exp != got {
		t.Errorf("reason: exp %q, got %q", exp, got)
	}
}

func TestMarkers(t *testing.T) {
	base := errors.New("model ignored the format")
	tests := []struct {
		name string
		err  error
		exp  classify.Verdict
	}{
		{"Permanent", classify.Permanent(base), permanent(classify.ReasonMarkedPermanent)},
		{"Transient", classify.Transient(base, 2*time.Second), transient(classify.ReasonMarkedTransient, false, 2*time.Second)},
		{"Transient clamps negative", classify.Transient(base, -time.Second), transient(classify.ReasonMarkedTransient, false, 0)},
		{"Transient clamps huge", classify.Transient(base, 1000*time.Hour), transient(classify.ReasonMarkedTransient, false, classify.MaxHint)},
		{"Systemic", classify.Systemic(base), systemic(classify.ReasonMarkedSystemic, false)},
		{"WithReason", classify.WithReason(base, classify.ClassTransient, classify.ReasonBadOutput, 0), transient(classify.ReasonBadOutput, false, 0)},
		{"WithReason empty reason", classify.WithReason(base, classify.ClassPermanent, "", 0), permanent("permanent")},
		{"mark wins over the response", classify.Transient(&openai.APIError{HTTPStatusCode: 401, Code: "invalid_api_key"}, 0),
			transient(classify.ReasonMarkedTransient, false, 0)},
		{"outermost mark wins", classify.Systemic(fmt.Errorf("w: %w", classify.Permanent(base))), systemic(classify.ReasonMarkedSystemic, false)},
		{"mark inside a join", errors.Join(errors.New("other"), classify.Permanent(base)), permanent(classify.ReasonMarkedPermanent)},
		{"mark with nil error", classify.Permanent(nil), permanent(classify.ReasonMarkedPermanent)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertVerdict(t, tc.exp, classify.Default(tc.err), tc.err)
		})
	}
	if !errors.Is(classify.Permanent(base), base) {
		t.Error("errors.Is does not see through Permanent")
	}
}
