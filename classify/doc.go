// Package classify decides what an LLM call's failure deserves: a cooldown
// and a retry (transient), a permanent mark on the job (permanent), neither
// because the job is not at fault and only an operator can help (systemic),
// or nothing because the caller gave up (canceled).
//
// Default is the classifier the gate uses when none is given. It knows
// github.com/sashabaranov/go-openai's errors, OpenAI's and Anthropic's error
// types and codes, any error that carries an HTTP status (StatusError,
// *HTTPError), and Go's network, TLS and context errors. It never matches on
// error text. It reads, in order of precedence, the first matching row:
//
//	signal                                         class      reason                   provider-wide  retry hint
//	explicit mark: Permanent, Transient, Systemic  as marked  as marked                no             Transient's argument
//	x-should-retry: true                           transient  row's if transient,      row's          explicit headers
//	                                                          else should_retry
//	x-should-retry: false (unless systemic below)  permanent  row's if permanent,      no             -
//	                                                          else should_not_retry
//	429 insufficient_quota, credit_balance_exhausted, *_spend_limit_exceeded,
//	    organization_usage_limit_exceeded, billing_hard_limit_reached,
//	    enforced_spend_limit_reached; 402, Anthropic billing_error
//	                                               systemic   quota_exhausted          yes            -
//	429 rate_limit_exceeded, slow_down, any other 429; Anthropic rate_limit_error
//	                                               transient  rate_limited             yes            all headers (below)
//	503; 529 / Anthropic overloaded_error          transient  overloaded               yes            explicit headers
//	400 context_length_exceeded                    permanent  context_length_exceeded  no             -
//	content_filter, content_policy_violation, invalid_prompt, Azure innererror
//	                                               permanent  content_filtered         no             -
//	413, Anthropic request_too_large               permanent  request_too_large        no             -
//	400, 422, invalid_request_error (other code)   permanent  invalid_request          no             -
//	501                                            permanent  not_implemented          no             -
//	401, invalid_api_key, authentication_error     systemic   auth                     yes            -
//	403, permission_error                          systemic   auth                     no             -
//	404, model_not_found, not_found_error          systemic   model_not_found          no             -
//	408, Anthropic timeout_error                   transient  timeout                  no             explicit headers
//	409, other statuses                            transient  upstream_status          no             explicit headers
//	500, 502, 504, other 5xx, server_error, api_error
//	                                               transient  upstream_5xx             no             explicit headers
//	go-openai *RequestError (non-JSON body)        by its status, as above
//	go-openai mid-stream *APIError (status 0)      by type and code as above, else transient unknown
//	go-openai client-side sentinels (ErrChatCompletionInvalidModel,
//	    ErrReasoningModel*, ErrO1*, ...); request JSON encoding errors
//	                                               permanent  client_error             no             -
//	context.Canceled (the caller's ctx)            canceled   canceled                 no             -
//	x509 and TLS errors, http.ErrSchemeMismatch    systemic   tls                      no             -
//	context.DeadlineExceeded, net.Error Timeout(), ETIMEDOUT, DNS timeout
//	                                               transient  timeout                  no             -
//	DNS "no such host"                             systemic   network                  no             -
//	ECONNREFUSED, ECONNRESET, ECONNABORTED, EPIPE, EHOST/ENETUNREACH, io.EOF,
//	    io.ErrUnexpectedEOF, net.ErrClosed, *net.OpError, other DNS errors
//	                                               transient  network                  no             -
//	go-openai ErrTooManyEmptyStreamMessages        transient  bad_stream               no             -
//	unsupported URL scheme, unparsable URL         systemic   invalid_url              no             -
//	anything else, and a nil error                 transient  unknown                  no             -
//
// Within a provider response, a specific error code or Anthropic error type
// wins over the status, and the status over a generic type such as
// "invalid_request_error": OpenAI sends a rate limit and an exhausted quota
// both as 429, and an invalid key with type "invalid_request_error".
//
// Anything unknown is transient because a cooldown is the safe default: a
// wrong transient verdict costs a few retries, which the gate's MaxAttempts
// bounds, while a wrong permanent verdict loses a job that would have
// succeeded.
//
// # Retry hints
//
// go-openai's errors carry no headers. Wrap the client's HTTPClient in a
// Transport, or attach a response's header with WithHeader, and Default
// reads the retry hint of transient verdicts with ParseRetryHint's rules:
// the explicit headers retry-after-ms and Retry-After apply to any transient
// failure; x-ratelimit-reset-requests/-tokens apply only to rate limits,
// because OpenAI sends them on every response and they tell when a limit
// refills, not when an overloaded server recovers. For an OpenAI 429 the
// error type ("requests" or "tokens") selects the matching reset header.
// Hints are validated and capped at MaxHint.
//
// # Custom rules
//
// A Rule decides (ok = true) or passes. Chain puts rules in front of Default:
//
//	classify.Chain(
//		classify.StatusRule(400, classify.Verdict{Class: classify.ClassTransient, Reason: "queue_full"}),
//		func(err error) (classify.Verdict, bool) {
//			var v *ValidationError
//			if errors.As(err, &v) {
//				return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonBadOutput}, true
//			}
//			return classify.Verdict{}, false
//		},
//	)
//
// Application code can also mark its errors with Permanent, Transient,
// Systemic or WithReason; marks are transparent to errors.Is and errors.As
// and win over everything else.
//
// # Guarantees
//
// Default, Chain's Func, the rules, ParseRetryHint and Transport are safe
// for concurrent use (a Transport if its Doer is). Default never panics: a
// nil error, an error wrapping nil, a cyclic or very deep chain (only the
// first 1024 errors are inspected) and garbage headers all yield a defined
// verdict.
package classify
