// Package anthropicsdk classifies the errors of the official Anthropic Go
// SDK, github.com/anthropics/anthropic-sdk-go.
//
// Rule is a classify.Rule: put it in front of classify.Default with
// classify.Chain. It decides every error whose chain holds an
// *anthropic.Error, from the status, the body (the SDK keeps all of it) and
// the response headers the error already carries (retry-after,
// x-should-retry), exactly as classify.Default decides a response seen
// through goopenai.Transport: a 529 overloaded_error is a provider-wide
// overload, "Your credit balance is too low" is systemic quota_exhausted,
// never a job failure. An error event in the middle of a stream (event:
// error, which the SDK returns from stream.Err() as an *anthropic.Error
// carrying the stream's 200) is decided by its error type, as the same
// error outside a stream: an overloaded_error mid-stream is a
// provider-wide overload. Other errors (network, context, marks) pass to
// classify.Default.
//
// The SDK retries twice by default inside one gated attempt; create the
// client with option.WithMaxRetries(0) so the gate decides when to call
// again (see the Example).
//
// Rule is safe for concurrent use.
package anthropicsdk
