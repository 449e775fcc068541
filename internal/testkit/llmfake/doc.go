// Package llmfake is a fake LLM provider that enforces rate limits the way
// OpenAI and Anthropic describe theirs, for the tests and benchmarks that
// prove a gate keeps calls under a provider's limit.
//
// A Provider is an http.Handler. It keeps a requests-per-minute limit and a
// tokens-per-minute limit (Anthropic: input and output tokens per minute) as
// token buckets that refill continuously up to the limit, and answers every
// call, success or failure, with the dialect's rate-limit headers: OpenAI's
// x-ratelimit-{limit,remaining,reset}-{requests,tokens} or Anthropic's
// anthropic-ratelimit-*. A call that does not fit is refused with a 429 in
// the dialect's shape: OpenAI's rate_limit_exceeded error whose message says
// "Please try again in …", Anthropic's rate_limit_error with retry-after.
// The wait a 429 states is the time until that call fits, not until the
// bucket is full, which is what the reset headers say.
//
// The clock is Config.Now, so tests drive time by hand. A Provider is safe
// for concurrent use. It imports neither gate nor httpmw: it is a test
// helper, and nothing outside tests and benchmarks imports it.
package llmfake
