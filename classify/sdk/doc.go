// Package sdk is a nested Go module holding classify's adapters for the
// official Go SDKs: openaisdk for github.com/openai/openai-go and
// anthropicsdk for github.com/anthropics/anthropic-sdk-go.
//
// It is a module of its own so that importing retrygate's gate and classify
// never pulls in either SDK or their dependency trees (Azure, AWS, Google
// auth libraries). Each adapter is one classify.Rule:
//
//	gate.Options{Classify: classify.Chain(openaisdk.Rule)}
//
// Both SDKs retry failed calls themselves, twice by default, with their own
// backoff, inside what the gate sees as one attempt: a rate-limited job then
// makes three upstream calls per gated attempt, and the gate's cooldown
// starts only after the SDK gave up. Turn the SDK's retries off with
// option.WithMaxRetries(0) on the client (or per request) and let the gate
// decide when to call again.
package sdk
