package classify

import (
	"slices"
	"strconv"

	"github.com/retrygate/retrygate/internal/code"
)

// Chain returns a classifier that asks each rule in turn. It falls back to
// Default when none decides (every rule returned ok = false). Nil rules
// are skipped. A rule's RetryAfter is clamped to [0, MaxHint] like any
// hint. An Evidence that is empty or not of Evidence's form becomes
// "rule:N", N the rule's index in rules. A rule's permanent verdict is
// proof unless the rule sets Suspect.
func Chain(rules ...Rule) Func {
	rules = slices.Clone(rules) // the caller may reuse its slice
	return func(err error) Verdict {
		for i, r := range rules {
			if r == nil {
				continue
			}
			if v, ok := r(err); ok {
				v.RetryAfter = clampHint(v.RetryAfter)
				if !code.Evidence(v.Evidence) {
					v.Evidence = "rule:" + strconv.Itoa(i)
				}
				return v
			}
		}
		return Default(err)
	}
}

// StatusRule decides v for any error whose chain holds an HTTP response with
// the given status. That is an *HTTPError, a go-openai *APIError or
// *RequestError, or any StatusError. Use it where a provider gives a
// status its own meaning, such as a self-hosted server that answers 400
// when its queue is full.
func StatusRule(status int, v Verdict) Rule {
	return func(err error) (Verdict, bool) {
		var s signals
		walk(err, s.collect)
		if v.Evidence == "" {
			v.Evidence = statusEvidence(status)
		}
		return v, !s.marked && s.api && s.status == status
	}
}

// CodeRule decides v for any error whose chain holds a provider error with
// code among its codes. Its codes are the error code or type, Azure's
// inner code, Anthropic's details.error_code, and google.rpc's status or
// ErrorInfo reason.
func CodeRule(code string, v Verdict) Rule {
	return func(err error) (Verdict, bool) {
		var s signals
		walk(err, s.collect)
		codes := s.p.codes()
		return v, !s.marked && s.api && code != "" && slices.Contains(codes[:], code)
	}
}
