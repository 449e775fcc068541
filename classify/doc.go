// Package classify decides what an LLM call's failure deserves. A verdict
// is one of four classes:
//   - transient: a cooldown and a retry;
//   - permanent: a permanent mark on the job;
//   - systemic: neither, because the job is not at fault and only an
//     operator can help;
//   - canceled: nothing, because the caller gave up.
//
// Default is the classifier the gate uses when none is given. It knows:
//   - github.com/sashabaranov/go-openai's errors, read by their shape
//     (classify does not import go-openai; package classify/goopenai does,
//     and holds the Transport for that client);
//   - the error bodies of OpenAI, Azure OpenAI, Anthropic, Gemini
//     (google.rpc.Status, also as a JSON array), Mistral, vLLM, Ollama,
//     llama.cpp, Hugging Face TGI, xAI, Alibaba Model Studio, Cloudflare
//     (errors[]), AWS (__type, x-amzn-ErrorType) and other
//     OpenAI-compatible servers and gateways;
//   - any error that carries an HTTP status (StatusError, *HTTPError);
//   - Go's network, TLS and context errors.
//
// # Failed only on proof
//
// A job is marked Failed only on positive evidence that this request can
// never succeed. The evidence is one of these:
//   - a code or type that names the request (context length, request size,
//     content policy, a parameter the model rejects);
//   - an HTTP 413;
//   - a request go-openai refuses to send;
//   - the application's own mark;
//   - words that name the request, listed below.
//
// Words that name the request are:
//
//   - its size over a stated limit: "prompt is too long: 227255 tokens >
//     200000 maximum", "maximum context length is 131072 tokens",
//     "max_tokens: 10000 > 4096, which is the maximum allowed", "inputs
//     tokens + max_new_tokens must be <= 2048";
//   - a parameter or schema feature the model rejects: "Invalid schema for
//     response_format", "Unknown parameter", "Unknown name ... Cannot find
//     field", "Extra inputs are not permitted", "functions is not
//     supported", "does not support tools", "`temperature` and `top_p`
//     cannot both be specified", "Developer instruction is not enabled for
//     models/gemma-3-27b-it";
//   - the order and shape of the messages: "roles must alternate",
//     "Expected last role User or Tool", "A conversation must start with a
//     user message", "final assistant content cannot end with trailing
//     whitespace", "function call turn comes immediately after a user
//     turn";
//   - a content or guardrail verdict on this input: "rejected as a result of
//     our safety system", "Content Exists Risk", "Violated guardrail
//     policy", "requires moderation and your input was flagged",
//     "inappropriate content", "Request contains prohibited content",
//     "Blocked by Akamai Firewall for AI"; a gateway's own status or code
//     for it (Portkey's and WSO2's 446, hooks_failed,
//     sensitive_words_detected).
//
// A message is read decoded when it is percent-encoded, as an undecoded
// gRPC status message carries it
// ("Developer%20instruction%20is%20not%20enabled...", or with its spaces
// kept and only other bytes escaped, as the gRPC spec encodes it), or
// form-encoded.
// A body in plain text is read as the message. A page (HTML) is not.
//
// Which words are proof depends on the status:
//   - a content or guardrail verdict is proof under any status or type, a
//     403 or a 500 included;
//   - words about the request's size, parameters or the order of its
//     messages are proof under any status that rejects a request (400,
//     413, 422, 429, mid-stream...);
//   - those words are not proof under 403 and 404, where they more likely
//     describe the deployment ("endpoint not supported");
//   - under a server's own 5xx, only a size stated in numbers ("longer
//     than the maximum model length of 65536", as vLLM through Xinference
//     answers it) and the order of the messages ("system message must be
//     at the beginning", Ollama's): servers answer their validation errors
//     so, while parameter words there may be the server's own trouble;
//   - under a 429, only content verdicts and the order of the messages:
//     token counts and limits there are a rate's ("Too many tokens,
//     please wait").
//
// Words about money, keys, accounts, budgets and models win over them,
// whatever the status. A job is never Failed for those. Where the text
// speaks of the account at all, words prove nothing. Account words
// include account, organisation, plan, tier, billing, quota, credits,
// permission and region.
//
// A rejection that names what it rejects is proof too, in words the lists
// above lack. That is a 400 or 422 whose message says more than a generic
// rejection's closed vocabulary (request, input, parameter, invalid,
// malformed, failed, please check, try again...). It is also one whose
// body names the field (param, loc, fieldViolations, a snake_case name).
// Neither is proof when it speaks of the server. Neither is proof when it
// names no field and speaks of a key, a network policy or the account.
// One that names no field and speaks of the model or its deployment is
// the model's (systemic).
//
// A rejection without proof is a suspect. Such rejections are a bare 400
// or 422, an invalid_request_error with a code nobody lists and no words
// above, a 501, and x-should-retry: false. A suspect has Class
// ClassPermanent and Suspect set. The gate cools the job with its attempt
// counted. It marks the job Failed only when the same rejection comes
// back on the job's next attempt.
//
// A bare 400 or 422 whose error type says the server failed (server_error,
// api_error: Ollama's 400 "unexpected server status") is the server's:
// transient.
//
// Default decides by the first matching row, in this order of precedence:
//
//	signal                                         class      reason                   provider-wide  evidence
//	explicit mark: Permanent, Transient, Systemic  as marked  as marked                no             mark:<class>
//	message table: "Your credit balance is too low", "You have reached your specified API usage limits"
//	                                               systemic   quota_exhausted          yes            message:<row>
//	  "Request too large for ... per min" (OpenAI 429, Groq 413)
//	                                               permanent  request_too_large        no             message:request_too_large
//	  "... required for long context requests" (Anthropic 429)
//	                                               systemic   quota_exhausted          no             message:long_context
//	  "Content violates usage guidelines" (xAI 403, code and ids of access)
//	                                               permanent  content_filtered         no             message:usage_guidelines
//	codes that are not the request's (error code, Azure innererror.code,
//	Anthropic details.error_code, google.rpc ErrorInfo.reason and status, type):
//	  insufficient_quota, credit_balance_exhausted, *_spend_limit_exceeded,
//	  organization_usage_limit_exceeded, billing_hard_limit_reached,
//	  enforced_spend_limit_reached, billing_error, BILLING_DISABLED
//	                                               systemic   quota_exhausted          yes            code:<code> (or innercode:, errorinfo:, rpcstatus:, type:)
//	  rate_limit_exceeded, slow_down, rate_limit_error, RATE_LIMIT_EXCEEDED, RESOURCE_QUOTA_EXCEEDED
//	                                               transient  rate_limited             yes
//	  overloaded_error, capacity_exceeded          transient  overloaded               yes
//	  invalid_api_key, authentication_error, FAILED_PRECONDITION, API_KEY_INVALID
//	  and the other credential and project reasons of google.api.ErrorReason
//	                                               systemic   auth                     yes
//	  permission_error, unsupported_country_region_territory, LOCATION_POLICY_VIOLATED,
//	  SECURITY_POLICY_VIOLATED, ORG_RESTRICTION_VIOLATION
//	                                               systemic   auth                     no
//	  model_not_found, not_found_error, DeploymentNotFound
//	                                               systemic   model_not_found          no
//	401                                            systemic   auth                     yes            status:401
//	402                                            systemic   quota_exhausted          yes            status:402
//	the account vocabulary (below), in codes, types and messages, for any
//	status; under the server's own (5xx, 408) only money, account and key
//	words and a model the server cannot load, unless a proof below would
//	fail the job
//	                                               per group, never permanent          <field>:<word>
//	codes that name the request (proof):
//	  context_length_exceeded, exceed_context_size_error
//	                                               permanent  context_length_exceeded  no             code:<code>
//	  content_filter, content_policy_violation, invalid_prompt, DataInspectionFailed,
//	  ResponsibleAIPolicyViolation, any Azure innererror, hooks_failed (Portkey),
//	  sensitive_words_detected (One API, new-api)
//	                                               permanent  content_filtered         no
//	  request_too_large; 413                       permanent  request_too_large        no
//	  unsupported_parameter, invalid_type, missing_required_parameter,
//	  string_above_max_length, array_above_max_length
//	                                               permanent  invalid_request          no
//	words that name the request (above; size, parameter and order words not under 403, 404;
//	under 5xx only a size stated in numbers and the order of the messages),
//	unless the text speaks of the account
//	                                               permanent  context_length_exceeded, no             <field>:<word>
//	                                                          content_filtered or invalid_request
//	400, 416, 422, invalid_request_error (no code above) that name the part of the
//	request they reject: a message in more than the generic words of a rejection, or
//	the body's field (OpenAI's param, FastAPI's loc, google.rpc BadRequest's field),
//	with no words of the server, the deployment, a key, a policy or the account
//	                                               permanent  invalid_request          no             message:names_request, param:field
//	  ... that names no field and speaks of the model, its deployment or endpoint
//	                                               systemic   model_not_found          no             message:model_named
//	400, 422, invalid_request_error (no code above), named by no proof;
//	416 (a range the request asks and the model cannot give: Scaleway's
//	max_completion_tokens above the model's limit)
//	                                               suspect    invalid_request          no             status:400, type:invalid_request_error
//	  ... whose words name the request beside the account
//	                                               suspect    context_length_exceeded, content_filtered or invalid_request
//	446 (Portkey, WSO2 AI Gateway: a guardrail denied the request)
//	                                               permanent  content_filtered         no             status:446
//	403                                            systemic   auth                     no             status:403
//	404                                            systemic   model_not_found          no             status:404
//	429                                            transient  rate_limited             yes            status:429
//	503, 529, 498 (capacity: Groq's flex tier, Cloudflare)
//	                                               transient  overloaded               yes            status:<n>
//	501                                            suspect    not_implemented          no             status:501
//	408; timeout_error without a status            transient  timeout                  no
//	409, 412, 424, 499 and other statuses          transient  upstream_status          no             status:<n>
//	500, 502, 504, 520-530 (Cloudflare's origin errors), other 5xx, server_error, api_error
//	                                               transient  upstream_5xx             no             status:<n>
//	x-should-retry: true                           transient  row's if transient,      row's          header:x-should-retry
//	                                                          else should_retry
//	x-should-retry: false, on a transient row      suspect    should_not_retry         no             header:x-should-retry
//	go-openai client-side sentinels; request JSON encoding errors
//	                                               permanent  client_error             no             go:client
//	context.Canceled (the caller's ctx)            canceled   canceled                 no             go:canceled
//	x509 and TLS errors, http.ErrSchemeMismatch    systemic   tls                      no             go:tls
//	context.DeadlineExceeded, net.Error Timeout(), ETIMEDOUT
//	                                               transient  timeout                  no             go:timeout
//	DNS "no such host"                             systemic   network                  no             go:dns
//	ECONNREFUSED                                   transient  network                  no             go:refused
//	EHOSTUNREACH, ENETUNREACH                      transient  network                  no             go:unreachable
//	ECONNRESET, EPIPE, io.EOF, *net.OpError, other network errors
//	                                               transient  network                  no             go:network
//	go-openai ErrTooManyEmptyStreamMessages        transient  bad_stream               no             go:stream
//	unsupported URL scheme, unparsable URL         systemic   invalid_url              no             go:url
//	anything else, and a nil error                 transient  unknown                  no             default:unknown
//
// Failures of the address itself, which every call to it meets, carry
// their own Evidence:
//   - go:dns: the host does not resolve;
//   - go:refused: nothing listens there;
//   - go:unreachable: no route to it;
//   - go:tls: its certificate does not verify, or it speaks no TLS;
//   - go:url: the URL cannot be used.
//
// A gate with an upstream cools it once a few distinct jobs meet them
// (gate.UpstreamPolicy.UnreachableJobs). A connection that broke
// (go:network) or timed out (go:timeout) may be one call's bad luck.
//
// Only capacity statuses are provider-wide: 503, 529 (Anthropic, Together:
// "overloaded") and 498 (Groq's flex tier: "capacity_exceeded"). 499 is a
// proxy's "client closed request". 520-530 are Cloudflare's errors for an
// origin that failed. They are transient for the job, like 502 and 504.
//
// # The account vocabulary
//
// Words are matched on word boundaries, case-insensitively. They are
// looked for in these places, in order:
//   - the error code and the inner codes;
//   - the google.rpc reason and status;
//   - the message;
//   - google.rpc.QuotaFailure's quotaId ("...PerMinutePerProjectPerModel");
//   - last, the error type (providers file money problems under their
//     rate-limit type).
//
// Codes are split like text: "insufficient_balance", "InsufficientBalance"
// and "insufficient balance" are the same words. A word with '*' matches
// any word it begins. "Near" means another word within a few words. When
// several groups match, the first in this table wins:
//
//	group        words                                                       verdict
//	rate         throttl*, concurrency, per minute/min/second/hour/day,      transient rate_limited, provider-wide
//	             rpm, tpm, rpd, tpd, minute/second/hour near calls/requests/
//	             tokens ("40 API calls / minute"); 限流, 速率, 请求频率
//	overload     overload*, capacity near over/out of/at/exceeded,           transient overloaded, provider-wide
//	             busy near server/engine, temporarily unavailable
//	money        billing, payment*, invoice*, arrear*, overdue, unpaid,      systemic quota_exhausted, provider-wide
//	             recharge*, top up, credit(s), balance, funds, usage limit*,
//	             overage*, a key's limit/budget/cap ("Key limit exceeded"),
//	             budget near exceed/limit/over (not "budget tokens"),
//	             spend* near limit/cap,
//	             plan, subscription or tier near upgrade/paid/purchase/expired,
//	             monthly/weekly/yearly near limit/quota/usage/cap,
//	             month/week/year near calls/requests/tokens/limit;
//	             欠费, 余额, 充值
//	rate named   rate limit, ratelimit, too many requests,                   transient rate_limited, provider-wide
//	             resource near exhaust*
//	quota        quota near exceed/exhaust/limit                             systemic quota_exhausted, provider-wide
//	account      suspend*, deactivat*, banned; account, organization, team,   systemic account, provider-wide
//	             workspace, tenant, entitlement, your resource/deployment/
//	             project near disabled/inactive/locked/blocked/
//	             terminated/closed/deleted/frozen/restricted/not enabled,
//	             or near denied/unavailable/missing/refused where no model,
//	             deployment or endpoint is named (not a field named for
//	             the account: account_id, organization header);
//	             账户已, 封禁
//	no model     no model(s) followed by loaded/available/running            systemic model_not_found, provider-wide
//	model        model(s) followed by not found/does not exist/not           systemic model_not_found
//	             available/not supported/not loaded/not deployed/decommissioned/is disabled;
//	             unknown/invalid model
//	model load   failed to/could not/unable to load (the) model, error       systemic model_not_found
//	             loading (the) model, model failed to load; more (system)
//	             memory/vram or not enough memory near model (also under 5xx)
//	access       permission*, access denied, no access, not authorized,      systemic auth
//	             verif* near organization/account/identity
//	key          api key, access key, secret key, subscription key,          systemic auth, provider-wide
//	             access/bearer/auth/security/session/expired token,
//	             credential*, authenticat*, unauthorized, signature near invalid
//	             (not a content block's: block, thinking, thought)
//
// A rate limit only named ("RateLimitError", "higher rate limits", gRPC's
// "resource exhausted") says less than money words beside it. LiteLLM
// names OpenAI's insufficient_quota a RateLimitError. xAI sends spent
// credits as "Some resource has been exhausted". Cohere sends its monthly
// trial limit with "higher rate limits". Where the response paces the
// retry, the named rate comes first, before overload and money. A
// google.rpc.RetryInfo paces it, and so does a wait its message states:
// Gemini's per-minute quota 429s come with billing words. A rate-limit
// error type (Anthropic's rate_limit_error) is such a name too. Money
// words beside it win unless words give the rate's period. Anthropic files
// "This request would exceed your account's monthly spend limit" under it.
//
// Four more groups are proof. They are read after the groups above, and
// only where no word about the account appears:
//   - context length words give context_length_exceeded: context length,
//     context window, token limit, too many tokens, prompt is too long,
//     input is too long, input token count, maximum number of tokens,
//     input/prompt tokens near exceed/must be/maximum/limit,
//     prompt/input/sequence length near maximum/exceeds/contains, a max or
//     maximum length near actual/exceeds/current;
//   - content words give content_filtered: content policy or policies,
//     safety system, flagged, inappropriate, unsafe, data inspection,
//     content near risk, prohibited content, content blocked, sensitive
//     words, 敏感词, prompt injection, jailbreak, allow/deny patterns,
//     usage guidelines near a verdict word, blocked by an AI firewall, a
//     guard(rail), a content or safety filter or a prompt shield, or
//     filtered by one (not by a firewall or a policy, which may block an
//     address), moderation or guardrail near a verdict word such as
//     violated, blocked, flagged, requires or the categories it names (a
//     guardrail service that failed is no verdict);
//   - parameter words give invalid_request: invalid schema, schema is
//     invalid, unknown parameter, unknown name, unknown variant, invalid
//     value at, field invalid, proto is invalid, extra inputs, failed to
//     satisfy constraint, value must be, valid range, invalid type,
//     expected a string, invalid ... value, must be a boolean/an
//     integer/..., cannot determine type, supports at most, a body or
//     request that is not valid JSON or failed to parse or deserialize,
//     the idioms of a field's validation (is required, must not be empty,
//     must be greater than, must be valid, is not a valid, invalid
//     field(s), cannot be used with, a range that should be...), not
//     supported, does not support, cannot both be, not enabled for models,
//     not permitted near key/input/field/parameter, max tokens near
//     exceed/must be/maximum/limit;
//   - words about the order and shape of the messages give
//     invalid_request: must alternate, alternate between, unexpected or
//     last role, must start with a user message, the final or assistant
//     message/block/content near cannot/must/missing, user/model/function
//     call turns, tool calls or results near must
//     be/without/preceding/cannot/same turn, message(s) must
//     contain/include/have, a system message near beginning/first/only
//     one, reasoning content or a thought signature near
//     must/missing/required.
//
// Links (http:// and https://) are not read: "json-schema.org" is no
// organisation. Nor are JSON pointers into the request and a validator's
// label for them ("Location", "instancePath"): "Location:
// /properties/messages/items" names no location. Any other word before a
// pointer's colon is read ("billing: /0/1" is the account's). "model"
// before "turn" or "role" is a role in the conversation, not the model.
//
// Every provider row has cases in testdata/corpus. They are real responses
// from the official SDKs' tests, the providers' documentation and public
// issue reports. Each names its source. testdata/holdout holds responses
// from providers the vocabulary was not designed on (TestHoldout).
//
// # Evidence
//
// Verdict.Evidence names the signal that decided, as field:word. The field
// is one of mark, message, code, innercode, errorinfo, rpcstatus, type,
// status, header, go, default or rule (Chain's rule N). The word is an
// entry of the tables above, never upstream text. Evidence is at most
// MaxEvidence bytes of [A-Za-z0-9_.:=/-]. Chain replaces a rule's Evidence
// of another form with "rule:N". The gate records none of another form.
//
// Within a provider response, a specific error code or Anthropic error type
// wins over the status. The status wins over a generic type such as
// "invalid_request_error". OpenAI sends a rate limit and an exhausted quota
// both as 429, and an invalid key with type "invalid_request_error".
//
// Anything unknown is transient, because a cooldown is the safe default.
// A wrong transient verdict costs a few retries, which the gate's
// MaxAttempts bounds. A wrong permanent verdict loses a job that would
// have succeeded.
//
// # Retry hints
//
// go-openai's errors carry no headers. Wrap the client's HTTPClient in a
// goopenai.Transport (package classify/goopenai), or attach a response's
// header with WithHeader. Then Default reads the retry hint of transient
// verdicts with ParseRetryHint's rules, plus the body's
// google.rpc.RetryInfo:
//
//   - explicit hints apply to any transient failure: retry-after-ms, then
//     Retry-After, then google.rpc.RetryInfo.retryDelay ("26s");
//   - x-ratelimit-reset-requests/-tokens apply only to rate limits, because
//     OpenAI sends them on every response and they tell when a limit
//     refills, not when an overloaded server recovers. For an OpenAI 429 the
//     error type ("requests" or "tokens") selects the matching header;
//   - without those, Anthropic's anthropic-ratelimit-*-reset times (the
//     latest), also for rate limits only: a gateway that strips
//     retry-after leaves them the only hint.
//
// Hints are reported as the provider sent them, validated and capped at
// MaxHint (24 h). A Retry-After of 86400 is reported as 24 h. Bounding
// what a hint may do to a job or an upstream is the gate's decision.
//
// # Custom rules
//
// A Rule decides (ok = true) or passes. Chain puts rules in front of
// Default:
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
// Systemic or WithReason. Marks are transparent to errors.Is and
// errors.As. They win over everything else.
//
// # Guarantees
//
// Default, Chain's Func, the rules, ParseRetryHint and Transport are safe
// for concurrent use (a Transport if its Base is). Default never panics.
// A nil error, an error wrapping nil, a cyclic or very deep chain (only
// the first 1024 errors are inspected), garbage headers and garbage
// bodies all yield a defined verdict.
package classify
