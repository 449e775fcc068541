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
	vInvalidRequest = Verdict{Class: ClassPermanent, Reason: ReasonInvalidRequest}
	vTooLarge       = Verdict{Class: ClassPermanent, Reason: ReasonTooLarge}
	vNotImplemented = Verdict{Class: ClassPermanent, Reason: ReasonNotImplemented}
	vUpstream5xx    = Verdict{Class: ClassTransient, Reason: ReasonUpstream5xx}
	vTimeout        = Verdict{Class: ClassTransient, Reason: ReasonTimeout}
	vUpstreamStatus = Verdict{Class: ClassTransient, Reason: ReasonUpstreamStatus}
	vUnknown        = Verdict{Class: ClassTransient, Reason: ReasonUnknown}
)

// byCode holds the provider error codes and types specific enough to decide
// on their own, whatever the status: OpenAI sends an exhausted quota and a
// rate limit both as 429, and an invalid key as type "invalid_request_error",
// so the code must win over the status, and the status over a generic type.
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
}

// byStatus decides when no specific code did.
var byStatus = map[int]Verdict{
	http.StatusBadRequest:            vInvalidRequest,
	http.StatusUnauthorized:          vAuthKey,
	http.StatusPaymentRequired:       vQuota,
	http.StatusForbidden:             vPermission,
	http.StatusNotFound:              vModelNotFound,
	http.StatusRequestTimeout:        vTimeout,
	http.StatusConflict:              vUpstreamStatus,
	http.StatusRequestEntityTooLarge: vTooLarge,
	http.StatusUnprocessableEntity:   vInvalidRequest,
	http.StatusTooManyRequests:       vRateLimited,
	http.StatusNotImplemented:        vNotImplemented,
	http.StatusServiceUnavailable:    vOverloaded,
	529:                              vOverloaded, // Anthropic: overloaded
}

// byType decides last, for generic error types: mid-stream errors have no
// status, and statuses outside byStatus still carry a type.
var byType = map[string]Verdict{
	"invalid_request_error": vInvalidRequest,
	"server_error":          vUpstream5xx,
	"api_error":             vUpstream5xx,
	"timeout_error":         vTimeout,
}

// apiVerdict classifies a provider's error response from its status (0 when
// unknown, as mid-stream), error type, code and Azure inner code.
func apiVerdict(status int, typ, code, inner string, azureFilter bool) Verdict {
	for _, k := range [...]string{code, inner, typ} {
		if v, ok := byCode[k]; ok {
			return v
		}
		if strings.HasSuffix(k, "_spend_limit_exceeded") { // monthly_, daily_, hard_...
			return vQuota
		}
	}
	if azureFilter { // go-openai: InnerError is only set by Azure's content filter
		return vContentFilter
	}
	if v, ok := byStatus[status]; ok {
		return v
	}
	if status >= 500 && status <= 599 {
		return vUpstream5xx
	}
	if v, ok := byType[typ]; ok {
		return v
	}
	if status != 0 {
		return vUpstreamStatus
	}
	return vUnknown
}

// codeString renders go-openai's APIError.Code, which is any: a string, a
// number (int after go-openai's decoding, float64 from plain encoding/json)
// or nil.
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

// codeStatus returns a numeric code that looks like an HTTP status, as some
// OpenAI-compatible servers send ({"error":{"code":429,...}}), for errors
// whose status is otherwise unknown (mid-stream).
func codeStatus(c any) int {
	var n int
	switch c := c.(type) {
	case int:
		n = c
	case int64:
		if c >= 100 && c <= 599 {
			n = int(c)
		}
	case float64:
		if c == math.Trunc(c) && c >= 100 && c <= 599 {
			n = int(c)
		}
	}
	if n < 100 || n > 599 {
		return 0
	}
	return n
}
