package classify

import (
	"math"
	"net/http"
	"strconv"
	"strings"
)

// Verdicts shared by the API rules.
var (
	vRateLimited    = Verdict{Class: ClassTransient, Reason: ReasonRateLimited, ProviderWide: true}
	vOverloaded     = Verdict{Class: ClassTransient, Reason: ReasonOverloaded, ProviderWide: true}
	vQuota          = Verdict{Class: ClassSystemic, Reason: ReasonQuotaExhausted, ProviderWide: true}
	vAuthKey        = Verdict{Class: ClassSystemic, Reason: ReasonAuth, ProviderWide: true}
	vPermission     = Verdict{Class: ClassSystemic, Reason: ReasonAuth}
	vModelNotFound  = Verdict{Class: ClassSystemic, Reason: ReasonModelNotFound}
	vContextLength  = Verdict{Class: ClassPermanent, Reason: ReasonContextLength}
	vContentFilter  = Verdict{Class: ClassPermanent, Reason: ReasonContentFiltered}
	vInvalidRequest = Verdict{Class: ClassPermanent, Reason: ReasonInvalidRequest, Suspect: true}
	vBadParameter   = Verdict{Class: ClassPermanent, Reason: ReasonInvalidRequest}
	vTooLarge       = Verdict{Class: ClassPermanent, Reason: ReasonTooLarge}
	vNotImplemented = Verdict{Class: ClassPermanent, Reason: ReasonNotImplemented, Suspect: true}
	vUpstream5xx    = Verdict{Class: ClassTransient, Reason: ReasonUpstream5xx}
	vTimeout        = Verdict{Class: ClassTransient, Reason: ReasonTimeout}
	vUpstreamStatus = Verdict{Class: ClassTransient, Reason: ReasonUpstreamStatus}
	vUnknown        = Verdict{Class: ClassTransient, Reason: ReasonUnknown}
)

// with returns v with its Evidence.
func (v Verdict) with(evidence string) Verdict {
	v.Evidence = evidence
	return v
}

// byCode holds the provider error codes and types specific enough to decide
// on their own, whatever the status. OpenAI sends an exhausted quota and a
// rate limit both as 429. It sends an invalid key as type
// "invalid_request_error". So the code must win over the status, and the
// status over a generic type.
var byCode = map[string]Verdict{
	// OpenAI error.code, Anthropic error.type, Azure innererror.code.
	"insufficient_quota":                   vQuota,
	"credit_balance_exhausted":             vQuota,
	"organization_usage_limit_exceeded":    vQuota,
	"billing_hard_limit_reached":           vQuota,
	"enforced_spend_limit_reached":         vQuota,
	"billing_error":                        vQuota,
	"rate_limit_exceeded":                  vRateLimited,
	"slow_down":                            vRateLimited,
	"rate_limit_error":                     vRateLimited,
	"overloaded_error":                     vOverloaded,
	"context_length_exceeded":              vContextLength,
	"content_filter":                       vContentFilter,
	"content_policy_violation":             vContentFilter,
	"invalid_prompt":                       vContentFilter,
	"ResponsibleAIPolicyViolation":         vContentFilter,
	"invalid_api_key":                      vAuthKey,
	"authentication_error":                 vAuthKey,
	"permission_error":                     vPermission,
	"unsupported_country_region_territory": vPermission,
	"model_not_found":                      vModelNotFound,
	"not_found_error":                      vModelNotFound,
	"DeploymentNotFound":                   vModelNotFound,
	"request_too_large":                    vTooLarge,

	// Gateways' own verdicts on the request. Portkey's type is for a
	// guardrail's deny, with its status 446. One API and new-api's word
	// filter on the prompt comes under 400, and 500 in some versions.
	"hooks_failed":             vContentFilter,
	"sensitive_words_detected": vContentFilter,

	// Codes that name the request, of OpenAI-compatible servers.
	"exceed_context_size_error":  vContextLength, // llama.cpp server
	"DataInspectionFailed":       vContentFilter, // Alibaba Model Studio (DashScope)
	"capacity_exceeded":          vOverloaded,    // Groq flex tier, with status 498
	"string_above_max_length":    vBadParameter,  // OpenAI: a parameter's value is too long
	"array_above_max_length":     vBadParameter,
	"unsupported_parameter":      vBadParameter, // OpenAI: the model rejects a parameter
	"invalid_type":               vBadParameter,
	"missing_required_parameter": vBadParameter,

	// OpenAI Responses API error codes (ResponseError.code) that name the
	// request's image or content. failed_to_download_image and
	// vector_store_timeout may pass later and stay unlisted.
	"invalid_image":                  vBadParameter,
	"invalid_image_format":           vBadParameter,
	"invalid_base64_image":           vBadParameter,
	"invalid_image_url":              vBadParameter,
	"image_too_large":                vBadParameter,
	"image_too_small":                vBadParameter,
	"image_parse_error":              vBadParameter,
	"invalid_image_mode":             vBadParameter,
	"image_file_too_large":           vBadParameter,
	"unsupported_image_media_type":   vBadParameter,
	"empty_image_file":               vBadParameter,
	"image_file_not_found":           vBadParameter,
	"image_content_policy_violation": vContentFilter,
	"bio_policy":                     vContentFilter,

	// google.rpc.Status.status.
	"FAILED_PRECONDITION": vAuthKey, // Gemini: no free tier in this region, billing not enabled

	// google.rpc.ErrorInfo.reason, from google.api.ErrorReason. Credentials
	// and project state fail every call of the key. Quota reasons refill.
	"API_KEY_INVALID":                 vAuthKey,
	"API_KEY_SERVICE_BLOCKED":         vAuthKey,
	"API_KEY_HTTP_REFERRER_BLOCKED":   vAuthKey,
	"API_KEY_IP_ADDRESS_BLOCKED":      vAuthKey,
	"API_KEY_ANDROID_APP_BLOCKED":     vAuthKey,
	"API_KEY_IOS_APP_BLOCKED":         vAuthKey,
	"CREDENTIALS_MISSING":             vAuthKey,
	"ACCESS_TOKEN_EXPIRED":            vAuthKey,
	"ACCESS_TOKEN_SCOPE_INSUFFICIENT": vAuthKey,
	"ACCESS_TOKEN_TYPE_UNSUPPORTED":   vAuthKey,
	"SERVICE_DISABLED":                vAuthKey,
	"CONSUMER_INVALID":                vAuthKey,
	"CONSUMER_SUSPENDED":              vAuthKey,
	"USER_PROJECT_DENIED":             vAuthKey,
	"ACCOUNT_STATE_INVALID":           vAuthKey,
	// Gemini Code Assist's "Verify your account to continue". No call of
	// the account passes until it is verified.
	"VALIDATION_REQUIRED":       vAuthKey,
	"BILLING_DISABLED":          vQuota,
	"RATE_LIMIT_EXCEEDED":       vRateLimited,
	"RESOURCE_QUOTA_EXCEEDED":   vRateLimited,
	"LOCATION_POLICY_VIOLATED":  vPermission,
	"SECURITY_POLICY_VIOLATED":  vPermission,
	"ORG_RESTRICTION_VIOLATION": vPermission,
}

// byStatus decides when no specific code did.
var byStatus = map[int]Verdict{
	http.StatusBadRequest:                   vInvalidRequest,
	http.StatusUnauthorized:                 vAuthKey,
	http.StatusPaymentRequired:              vQuota,
	http.StatusForbidden:                    vPermission,
	http.StatusNotFound:                     vModelNotFound,
	http.StatusRequestTimeout:               vTimeout,
	http.StatusConflict:                     vUpstreamStatus,
	http.StatusRequestEntityTooLarge:        vTooLarge,
	http.StatusRequestedRangeNotSatisfiable: vInvalidRequest, // Scaleway: max_completion_tokens above the model's
	http.StatusUnprocessableEntity:          vInvalidRequest,
	http.StatusTooManyRequests:              vRateLimited,
	http.StatusNotImplemented:               vNotImplemented,
	http.StatusServiceUnavailable:           vOverloaded,
	446:                                     vContentFilter, // Portkey, WSO2 AI Gateway: a guardrail denied the request
	498:                                     vOverloaded,    // Groq flex tier: capacity_exceeded
	529:                                     vOverloaded,    // Anthropic, Together: overloaded
}

// byType decides last, for generic error types. Mid-stream errors have no
// status. Statuses outside byStatus still carry a type.
var byType = map[string]Verdict{
	"invalid_request_error": vInvalidRequest,
	"server_error":          vUpstream5xx,
	"api_error":             vUpstream5xx,
	"timeout_error":         vTimeout,
}

// apiVerdict classifies a provider's error response. It reads its status
// (0 when unknown, as mid-stream) and what its body says. The message is
// decoded first if it came percent-encoded (plaintext.go). The order is:
//
//  1. the message table (messages.go);
//  2. codes that say the failure is not the request's (a rate limit, a
//     quota, a key), most specific first. A rate-limit error type yields
//     to money words beside it, unless words give the rate's period;
//  3. 401 and 402, which already say the same;
//  4. the account vocabulary (vocab.go): money, accounts, keys and models
//     win over any proof. Under a server's own status (5xx, 408) without
//     proof, only money, account and key words are read. Rate and
//     overload words do not make a 500 provider-wide. A rate only named
//     yields to money words unless the response paces the retry;
//  5. proof that names the request, unless the text also speaks of the
//     account (gMention). It is a code (context_length_exceeded,
//     content_filter...). Else it is words that name:
//     - a content or guardrail verdict on it, under any status;
//     - its size over a limit stated in numbers, or the order of its
//     messages, under any status but 403 and 404;
//     - a parameter or schema feature the model rejects, under a status
//     that rejects a request (not 403, 404 or 5xx);
//  6. the status, then a generic type. A bare rejection (400, 422,
//     invalid_request_error, 501) is a suspect: permanent, unproven.
//     There are three exceptions. A type that says the server failed
//     (server_error, api_error) makes it the server's: transient. Naming
//     the part of the request it rejects (rejection.go) makes it proof.
//     Speaking of the model or its deployment makes it the model's:
//     systemic.
func apiVerdict(status int, p problem) Verdict {
	v := judgeAPI(status, p)
	if v.Reason == ReasonOverloaded && p.model != "" {
		// The capacity that ran out is one model's, named by the
		// structured ErrorInfo: "No capacity available for model
		// claude-opus-4-5-thinking" (MODEL_CAPACITY_EXHAUSTED). The
		// upstream's other models still serve, so only this job cools.
		v.ProviderWide = false
	}
	return v
}

// judgeAPI is apiVerdict's reading of the status and the body.
func judgeAPI(status int, p problem) Verdict {
	p.message = plainText(p.message)
	if v, ok := messageVerdict(p.message); ok {
		return v
	}
	if status == 0 {
		status = p.status
	}
	codes := p.codes()
	fields := p.fields()
	if v, ok := codeVerdict(codes, false); ok {
		if v.Reason == ReasonAuth && !v.ProviderWide && strings.HasPrefix(v.Evidence, "type:") {
			// A permission type is the class an API files every 403
			// under: OpenRouter's guardrail block comes as Anthropic's
			// permission_error ("Request blocked: prompt injection
			// patterns detected"). A content verdict beside it says
			// more, unless the text speaks of the account (the type's own
			// "permission" is not read: it is the word being overruled).
			if g, ev := vocabMatch(fields, gContent); g == gContent {
				if m, _ := vocabMatch(withoutType(fields), gMention); m == 0 {
					return groupVerdict[g].with(ev)
				}
			}
		}
		if v.Reason == ReasonRateLimited && strings.HasPrefix(v.Evidence, "type:") {
			// A rate-limit type is the class a provider files its 429s
			// under, money problems included. Anthropic's "This request
			// would exceed your account's monthly spend limit" is a
			// rate_limit_error. Money words beside it win, unless words
			// give the rate's period (OpenRouter's
			// "free-models-per-day-high-balance").
			if g, ev := vocabMatch(fields, gRate, gMoney); g == gMoney {
				return groupVerdict[g].with(ev)
			}
		}
		return v
	}
	if status == http.StatusUnauthorized || status == http.StatusPaymentRequired {
		return byStatus[status].with(statusEvidence(status))
	}
	proof, proven := codeVerdict(codes, true)
	if p.azureFilter && !proven { // innererror is only sent by Azure's content filter
		proof, proven = vContentFilter.with("innercode:innererror"), true
	}
	words, wordsEv := vocabMatch(fields, requestGroups(status)...)
	if words == gContext && status >= 500 && !statesNumber(fields, wordsEv) {
		words, wordsEv = 0, "" // a server's size words without the size are its own
	}
	if !proven && words != 0 {
		if m, _ := vocabMatch(fields, gMention); m == 0 {
			proof, proven = groupVerdict[words].with(wordsEv), true
		}
	}
	account := accountGroups
	switch {
	case !proven && (status >= 500 || status == http.StatusRequestTimeout):
		account = serverAccountGroups
	case p.paced():
		account = pacedAccountGroups
	}
	if g, ev := vocabMatch(fields, account...); g != 0 {
		return groupVerdict[g].with(ev)
	}
	if proven {
		return proof
	}
	v := statusVerdict(status, p)
	if t, ok := byType[p.typ]; ok && v.Suspect && words == 0 && t.Class == ClassTransient {
		// A bare rejection whose type says the server failed is the
		// server's: Ollama's 400 "unexpected server status" of type
		// api_error. It is retried, never Failed on its second sight.
		return t.with("type:" + p.typ)
	}
	if v.Suspect && v.Reason == ReasonInvalidRequest && words == 0 {
		// A rejection that says which part of the request it rejects
		// (rejection.go), where no account word was read.
		if m, _ := vocabMatch(fields, gMention); m == 0 {
			switch r, ev := readRejection(p); r {
			case rejectionNamed:
				return vBadParameter.with(ev)
			case rejectionModel:
				return vModelNotFound.with(ev)
			}
		}
	}
	if v.Suspect && words != 0 {
		// Words the account's mention kept from proving still say which
		// rejection it is.
		v = groupVerdict[words].with(wordsEv)
		v.Suspect = true
	}
	return v
}

// requestGroups are the groups of words that name the request read under
// status. A content or guardrail verdict is proof under any status. A
// moderation verdict comes as a 403, a guardrail's as a 500. Under 403
// and 404 other words more likely describe the deployment ("endpoint not
// supported"). They would fail every job at once. Under a server's own
// 5xx, words about parameters may be its own trouble ("operation not
// supported"). But a size over a limit stated in numbers, and the order
// of the messages, are this request's. Servers answer their validation
// errors so, and the same request gets the same answer:
//   - vLLM through Xinference: "The decoder prompt (length 66501) is
//     longer than the maximum model length of 65536";
//   - Ollama: "system message must be at the beginning".
func requestGroups(status int) []group {
	switch {
	case status == http.StatusForbidden || status == http.StatusNotFound:
		return contentGroups
	case status == http.StatusTooManyRequests:
		// Token counts and limits under a 429 are a rate's ("Too many
		// tokens, please wait", "input tokens per minute"). They are not
		// the request's size or parameters.
		return rateRequestGroups
	case status >= 500:
		return serverRequestGroups
	}
	return allRequestGroups
}

var (
	allRequestGroups    = []group{gContent, gContext, gParam, gOrder}
	serverRequestGroups = []group{gContent, gContext, gOrder}
	rateRequestGroups   = []group{gContent, gOrder}
	contentGroups       = []group{gContent}
)

// statesNumber reports whether the field the Evidence ev names states a
// number, such as a limit or a size. The field of "message:context_length"
// is "message". A number is a word of digits.
func statesNumber(fields []field, ev string) bool {
	name, _, _ := strings.Cut(ev, ":")
	for _, f := range fields {
		if f.name != name {
			continue
		}
		for _, w := range words(f.text) {
			if strings.IndexFunc(w, func(r rune) bool { return r < '0' || r > '9' }) < 0 {
				return true
			}
		}
	}
	return false
}

// accountGroups are the vocabulary groups that say a failure is not the
// request's, in precedence order. serverAccountGroups are those read
// under a server's own status. The money, the account and the key fail
// every call whatever the server says. Rate and overload words add
// nothing to a 5xx. A rate limit only named ("RateLimitError", gRPC's
// "resource exhausted") yields to money words beside it. LiteLLM sends
// "You exceeded your current quota, please check your plan and billing
// details" so. That holds unless the response paces the retry
// (pacedAccountGroups). A stated wait or google.rpc.RetryInfo says the
// limit refills. Gemini's per-minute quota 429s say so with the same
// billing words.
var (
	accountGroups       = []group{gRate, gOverload, gMoney, gRateName, gQuota, gAccount, gNoModel, gModel, gLoad, gAccess, gKey}
	pacedAccountGroups  = []group{gRate, gRateName, gOverload, gMoney, gQuota, gAccount, gNoModel, gModel, gLoad, gAccess, gKey}
	serverAccountGroups = []group{gMoney, gQuota, gAccount, gKey, gLoad}
)

// paced reports whether the response says when to try again. A
// google.rpc.RetryInfo says it, and so does a wait its message states
// ("Please retry in 53.0s").
func (p problem) paced() bool {
	if p.hasDelay {
		return true
	}
	_, ok := retryIn(p.message)
	return ok
}

// statusVerdict decides from the status, then from a generic type.
func statusVerdict(status int, p problem) Verdict {
	if v, ok := byStatus[status]; ok {
		return v.with(statusEvidence(status))
	}
	if status >= 500 && status <= 599 {
		return vUpstream5xx.with(statusEvidence(status))
	}
	if v, ok := byType[p.typ]; ok {
		return v.with("type:" + p.typ)
	}
	if status != 0 {
		return vUpstreamStatus.with(statusEvidence(status))
	}
	return vUnknown.with(evidenceUnknown)
}

// codeFields names the fields of problem.codes for Evidence.
var codeFields = [...]string{"code", "innercode", "errorinfo", "rpcstatus", "type"}

// codeVerdict looks the codes up in byCode. With permanent false it finds
// the verdicts that are not permanent. With permanent true it finds those
// that are.
func codeVerdict(codes [5]string, permanent bool) (Verdict, bool) {
	for i, k := range codes {
		if v, ok := byCode[k]; ok && (v.Class == ClassPermanent) == permanent {
			return v.with(codeFields[i] + ":" + k), true
		}
		if !permanent && strings.HasSuffix(k, "_spend_limit_exceeded") { // monthly_, daily_, hard_...
			return vQuota.with(codeFields[i] + ":_spend_limit_exceeded"), true
		}
	}
	return Verdict{}, false
}

// withoutType is fields without the error type's.
func withoutType(fields []field) []field {
	out := make([]field, 0, len(fields))
	for _, f := range fields {
		if f.name != "type" {
			out = append(out, f)
		}
	}
	return out
}

// statusEvidence is "status:429".
func statusEvidence(status int) string {
	return "status:" + strconv.Itoa(status)
}

// fields lists what the vocabulary reads, most specific first.
func (p problem) fields() []field {
	fs := make([]field, 0, 6)
	for i, k := range p.codes() {
		if k != "" {
			fs = append(fs, field{codeFields[i], k})
		}
	}
	if p.message != "" {
		fs = append(fs, field{"message", p.message})
	}
	if p.quotaID != "" {
		fs = append(fs, field{"quotaid", p.quotaID})
	}
	return fs
}

// codes lists the body's codes, most specific first.
func (p problem) codes() [5]string {
	return [...]string{p.code, p.inner, p.reason, p.gstatus, p.typ}
}

// codeString renders go-openai's APIError.Code, which is any. It may be a
// string, nil, or a number: int after go-openai's decoding, float64 from
// plain encoding/json.
func codeString(c any) string {
	switch c := c.(type) {
	case string:
		return c
	case int:
		return strconv.Itoa(c)
	case int64:
		return strconv.FormatInt(c, 10)
	case float64:
		if math.IsNaN(c) || math.IsInf(c, 0) {
			return ""
		}
		return strconv.FormatFloat(c, 'f', -1, 64)
	}
	return ""
}

// codeStatus returns a numeric code that looks like an HTTP status. Some
// OpenAI-compatible servers send one ({"error":{"code":429,...}}). It is
// for errors whose status is otherwise unknown (mid-stream).
func codeStatus(c any) int {
	var f float64
	switch c := c.(type) {
	case int:
		f = float64(c)
	case int64:
		f = float64(c)
	case float64:
		f = c
	}
	if f != math.Trunc(f) || f < 100 || f > 599 { // NaN fails the first test
		return 0
	}
	return int(f)
}
