// Package classify decides what an LLM call's failure deserves: a cooldown
// and a retry (transient), a permanent mark on the job (permanent), neither
// because the job is not at fault and only an operator can help (systemic),
// or nothing because the caller gave up (canceled).
//
// Default is the classifier the gate uses when none is given. It knows
// github.com/sashabaranov/go-openai's errors, the error bodies of OpenAI,
// Azure OpenAI, Anthropic, Gemini (google.rpc.Status, also as a JSON array),
// Mistral, vLLM, Ollama and other OpenAI-compatible servers, any error that
// carries an HTTP status (StatusError, *HTTPError), and Go's network, TLS
// and context errors. It reads error text only in the short message table
// below. It decides by the first matching row, in this order of precedence:
//
//	signal                                         class      reason                   provider-wide  retry hint
//	explicit mark: Permanent, Transient, Systemic  as marked  as marked                no             Transient's argument
//	x-should-retry: true                           transient  row's if transient,      row's          explicit
//	                                                          else should_retry
//	x-should-retry: false (unless systemic below)  permanent  row's if permanent,      no             -
//	                                                          else should_not_retry
//	message table (provider messages with no code of their own):
//	  "Your credit balance is too low..." (Anthropic 400)
//	  "You have reached your specified [workspace] API usage limits..." (Anthropic 400)
//	                                               systemic   quota_exhausted          yes            -
//	  "Request too large for ... per min..." (OpenAI 429, Groq 413, code rate_limit_exceeded)
//	                                               permanent  request_too_large        no             -
//	  "... required for long context requests." (Anthropic 429)
//	                                               systemic   quota_exhausted          no             -
//	codes, most specific first (error code, Azure innererror.code, Anthropic
//	details.error_code, google.rpc ErrorInfo.reason and status, error type):
//	  insufficient_quota, credit_balance_exhausted, *_spend_limit_exceeded,
//	  organization_usage_limit_exceeded, billing_hard_limit_reached,
//	  enforced_spend_limit_reached, billing_error, BILLING_DISABLED; status 402
//	                                               systemic   quota_exhausted          yes            -
//	  rate_limit_exceeded, slow_down, rate_limit_error, RATE_LIMIT_EXCEEDED,
//	  RESOURCE_QUOTA_EXCEEDED; any other 429
//	                                               transient  rate_limited             yes            all (below)
//	  overloaded_error; 503, 529                   transient  overloaded               yes            explicit
//	  context_length_exceeded                      permanent  context_length_exceeded  no             -
//	  content_filter, content_policy_violation, invalid_prompt,
//	  ResponsibleAIPolicyViolation, any Azure innererror
//	                                               permanent  content_filtered         no             -
//	  request_too_large; 413                       permanent  request_too_large        no             -
//	  invalid_api_key, authentication_error, FAILED_PRECONDITION, API_KEY_INVALID
//	  and the other credential and project reasons of google.api.ErrorReason
//	  (API_KEY_*_BLOCKED, CREDENTIALS_MISSING, ACCESS_TOKEN_*, SERVICE_DISABLED,
//	  CONSUMER_INVALID, CONSUMER_SUSPENDED, USER_PROJECT_DENIED,
//	  ACCOUNT_STATE_INVALID); 401
//	                                               systemic   auth                     yes            -
//	  permission_error, unsupported_country_region_territory,
//	  LOCATION_POLICY_VIOLATED, SECURITY_POLICY_VIOLATED, ORG_RESTRICTION_VIOLATION; 403
//	                                               systemic   auth                     no             -
//	  model_not_found, not_found_error, DeploymentNotFound; 404
//	                                               systemic   model_not_found          no             -
//	400, 422, invalid_request_error (no code above)
//	                                               permanent  invalid_request          no             -
//	501                                            permanent  not_implemented          no             -
//	408; timeout_error without a status            transient  timeout                  no             explicit
//	409, other statuses                            transient  upstream_status          no             explicit
//	500, 502, 504, other 5xx, server_error, api_error
//	                                               transient  upstream_5xx             no             explicit
//	go-openai *RequestError (body not OpenAI's)    by its status and body, as above
//	go-openai mid-stream *APIError (status 0)      by message, codes and type as above, else transient unknown
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
// Every provider row has cases in testdata/corpus: real responses from the
// official SDKs' tests, the providers' documentation and public issue
// reports, each naming its source.
//
// The message table is short on purpose: a row is added only where a
// provider sends no code of its own and the code it does send leads to the
// wrong class (Anthropic's credit balance is a 400 invalid_request_error; a
// request larger than a whole per-minute limit comes as rate_limit_exceeded).
// A job wrongly failed for a week costs more than a rule on text. Rows match
// a message prefix (plus a fragment where the prefix is not specific) as the
// provider sends it.
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
// reads the retry hint of transient verdicts with ParseRetryHint's rules,
// plus the body's google.rpc.RetryInfo:
//
//   - explicit hints apply to any transient failure: retry-after-ms, then
//     Retry-After, then google.rpc.RetryInfo.retryDelay ("26s");
//   - x-ratelimit-reset-requests/-tokens apply only to rate limits, because
//     OpenAI sends them on every response and they tell when a limit
//     refills, not when an overloaded server recovers. For an OpenAI 429 the
//     error type ("requests" or "tokens") selects the matching header.
//
// Hints are reported as the provider sent them, validated and capped at
// MaxHint (24 h): a Retry-After of 86400 is reported as 24 h. Bounding what
// a hint may do to a job or a scope is the gate's decision.
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
// first 1024 errors are inspected), garbage headers and garbage bodies all
// yield a defined verdict.
package classify
