package classify

import (
	"fmt"
	"time"

	"github.com/retrygate/retrygate/internal/code"
)

// Class says what a failure deserves.
type Class uint8

const (
	// Transient failures may succeed later. The job cools down and may be
	// retried (rate limit, overload, network, unknown errors).
	ClassTransient Class = iota
	// Permanent failures fail again on every retry. The job is marked
	// failed (prompt too long, content refused, invalid request).
	ClassPermanent
	// Systemic failures are not the job's fault. No retry helps until an
	// operator acts (bad API key, quota exhausted, model not found). The
	// job is not marked failed and the attempt is not counted.
	ClassSystemic
	// Canceled means the caller gave up. The job is released with no
	// cooldown.
	ClassCanceled
)

// String returns the lower-case name of the class, suitable as a metric label.
func (c Class) String() string {
	switch c {
	case ClassTransient:
		return "transient"
	case ClassPermanent:
		return "permanent"
	case ClassSystemic:
		return "systemic"
	case ClassCanceled:
		return "canceled"
	}
	return fmt.Sprintf("class(%d)", uint8(c))
}

// Reason codes are short and stable. They are safe to show to end users
// and to use as metric labels. They never contain upstream text.
const (
	ReasonRateLimited     = "rate_limited"
	ReasonQuotaExhausted  = "quota_exhausted"
	ReasonAccount         = "account"
	ReasonOverloaded      = "overloaded"
	ReasonContextLength   = "context_length_exceeded"
	ReasonContentFiltered = "content_filtered"
	ReasonInvalidRequest  = "invalid_request"
	ReasonAuth            = "auth"
	ReasonModelNotFound   = "model_not_found"
	ReasonNotImplemented  = "not_implemented"
	ReasonUpstream5xx     = "upstream_5xx"
	ReasonUpstreamStatus  = "upstream_status"
	ReasonTimeout         = "timeout"
	ReasonNetwork         = "network"
	ReasonTLS             = "tls"
	ReasonBadOutput       = "bad_output"
	ReasonCanceled        = "canceled"
	ReasonPanic           = "panic"
	ReasonUnknown         = "unknown"
	ReasonMarkedPermanent = "permanent"
	ReasonMarkedTransient = "transient"
	ReasonMarkedSystemic  = "systemic"
	ReasonShouldNotRetry  = "should_not_retry"
	ReasonShouldRetry     = "should_retry"
	ReasonClientSide      = "client_error"
	ReasonTooLarge        = "request_too_large"
	ReasonInvalidURL      = "invalid_url"
	ReasonBadStream       = "bad_stream"
)

// Verdict is the classification of one failure.
type Verdict struct {
	// Class decides what the gate does with the job.
	Class Class
	// RetryAfter is the server's retry hint (0 = none). It is already
	// validated: never negative, never above MaxHint.
	RetryAfter time.Duration
	// Reason is a short stable code: a Reason* constant or a custom one.
	// It is never upstream text.
	Reason string
	// ProviderWide reports that the failure is about the provider or the
	// API key, rather than this job. A 429 rate limit, a 503/529 overload
	// and a quota are.
	ProviderWide bool
	// Suspect qualifies a permanent verdict that has no proof. The
	// response rejected the request without naming a cause in it: a bare
	// 400 or 422, or an invalid_request_error with a code nobody lists.
	// The gate then cools the job with its attempt counted. It marks it
	// Failed only when the same rejection comes back on the job's next
	// attempt. A permanent verdict without Suspect is proof. The gate
	// marks the job Failed at once.
	Suspect bool
	// Evidence names the signal that decided the verdict, such as
	// "code:context_length_exceeded", "status:429" or "message:billing".
	// It is a field and a word of the classifier's own tables, never
	// upstream text. It is at most MaxEvidence bytes of
	// [A-Za-z0-9_.:=/-]. It is "" when nothing more specific than the
	// class is known.
	Evidence string
}

// MaxEvidence bounds Verdict.Evidence.
const MaxEvidence = code.MaxLen

// MaxHint caps any retry hint read from a server. A hint above it is
// treated as MaxHint. So a garbage header cannot park a job for years.
const MaxHint = 24 * time.Hour

// Func classifies an error. The gate calls it once per failed call with the
// error fn returned. It is never called with nil.
type Func func(err error) Verdict

// Rule is one classification rule. It decides (ok = true) or passes (ok =
// false). When it passes, the next rule decides, and finally Default.
type Rule func(err error) (v Verdict, ok bool)
