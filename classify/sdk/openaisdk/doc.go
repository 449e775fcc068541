// Package openaisdk classifies the errors of the official OpenAI Go SDK,
// github.com/openai/openai-go/v3.
//
// Rule is a classify.Rule: put it in front of classify.Default with
// classify.Chain. It decides every error whose chain holds an
// *openai.Error, from the status, body and response headers the error
// already carries (Retry-After, retry-after-ms, x-should-retry,
// x-ratelimit-reset-*), exactly as classify.Default decides a response
// seen through classify.Transport; no Transport is needed. Other errors
// (network, context, marks) pass to classify.Default.
//
// The SDK retries twice by default inside one gated attempt; create the
// client with option.WithMaxRetries(0) so the gate decides when to call
// again (see the Example).
//
// Rule is safe for concurrent use, except on one error value from two
// goroutines at once when the body is not a JSON object (Gemini's
// OpenAI-compatible endpoint answers with a JSON array): the SDK keeps only
// the body's "error" member, so Rule then reads the response body the SDK
// kept and puts an identical reader back, as the SDK's own DumpResponse
// does.
package openaisdk
