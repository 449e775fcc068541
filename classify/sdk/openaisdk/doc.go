// Package openaisdk classifies the errors of the official OpenAI Go SDK,
// github.com/openai/openai-go/v3.
//
// Rule is a classify.Rule: put it in front of classify.Default with
// classify.Chain. It decides every error whose chain holds an
// *openai.Error, from the status, body and response headers the error
// already carries (Retry-After, retry-after-ms, x-should-retry,
// x-ratelimit-reset-*), exactly as classify.Default decides a response
// seen through goopenai.Transport; no Transport is needed. Other errors
// (network, context, marks) pass to classify.Default.
//
// Streams: a Chat Completions stream that receives an error event ends
// with a *ssestream.StreamError, which Rule decides from the event's error
// object as it would the same error outside a stream (a mid-stream
// rate_limit_exceeded is a provider-wide rate limit, not an unknown
// failure charged to the job). The Responses API reports failures as
// ordinary "error" and "response.failed" events and its stream ends with
// a nil Err: pass every event to EventError, which turns those two into
// an error the gate can classify (see its doc for the loop).
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
