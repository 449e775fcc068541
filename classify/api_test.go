package classify_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
)

// Error bodies as OpenAI, Azure OpenAI and Anthropic send them.
const (
	openAIRateLimitTokens = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 28039, Requested 3906. Please try again in 3.89s. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	openAIRateLimitReqs   = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	openAISlowDown        = `{"error":{"message":"Please reduce the rate at which you send requests.","type":"invalid_request_error","param":null,"code":"slow_down"}}`
	openAIQuota           = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	openAIServerError     = `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`
	openAIOverloaded      = `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`
	openAIContextLength   = `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`
	openAIInvalidValue    = `{"error":{"message":"Invalid value for 'temperature': must be between 0 and 2.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`
	openAIContentPolicy   = `{"error":{"code":"content_policy_violation","message":"Your request was rejected as a result of our safety system.","param":null,"type":"invalid_request_error"}}`
	openAIInvalidKey      = `{"error":{"message":"Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	openAICountry         = `{"error":{"code":"unsupported_country_region_territory","message":"Country, region, or territory not supported","param":null,"type":"request_forbidden"}}`
	openAIModelNotFound   = `{"error":{"message":"The model ` + "`gpt-9`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`
	openAINotImplemented  = `{"error":{"message":"This endpoint is not implemented.","type":"invalid_request_error","param":null,"code":null}}`
	openAITimeout         = `{"error":{"message":"Request timed out.","type":"timeout","param":null,"code":null}}`
	openAIConflict        = `{"error":{"message":"Another request is modifying this resource.","type":"invalid_request_error","param":null,"code":"conflict"}}`
	openAINumericCode     = `{"error":{"message":"Resource has been exhausted (e.g. check quota).","type":"","code":429}}`
	azureContentFilter    = `{"error":{"message":"The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry.","type":null,"param":"prompt","code":"content_filter","status":400,"innererror":{"code":"ResponsibleAIPolicyViolation","content_filter_result":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"},"sexual":{"filtered":false,"severity":"safe"},"violence":{"filtered":true,"severity":"medium"}}}}}`
	azureDeployment       = `{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}`

	anthropicRateLimit  = `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit (https://docs.anthropic.com/en/api/rate-limits); see the response headers for current usage."}}`
	anthropicCompatRate = `{"error":{"code":"rate_limit_error","message":"This request would exceed the rate limit for your organization of 20,000 input tokens per minute.","type":"invalid_request_error","param":null}}`
	anthropicOverloaded = `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
	anthropicAPIError   = `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`
	anthropicTimeout    = `{"type":"error","error":{"type":"timeout_error","message":"Request timed out"}}`
	anthropicInvalid    = `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate between \"user\" and \"assistant\""}}`
	anthropicTooLarge   = `{"type":"error","error":{"type":"request_too_large","message":"Request exceeds the maximum allowed number of bytes."}}`
	anthropicAuth       = `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`
	anthropicPermission = `{"type":"error","error":{"type":"permission_error","message":"Your API key does not have permission to use the specified resource."}}`
	anthropicNotFound   = `{"type":"error","error":{"type":"not_found_error","message":"model: claude-9"}}`
	anthropicBilling    = `{"type":"error","error":{"type":"billing_error","message":"Your credit balance is too low to access the Anthropic API."}}`
	anthropicSpendLimit = `{"type":"error","error":{"type":"enforced_spend_limit_reached","message":"You have reached your specified API usage limits."}}`

	htmlBadGateway = `<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>cloudflare</center></body></html>`
	htmlTooLarge   = `<html><head><title>413 Request Entity Too Large</title></head><body><center><h1>413 Request Entity Too Large</h1></center><hr><center>nginx</center></body></html>`
	fastAPI422     = `{"detail":[{"type":"missing","loc":["body","model"],"msg":"Field required","input":{}}]}`
)

func quotaBody(code string) string {
	return `{"error":{"message":"quota","type":"insufficient_quota","param":null,"code":"` + code + `"}}`
}

func h(kv ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

const fixedDate = "Mon, 02 Jan 2006 15:04:05 GMT"

// apiCases are the provider-response rows of the table in doc.go.
var apiCases = []struct {
	name  string
	reply reply
	exp   classify.Verdict
}{
	// 429 rate limits: transient, provider-wide, with the hint headers.
	{"429 rate_limit_exceeded retry-after-ms", reply{429, h("retry-after-ms", "2500", "Retry-After", "3"), openAIRateLimitTokens},
		transient(classify.ReasonRateLimited, true, 2500*time.Millisecond)},
	{"429 rate_limit_exceeded Retry-After seconds", reply{429, h("Retry-After", "3"), openAIRateLimitTokens},
		transient(classify.ReasonRateLimited, true, 3*time.Second)},
	{"429 rate_limit_exceeded Retry-After float", reply{429, h("Retry-After", "1.5"), openAIRateLimitTokens},
		transient(classify.ReasonRateLimited, true, 1500*time.Millisecond)},
	{"429 rate_limit_exceeded Retry-After HTTP-date", reply{429, h("Date", fixedDate, "Retry-After", "Mon, 02 Jan 2006 15:04:35 GMT"), openAIRateLimitTokens},
		transient(classify.ReasonRateLimited, true, 30*time.Second)},
	{"429 tokens limit x-ratelimit-reset-tokens", reply{429, h("x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"), openAIRateLimitTokens},
		transient(classify.ReasonRateLimited, true, 6*time.Minute)},
	{"429 requests limit x-ratelimit-reset-requests", reply{429, h("x-ratelimit-reset-requests", "20ms", "x-ratelimit-reset-tokens", "6m0s"), openAIRateLimitReqs},
		transient(classify.ReasonRateLimited, true, 20*time.Millisecond)},
	{"429 garbage hints", reply{429, h("retry-after-ms", "NaN", "Retry-After", "-5", "x-ratelimit-reset-requests", "soon"), openAIRateLimitTokens},
		transient(classify.ReasonRateLimited, true, 0)},
	{"429 absurd hint capped", reply{429, h("Retry-After", "99999999999999999999"), openAIRateLimitTokens},
		transient(classify.ReasonRateLimited, true, classify.MaxHint)},
	{"429 slow_down", reply{429, nil, openAISlowDown},
		transient(classify.ReasonRateLimited, true, 0)},
	{"429 numeric code", reply{429, nil, openAINumericCode},
		transient(classify.ReasonRateLimited, true, 0)},
	{"anthropic 429 rate_limit_error", reply{429, h("retry-after", "12"), anthropicRateLimit},
		transient(classify.ReasonRateLimited, true, 12*time.Second)},
	{"anthropic openai-compat 429 rate_limit_error", reply{429, nil, anthropicCompatRate},
		transient(classify.ReasonRateLimited, true, 0)},

	// Quota: systemic, provider-wide, no hint even when headers offer one.
	{"429 insufficient_quota", reply{429, h("retry-after-ms", "2500", "x-ratelimit-reset-tokens", "1s"), openAIQuota},
		systemic(classify.ReasonQuotaExhausted, true)},
	{"429 credit_balance_exhausted", reply{429, nil, quotaBody("credit_balance_exhausted")},
		systemic(classify.ReasonQuotaExhausted, true)},
	{"429 monthly_spend_limit_exceeded", reply{429, nil, quotaBody("monthly_spend_limit_exceeded")},
		systemic(classify.ReasonQuotaExhausted, true)},
	{"429 organization_usage_limit_exceeded", reply{429, nil, quotaBody("organization_usage_limit_exceeded")},
		systemic(classify.ReasonQuotaExhausted, true)},
	{"anthropic enforced_spend_limit_reached", reply{429, nil, anthropicSpendLimit},
		systemic(classify.ReasonQuotaExhausted, true)},
	{"anthropic 402 billing_error", reply{402, nil, anthropicBilling},
		systemic(classify.ReasonQuotaExhausted, true)},

	// Transient statuses.
	{"408", reply{408, h("Retry-After", "2"), openAITimeout},
		transient(classify.ReasonTimeout, false, 2*time.Second)},
	{"409", reply{409, nil, openAIConflict},
		transient(classify.ReasonUpstreamStatus, false, 0)},
	{"500 server_error", reply{500, h("retry-after-ms", "100", "x-ratelimit-reset-tokens", "6m0s"), openAIServerError},
		transient(classify.ReasonUpstream5xx, false, 100*time.Millisecond)},
	{"500 reset headers are not a hint", reply{500, h("x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"), openAIServerError},
		transient(classify.ReasonUpstream5xx, false, 0)},
	{"502 HTML page (RequestError)", reply{502, h("Content-Type", "text/html"), htmlBadGateway},
		transient(classify.ReasonUpstream5xx, false, 0)},
	{"503", reply{503, h("Retry-After", "7"), openAIOverloaded},
		transient(classify.ReasonOverloaded, true, 7*time.Second)},
	{"504 empty body (RequestError)", reply{504, nil, ""},
		transient(classify.ReasonUpstream5xx, false, 0)},
	{"anthropic 529 overloaded_error", reply{529, h("retry-after", "4"), anthropicOverloaded},
		transient(classify.ReasonOverloaded, true, 4*time.Second)},
	{"anthropic 500 api_error", reply{500, nil, anthropicAPIError},
		transient(classify.ReasonUpstream5xx, false, 0)},
	{"anthropic 504 timeout_error", reply{504, nil, anthropicTimeout},
		transient(classify.ReasonUpstream5xx, false, 0)},

	// Permanent.
	{"501", reply{501, nil, openAINotImplemented}, permanent(classify.ReasonNotImplemented)},
	{"400 invalid_request_error", reply{400, nil, openAIInvalidValue}, permanent(classify.ReasonInvalidRequest)},
	{"400 context_length_exceeded", reply{400, nil, openAIContextLength}, permanent(classify.ReasonContextLength)},
	{"anthropic 400 invalid_request_error", reply{400, nil, anthropicInvalid}, permanent(classify.ReasonInvalidRequest)},
	{"anthropic 413 request_too_large", reply{413, nil, anthropicTooLarge}, permanent(classify.ReasonTooLarge)},
	{"413 HTML page (RequestError)", reply{413, h("Content-Type", "text/html"), htmlTooLarge}, permanent(classify.ReasonTooLarge)},
	{"422 non-OpenAI JSON (RequestError)", reply{422, nil, fastAPI422}, permanent(classify.ReasonInvalidRequest)},
	{"400 content_policy_violation", reply{400, nil, openAIContentPolicy}, permanent(classify.ReasonContentFiltered)},
	{"azure 400 content_filter innererror", reply{400, nil, azureContentFilter}, permanent(classify.ReasonContentFiltered)},

	// Systemic: not the job's fault.
	{"401 invalid_api_key", reply{401, nil, openAIInvalidKey}, systemic(classify.ReasonAuth, true)},
	{"anthropic 401 authentication_error", reply{401, nil, anthropicAuth}, systemic(classify.ReasonAuth, true)},
	{"403 unsupported_country_region_territory", reply{403, nil, openAICountry}, systemic(classify.ReasonAuth, false)},
	{"anthropic 403 permission_error", reply{403, nil, anthropicPermission}, systemic(classify.ReasonAuth, false)},
	{"404 model_not_found", reply{404, nil, openAIModelNotFound}, systemic(classify.ReasonModelNotFound, false)},
	{"anthropic 404 not_found_error", reply{404, nil, anthropicNotFound}, systemic(classify.ReasonModelNotFound, false)},
	{"azure 404 DeploymentNotFound", reply{404, nil, azureDeployment}, systemic(classify.ReasonModelNotFound, false)},

	// x-should-retry decides retry or not; the body still tells permanent
	// from systemic.
	{"x-should-retry false on 500", reply{500, h("x-should-retry", "false", "Retry-After", "3"), openAIServerError},
		permanent(classify.ReasonShouldNotRetry)},
	{"x-should-retry true on 400", reply{400, h("x-should-retry", "true", "retry-after-ms", "250"), openAIInvalidValue},
		transient(classify.ReasonShouldRetry, false, 250*time.Millisecond)},
	{"x-should-retry true on 429 keeps the rate limit", reply{429, h("x-should-retry", "true", "retry-after-ms", "2500"), openAIRateLimitTokens},
		transient(classify.ReasonRateLimited, true, 2500*time.Millisecond)},
	{"x-should-retry false on 429 insufficient_quota stays systemic", reply{429, h("x-should-retry", "false"), openAIQuota},
		systemic(classify.ReasonQuotaExhausted, true)},
	{"x-should-retry false on 401 stays systemic", reply{401, h("x-should-retry", "false"), openAIInvalidKey},
		systemic(classify.ReasonAuth, true)},
	{"x-should-retry garbage is ignored", reply{500, h("x-should-retry", "maybe"), openAIServerError},
		transient(classify.ReasonUpstream5xx, false, 0)},
}

// TestDefaultAPIResponses runs every provider-response row through a real
// go-openai client wrapped in a Transport, for a plain call and at stream
// start.
func TestDefaultAPIResponses(t *testing.T) {
	for _, tc := range apiCases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) { tc.reply.write(w) })
			c := newClient(t, srv.URL+"/v1", srv.Client(), false)
			for mode, call := range map[string]func(*testing.T, *openai.Client) error{"chat": callChat, "stream": callStream} {
				t.Run(mode, func(t *testing.T) {
					err := call(t, c)
					assertVerdict(t, tc.exp, classify.Default(err), err)
				})
			}
		})
	}
}

// TestTransportKeepsGoOpenAIErrors checks that callers who inspect
// go-openai's error types see exactly what go-openai would have returned.
func TestTransportKeepsGoOpenAIErrors(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/html/chat/completions" {
			reply{502, h("Content-Type", "text/html"), htmlBadGateway}.write(w)
			return
		}
		reply{429, h("retry-after-ms", "2500"), openAIQuota}.write(w)
	})
	bare := callChat(t, newClient(t, srv.URL+"/v1", srv.Client(), true))
	wrapped := callChat(t, newClient(t, srv.URL+"/v1", srv.Client(), false))

	if exp, got := bare.Error(), wrapped.Error(); exp != got {
		t.Errorf("message changed:\nexp %q\ngot %q", exp, got)
	}
	var apiErr *openai.APIError
	if !errors.As(wrapped, &apiErr) {
		t.Fatalf("errors.As(%T, *openai.APIError) = false", wrapped)
	}
	if exp, got := "insufficient_quota", apiErr.Code; exp != got {
		t.Errorf("APIError.Code: exp %v, got %v", exp, got)
	}
	if exp, got := 429, apiErr.HTTPStatusCode; exp != got {
		t.Errorf("APIError.HTTPStatusCode: exp %d, got %d", exp, got)
	}
	var he *classify.HTTPError
	if !errors.As(wrapped, &he) {
		t.Fatalf("errors.As(%T, *classify.HTTPError) = false", wrapped)
	}
	if exp, got := "2500", he.Header.Get("retry-after-ms"); exp != got {
		t.Errorf("captured retry-after-ms: exp %q, got %q", exp, got)
	}
	if exp, got := "insufficient_quota", he.Type; exp != got {
		t.Errorf("HTTPError.Type: exp %q, got %q", exp, got)
	}

	bareHTML := callChat(t, newClient(t, srv.URL+"/v1/html", srv.Client(), true))
	wrappedHTML := callChat(t, newClient(t, srv.URL+"/v1/html", srv.Client(), false))
	if exp, got := bareHTML.Error(), wrappedHTML.Error(); exp != got {
		t.Errorf("RequestError message changed:\nexp %q\ngot %q", exp, got)
	}
	var reqErr *openai.RequestError
	if !errors.As(wrappedHTML, &reqErr) || reqErr.HTTPStatusCode != 502 {
		t.Errorf("errors.As(*openai.RequestError) on %v: want status 502, got %+v", wrappedHTML, reqErr)
	}
}

// TestWithHeader covers the non-streaming case without a Transport:
// go-openai fills the response header even when the call fails.
func TestWithHeader(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		reply{429, h("retry-after-ms", "2500"), openAIRateLimitTokens}.write(w)
	})
	c := newClient(t, srv.URL+"/v1", srv.Client(), true)
	resp, err := c.CreateChatCompletion(t.Context(), chatRequest())
	if err == nil {
		t.Fatal("call succeeded, want a 429")
	}

	exp := transient(classify.ReasonRateLimited, true, 0)
	assertVerdict(t, exp, classify.Default(err), err)

	err = classify.WithHeader(err, resp.Header())
	exp = transient(classify.ReasonRateLimited, true, 2500*time.Millisecond)
	assertVerdict(t, exp, classify.Default(err), err)
	var he *classify.HTTPError
	if !errors.As(err, &he) || he.StatusCode != 429 || he.Code != "rate_limit_exceeded" {
		t.Errorf("WithHeader result: want *HTTPError with status 429 and code, got %#v", he)
	}

	if classify.WithHeader(nil, resp.Header()) != nil {
		t.Error("WithHeader(nil, h) != nil")
	}
	plain := errors.New("x")
	if got := classify.WithHeader(plain, http.Header{"X-Other": {"1"}}); got != plain {
		t.Errorf("WithHeader without hint headers: exp the error itself, got %v", got)
	}
}
