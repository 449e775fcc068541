package classify_test

import (
	"net/http"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
)

// TestDefaultBodyShapes covers the body reader at its edges: shapes and
// malformed bodies the corpus of real responses does not hold.
func TestDefaultBodyShapes(t *testing.T) {
	rpc := func(details string) string {
		return `{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","message":"quota","details":[` + details + `]}}`
	}
	tests := []struct {
		name   string
		status int
		body   string
		exp    classify.Verdict
	}{
		// OpenRouter keeps the provider's body in error.metadata.raw
		// (openrouter.ai/docs/api-reference/errors, "Provider Errors").
		{"OpenRouter raw: the provider's code decides", 400, `{"error":{"message":"Provider returned error","code":400,"metadata":{"raw":"{\"error\":{\"message\":\"bad\",\"type\":\"invalid_request_error\",\"code\":\"context_length_exceeded\"}}","provider_name":"OpenAI"}}}`,
			permanent(classify.ReasonContextLength)},
		{"OpenRouter raw, mid-stream: the outer code is the status", 0, `{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"{\"error\":{\"message\":\"Slow down\"}}","provider_name":"X"}}}`,
			transient(classify.ReasonRateLimited, true, 0)},
		{"OpenRouter raw that says nothing", 400, `{"error":{"message":"Provider returned error","code":400,"metadata":{"raw":"<html>oops</html>","provider_name":"X"}}}`,
			suspect(classify.ReasonInvalidRequest)},
		// Google's own body (continuedev/continue#10530, in
		// testdata/corpus/gemini.json) in raw: a message, a numeric code
		// and no type; it decides as when Google answers directly.
		{"OpenRouter raw holding Google's body", 400, `{"error":{"message":"Provider returned error","code":400,"metadata":{"raw":"{\"error\":{\"code\":400,\"message\":\"API key not valid. Please pass a valid API key.\",\"status\":\"INVALID_ARGUMENT\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\",\"reason\":\"API_KEY_INVALID\",\"domain\":\"googleapis.com\"}]}}","provider_name":"Google AI Studio"}}}`,
			systemic(classify.ReasonAuth, true)},
		// A raw body with a type alone, a code alone or a message alone
		// still decides over the outer code (mid-stream, the outer code is
		// the status).
		{"OpenRouter raw with a type alone", 0, `{"error":{"message":"Provider returned error","code":500,"metadata":{"raw":"{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\"}}","provider_name":"Anthropic"}}}`,
			transient(classify.ReasonRateLimited, true, 0)},
		{"OpenRouter raw with a code alone", 0, `{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"{\"error\":{\"code\":\"insufficient_quota\"}}","provider_name":"OpenAI"}}}`,
			systemic(classify.ReasonQuotaExhausted, true)},
		{"OpenRouter raw with a message alone", 429, `{"error":{"message":"Provider returned error","code":429,"metadata":{"raw":"{\"error\":{\"message\":\"Note: Your credit balance is too low to access the API\"}}","provider_name":"X"}}}`,
			classify.Verdict{Class: classify.ClassSystemic, Reason: classify.ReasonQuotaExhausted, ProviderWide: true, Evidence: "message:credit"}},
		// FastAPI's validation list, as the message (Mistral) or at the top.
		{"FastAPI detail as the message", 422, `{"object":"error","message":{"detail":[{"type":"extra_forbidden","loc":["body","max_completion_tokens"],"msg":"Extra inputs are not permitted","input":1}]},"type":"invalid_request_error","code":null}`,
			permanent(classify.ReasonInvalidRequest)},
		{"FastAPI detail at the top", 422, `{"detail":[{"type":"extra_forbidden","loc":["body","foo"],"msg":"Extra inputs are not permitted"}]}`,
			permanent(classify.ReasonInvalidRequest)},
		{"FastAPI detail naming nothing", 422, `{"detail":[{"type":"value_error","loc":["body"],"msg":"Value error"}]}`,
			suspect(classify.ReasonInvalidRequest)},
		{"RetryInfo fractional seconds", 429, rpc(`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}`),
			transient(classify.ReasonRateLimited, true, 1500*time.Millisecond)},
		{"RetryInfo without unit is no hint", 429, rpc(`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"26"}`),
			transient(classify.ReasonRateLimited, true, 0)},
		{"RetryInfo negative is no hint", 429, rpc(`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"-1s"}`),
			transient(classify.ReasonRateLimited, true, 0)},
		{"RetryInfo huge is capped", 429, rpc(`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"999999999s"}`),
			transient(classify.ReasonRateLimited, true, classify.MaxHint)},
		{"first RetryInfo wins", 429, rpc(`{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2s"},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"9s"}`),
			transient(classify.ReasonRateLimited, true, 2*time.Second)},
		{"RetryInfo hints an overload too", 503, `{"error":{"code":503,"status":"UNAVAILABLE","message":"x","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"}]}}`,
			transient(classify.ReasonOverloaded, true, 3*time.Second)},
		{"RetryInfo is no hint for a permanent verdict", 400, `{"error":{"code":400,"status":"INVALID_ARGUMENT","message":"x","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"}]}}`,
			suspect(classify.ReasonInvalidRequest)},
		{"first ErrorInfo reason wins", 400, `{"error":{"code":400,"message":"x","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"BILLING_DISABLED"},{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}`,
			systemic(classify.ReasonQuotaExhausted, true)},
		{"ErrorInfo RATE_LIMIT_EXCEEDED on a 403", 403, `{"error":{"code":403,"message":"x","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"RATE_LIMIT_EXCEEDED"}]}}`,
			transient(classify.ReasonRateLimited, true, 0)},
		{"a detail of unexpected types does not hide the others", 429, rpc(`{"@type":7,"reason":["x"]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"4s"}`),
			transient(classify.ReasonRateLimited, true, 4*time.Second)},
		{"unknown detail types are ignored (RESOURCE_EXHAUSTED is a rate limit)", 400, rpc(`{"@type":"type.googleapis.com/google.rpc.Help","reason":"API_KEY_INVALID","retryDelay":"5s"}`),
			transient(classify.ReasonRateLimited, true, 0)},
		{"details that are not a list or object", 429, `{"error":{"message":"x","details":"none"}}`,
			transient(classify.ReasonRateLimited, true, 0)},
		{"Anthropic details.error_code", 429, `{"type":"error","error":{"type":"rate_limit_error","message":"x","details":{"error_code":"enforced_spend_limit_reached"}}}`,
			systemic(classify.ReasonQuotaExhausted, true)},
		{"Azure innererror code wins over a generic code", 400, `{"error":{"code":"400","message":"x","innererror":{"code":"ResponsibleAIPolicyViolation"}}}`,
			permanent(classify.ReasonContentFiltered)},
		{"members of unexpected types do not hide the others", 400, `{"error":{"type":null,"status":400,"code":"content_filter","message":"x"}}`,
			permanent(classify.ReasonContentFiltered)},
		{"innererror of a wrong type", 400, `{"error":{"code":"400","message":"x","innererror":"ResponsibleAIPolicyViolation"}}`,
			suspect(classify.ReasonInvalidRequest)},
		{"empty array", 400, `[]`, suspect(classify.ReasonInvalidRequest)},
		{"array of garbage", 401, `[1, 2]`, systemic(classify.ReasonAuth, true)},
		{"broken JSON", 429, `{"error":{"code":`, transient(classify.ReasonRateLimited, true, 0)},
		{"error member of a wrong type", 400, `{"error":{"code":{}}}`, suspect(classify.ReasonInvalidRequest)},
		{"error member null, top-level code", 400, `{"error":null,"object":"error","code":"insufficient_quota","message":"x"}`,
			systemic(classify.ReasonQuotaExhausted, true)},
		{"message that is not a string", 400, `{"error":{"message":["Your credit balance is too low"]}}`,
			suspect(classify.ReasonInvalidRequest)},
		{"credit words anywhere in a message: the vocabulary", 400, `{"error":{"message":"Note: Your credit balance is too low to access the API"}}`,
			classify.Verdict{Class: classify.ClassSystemic, Reason: classify.ReasonQuotaExhausted, ProviderWide: true, Evidence: "message:credit"}},
		{"message table needs the fragment", 429, `{"error":{"message":"Request too large for gpt-4o in organization org-x on requests per day","code":"rate_limit_exceeded"}}`,
			transient(classify.ReasonRateLimited, true, 0)},
		{"message table ignores surrounding space", 400, `{"error":{"message":"  Your credit balance is too low.  "}}`,
			systemic(classify.ReasonQuotaExhausted, true)},
		// Writer names its message "description"; a gateway puts its
		// sentence in "param" behind a message that says nothing. A
		// message wins over a description, and a param that is one word
		// is a field's name, never read (fourteenth held-out set).
		{"Writer description", 400, `{"tpe":"fail.input.generic","errors":[{"description":"Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.","key":"fail.input.generic","extras":null}],"extras":null}`,
			permanent(classify.ReasonInvalidRequest)},
		{"message wins over a description", 400, `{"error":{"message":"Your credit balance is too low","description":"invalid value for tool_choice"}}`,
			systemic(classify.ReasonQuotaExhausted, true)},
		{"param holding a sentence", 400, `{"error":{"message":"Param Incorrect","type":"upstream_error","param":"max_tokens is too large: 1048576. This model supports at most 131072 completion tokens.","code":"400"}}`,
			permanent(classify.ReasonInvalidRequest)},
		// An ErrorInfo that names a model makes an overload that model's
		// (liuw1535/antigravity2api-nodejs#140 quotes Cloud Code's 503).
		// The same 503 naming no model pauses the upstream.
		{"ErrorInfo names the model out of capacity", 503, `{"error":{"code":503,"message":"No capacity available for model m-7b on the server","status":"UNAVAILABLE","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"MODEL_CAPACITY_EXHAUSTED","domain":"cloudcode-pa.googleapis.com","metadata":{"model":"m-7b"}}]}}`,
			transient(classify.ReasonOverloaded, false, 0)},
		{"ErrorInfo naming no model", 503, `{"error":{"code":503,"message":"No capacity available on the server","status":"UNAVAILABLE","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"MODEL_CAPACITY_EXHAUSTED","domain":"cloudcode-pa.googleapis.com","metadata":{"service":"x"}}]}}`,
			transient(classify.ReasonOverloaded, true, 0)},
		// A relay writes the provider's body into its own message; the
		// provider's body decides (lbjlaq/Antigravity-Manager#583 has the
		// shape), unless the relay's own words speak of money, the
		// account or a key.
		{"a provider's body inside a relay's message", 429, `{"error":{"message":"All upstreams failed. Last error: HTTP 503: {\"error\":{\"code\":503,\"message\":\"No capacity available for model m-7b\",\"status\":\"UNAVAILABLE\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\",\"reason\":\"MODEL_CAPACITY_EXHAUSTED\",\"metadata\":{\"model\":\"m-7b\"}}]}}"}}`,
			transient(classify.ReasonOverloaded, false, 0)},
		{"an error word beside a message holding a body", 403, `{"success":false,"error":{"message":"{\"error\": \"Forbidden\", \"message\": \"{\\\"error\\\": {\\\"code\\\": \\\"Forbidden\\\", \\\"message\\\": \\\"Your resource has been temporarily blocked\\\"}}\"}"}}`,
			systemic(classify.ReasonAccount, true)},
		{"a relay's message that is the provider's body", 400, `{"error":{"message":"{\"error\":{\"code\":503,\"message\":\"No capacity available for model m-7b\",\"status\":\"UNAVAILABLE\",\"details\":[{\"@type\":\"type.googleapis.com/google.rpc.ErrorInfo\",\"reason\":\"MODEL_CAPACITY_EXHAUSTED\",\"metadata\":{\"model\":\"m-7b\"}}]}}"}}`,
			transient(classify.ReasonOverloaded, false, 0)},
		{"mid-stream, an embedded body without a code takes the relay's", 0, `{"error":{"message":"Relay failed: {\"error\":{\"message\":\"Slow down\"}}","code":429}}`,
			transient(classify.ReasonRateLimited, true, 0)},
		{"the relay's money words beside an embedded body", 429, `{"error":{"message":"Your credit balance is too low. Last error: {\"error\":{\"message\":\"Slow down\"}}"}}`,
			systemic(classify.ReasonQuotaExhausted, true)},
		{"a quoted schema is no body", 400, `{"error":{"message":"Tool acme rejected: {\"type\":\"objekt\",\"properties\":{}}"}}`,
			permanent(classify.ReasonInvalidRequest)},
		// A permission type under 403 yields to a content verdict beside
		// it (OpenRouter's guardrail as Anthropic's permission_error).
		{"permission type beside a content verdict", 403, `{"type":"error","error":{"type":"permission_error","message":"Request blocked: jailbreak attempt detected"}}`,
			permanent(classify.ReasonContentFiltered)},
		{"permission type beside the account", 403, `{"type":"error","error":{"type":"permission_error","message":"Your workspace may not send flagged prompts"}}`,
			systemic(classify.ReasonAuth, false)},
		// OpenSearch and Elasticsearch name their message "reason"
		// (opensearch-project/documentation-website#9054, the Bedrock
		// guardrails tutorial's 400); a message wins over it.
		{"OpenSearch reason", 400, `{"error":{"root_cause":[{"type":"illegal_argument_exception","reason":"guardrails triggered for user input"}],"type":"illegal_argument_exception","reason":"guardrails triggered for user input"},"status":400}`,
			permanent(classify.ReasonContentFiltered)},
		{"message wins over a reason", 400, `{"error":{"message":"Your credit balance is too low","reason":"guardrails triggered for user input"}}`,
			systemic(classify.ReasonQuotaExhausted, true)},
		{"param naming a field is not read", 400, `{"error":{"message":"Bad request","param":"billing"}}`,
			suspect(classify.ReasonInvalidRequest)},
		// A gateway's own message with the provider's body as a string
		// in "cause": the provider's body decides, as OpenRouter's raw
		// does; a cause that is not a body is not read (sixteenth set).
		{"cause holding the provider's body", 400, `{"error":{"cause":"\n{\"error\":{\"message\":\"Unsupported value: 'temperature' does not support 0.1 with this model.\",\"type\":\"invalid_request_error\",\"param\":\"temperature\",\"code\":\"unsupported_value\"}}","code":400,"message":"模型服务调用失败","status":"FAILED_RESPONSE"}}`,
			permanent(classify.ReasonInvalidRequest)},
		{"cause that is not a body", 400, `{"error":{"cause":"upstream said: Your credit balance is too low","message":"call failed"}}`,
			suspect(classify.ReasonInvalidRequest)},
		{"numeric code outside the status range", 0, `{"error":{"message":"x","code":700}}`, transient(classify.ReasonUnknown, false, 0)},
		{"fractional numeric code", 0, `{"error":{"message":"x","code":429.5}}`, transient(classify.ReasonUnknown, false, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := &classify.HTTPError{StatusCode: tc.status, Body: []byte(tc.body)}
			assertVerdict(t, tc.exp, classify.Default(err), err)
		})
	}
}

// TestDefaultBodyOrder: a body-less outer *HTTPError (WithHeader) defers to
// the go-openai error it wraps; an outer body wins over an inner error.
func TestDefaultBodyOrder(t *testing.T) {
	credit := &openai.APIError{HTTPStatusCode: 400, Type: "invalid_request_error",
		Message: "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}
	tests := []struct {
		name string
		err  error
		exp  classify.Verdict
	}{
		{"go-openai error alone", credit, systemic(classify.ReasonQuotaExhausted, true)},
		{"under a body-less HTTPError", &classify.HTTPError{StatusCode: 400, Err: credit}, systemic(classify.ReasonQuotaExhausted, true)},
		{"under an HTTPError with a body", &classify.HTTPError{StatusCode: 400, Body: []byte(`{"error":{"type":"invalid_request_error","message":"bad"}}`), Err: credit},
			suspect(classify.ReasonInvalidRequest)},
		{"mid-stream APIError, numeric code", &openai.APIError{Code: 429, Message: "Request too large for model x on tokens per minute (TPM)"},
			permanent(classify.ReasonTooLarge)},
		// encoding/json gives float64, go-openai int; a caller may build either.
		{"mid-stream APIError, float64 status code", &openai.APIError{Code: 429.0, Message: "x"}, transient(classify.ReasonRateLimited, true, 0)},
		{"mid-stream APIError, int64 status code", &openai.APIError{Code: int64(503), Message: "x"}, transient(classify.ReasonOverloaded, true, 0)},
		{"mid-stream APIError, fractional code", &openai.APIError{Code: 429.5, Message: "x"}, transient(classify.ReasonUnknown, false, 0)},
		{"mid-stream APIError, code above the status range", &openai.APIError{Code: 600.0, Message: "x"}, transient(classify.ReasonUnknown, false, 0)},
		{"mid-stream APIError, int64 code below the status range", &openai.APIError{Code: int64(99), Message: "x"}, transient(classify.ReasonUnknown, false, 0)},
		// The status range is [100, 599], for each numeric type go-openai
		// or encoding/json may produce.
		{"int code 99", &openai.APIError{Code: 99, Message: "x"}, transient(classify.ReasonUnknown, false, 0)},
		{"int code 100", &openai.APIError{Code: 100, Message: "x"}, transient(classify.ReasonUpstreamStatus, false, 0)},
		{"int code 599", &openai.APIError{Code: 599, Message: "x"}, transient(classify.ReasonUpstream5xx, false, 0)},
		{"int code 600", &openai.APIError{Code: 600, Message: "x"}, transient(classify.ReasonUnknown, false, 0)},
		{"int64 code 100", &openai.APIError{Code: int64(100), Message: "x"}, transient(classify.ReasonUpstreamStatus, false, 0)},
		{"int64 code 599", &openai.APIError{Code: int64(599), Message: "x"}, transient(classify.ReasonUpstream5xx, false, 0)},
		{"float64 code 99", &openai.APIError{Code: 99.0, Message: "x"}, transient(classify.ReasonUnknown, false, 0)},
		{"float64 code 100", &openai.APIError{Code: 100.0, Message: "x"}, transient(classify.ReasonUpstreamStatus, false, 0)},
		{"float64 code 599", &openai.APIError{Code: 599.0, Message: "x"}, transient(classify.ReasonUpstream5xx, false, 0)},
		// Azure's innererror as go-openai reads it (APIError.InnerError), as
		// "Azure innererror code wins over a generic code" in
		// TestDefaultBodyShapes reads it from the body.
		{"go-openai's InnerError wins over a generic code", &openai.APIError{HTTPStatusCode: 400, Code: "400", Message: "x",
			InnerError: &openai.InnerError{Code: "ResponsibleAIPolicyViolation"}}, permanent(classify.ReasonContentFiltered)},
		{"numeric code in a body without a status", &classify.HTTPError{Body: []byte(`{"error":{"code":503,"message":"x"}}`)},
			transient(classify.ReasonOverloaded, true, 0)},
		{"status 599 is a server error", &classify.HTTPError{StatusCode: 599}, transient(classify.ReasonUpstream5xx, false, 0)},
		{"an empty header does not hide a deeper hint", &classify.HTTPError{StatusCode: 429, Header: http.Header{},
			Err: &classify.HTTPError{StatusCode: 429, Header: http.Header{"Retry-After": {"3"}}}},
			transient(classify.ReasonRateLimited, true, 3*time.Second)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertVerdict(t, tc.exp, classify.Default(tc.err), tc.err)
		})
	}
}

func TestMarkMessage(t *testing.T) {
	if exp, got := "permanent failure", classify.Permanent(nil).Error(); exp != got {
		t.Errorf("Permanent(nil).Error(): exp %q, got %q", exp, got)
	}
}

func TestHTTPErrorMessage(t *testing.T) {
	err := &classify.HTTPError{StatusCode: 400, Type: "invalid_request_error", Code: "invalid_value",
		Body: []byte(`{"error":{"message":"secret prompt text"}}`)}
	if exp, got := "http status 400, type invalid_request_error, code invalid_value", err.Error(); exp != got {
		t.Errorf("Error(): exp %q, got %q", exp, got)
	}
}

// TestHTTPErrorFields: a client with the type and code decoded but no body
// sets the fields; a body's own codes win over them.
func TestHTTPErrorFields(t *testing.T) {
	tests := []struct {
		name string
		err  *classify.HTTPError
		exp  classify.Verdict
	}{
		{"code alone", &classify.HTTPError{StatusCode: 429, Code: "insufficient_quota"}, systemic(classify.ReasonQuotaExhausted, true)},
		{"type alone", &classify.HTTPError{StatusCode: 0, Type: "overloaded_error"}, transient(classify.ReasonOverloaded, true, 0)},
		{"the body wins", &classify.HTTPError{StatusCode: 429, Code: "insufficient_quota", Body: []byte(`{"error":{"code":"rate_limit_exceeded","message":"x"}}`)},
			transient(classify.ReasonRateLimited, true, 0)},
		{"a body without codes keeps the fields", &classify.HTTPError{StatusCode: 429, Code: "insufficient_quota", Body: []byte(`<html>429</html>`)},
			systemic(classify.ReasonQuotaExhausted, true)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertVerdict(t, tc.exp, classify.Default(tc.err), tc.err)
		})
	}
}
