package classify_test

import (
	"errors"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
)

// TestMarkEvidence: a mark's Evidence names its class, and a class outside
// the enumeration still yields Evidence of the valid form.
func TestMarkEvidence(t *testing.T) {
	base := errors.New("x")
	tests := []struct {
		err error
		exp string
	}{
		{classify.Permanent(base), "mark:permanent"},
		{classify.Transient(base, 0), "mark:transient"},
		{classify.Systemic(base), "mark:systemic"},
		{classify.WithReason(base, classify.ClassTransient, "queue_full", 0), "mark:transient"},
		{classify.WithReason(base, classify.ClassCanceled, "gave_up", 0), "mark:canceled"},
		{classify.WithReason(base, classify.Class(7), "odd", 0), "mark:class"},
	}
	for _, tc := range tests {
		if got := classify.Default(tc.err).Evidence; got != tc.exp {
			t.Errorf("Evidence of %v: exp %q, got %q", tc.err, tc.exp, got)
		}
	}
}

// TestStatusRuleEvidence: a StatusRule's verdict names its status unless
// the verdict given to it names its own evidence.
func TestStatusRuleEvidence(t *testing.T) {
	err := &openai.APIError{HTTPStatusCode: 400, Type: "invalid_request_error"}
	tests := []struct {
		v   classify.Verdict
		exp string
	}{
		{classify.Verdict{Class: classify.ClassTransient, Reason: "queue_full"}, "status:400"},
		{classify.Verdict{Class: classify.ClassTransient, Reason: "queue_full", Evidence: "rule:queue"}, "rule:queue"},
	}
	for _, tc := range tests {
		v, ok := classify.StatusRule(400, tc.v)(err)
		if !ok || v.Evidence != tc.exp {
			t.Errorf("StatusRule(400, %+v): exp %q decided, got %q (%v)", tc.v, tc.exp, v.Evidence, ok)
		}
	}
}
