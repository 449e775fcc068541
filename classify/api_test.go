package classify_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
)

// Bodies in the providers' shapes for the rules at the edges that the corpus
// of real responses (testdata/corpus, TestCorpus) has no response for:
// header precedence and garbage, numeric and rare codes, pages that are not
// JSON, x-should-retry on each class.
const (
	openAIRateLimitTokens = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 30000, Used 28039, Requested 3906. Please try again in 3.89s. Visit https://platform.openai.com/account/rate-limits to learn more.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`
	openAIRateLimitReqs   = `{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again in 20s.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	openAISlowDown        = `{"error":{"message":"Please reduce the rate at which you send requests.","type":"invalid_request_error","param":null,"code":"slow_down"}}`
	openAIQuota           = `{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`
	openAIServerError     = `{"error":{"message":"The server had an error while processing your request. Sorry about that!","type":"server_error","param":null,"code":null}}`
	openAIOverloaded      = `{"error":{"message":"The engine is currently overloaded, please try again later","type":"server_error","param":null,"code":null}}`
	openAIInvalidValue    = `{"error":{"message":"Invalid value for 'temperature': must be between 0 and 2.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`
	openAIInvalidRequest  = `{"error":{"message":"The request was rejected.","type":"invalid_request_error","param":null,"code":"rejected"}}`
	openAIContentPolicy   = `{"error":{"code":"content_policy_violation","message":"Your request was rejected as a result of our safety system.","param":null,"type":"invalid_request_error"}}`
	openAIInvalidKey      = `{"error":{"message":"Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`
	openAIModelNotFound   = `{"error":{"message":"The model ` + "`gpt-9`" + ` does not exist or you do not have access to it.","type":"invalid_request_error","param":null,"code":"model_not_found"}}`
	openAINotImplemented  = `{"error":{"message":"This endpoint is not implemented.","type":"invalid_request_error","param":null,"code":null}}`
	openAITimeout         = `{"error":{"message":"Request timed out.","type":"timeout","param":null,"code":null}}`
	openAIConflict        = `{"error":{"message":"Another request is modifying this resource.","type":"invalid_request_error","param":null,"code":"conflict"}}`
	openAINumericCode     = `{"error":{"message":"Resource has been exhausted (e.g. check quota).","type":"","code":429}}`

	htmlBadGateway = `<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>cloudflare</center></body></html>`
	htmlTooLarge   = `<html><head><title>413 Request Entity Too Large</title></head><body><center><h1>413 Request Entity Too Large</h1></center><hr><center>nginx</center></body></html>`
	fastAPI422     = `{"detail":[{"type":"missing","loc":["body","model"],"msg":"Field required","input":{}}]}`
	// Gemini's OpenAI-compatible endpoint answers with a list, which
	// go-openai cannot read: a RequestError with the body
	// (continuedev/continue#8516, in testdata/corpus/gemini.json).
	geminiKeyList = `[{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}},{"@type":"type.googleapis.com/google.rpc.LocalizedMessage","locale":"en-US","message":"API key not valid. Please pass a valid API key."}]}}]`
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

// apiCases are the edge rules of the table in doc.go.
var apiCases = []struct {
	name  string
	reply reply
	exp   classify.Verdict
}{
	// 429 rate limits: transient, provider-wide, with the hint headers.
	{"429 rate_limit_exceeded retry-after-ms", reply{429, h("retry-after-ms", "2500", "Retry-After", "3"), openAIRateLimitTokens},
		transient(classify.ReasonRateLimited, true, 2500*time.Millisecond)},
	{"429 rate_limit_exceeded Retry-After HTTP-date", reply{429, h("Date", fixedDate, "Retry-After", "Mon, 02 Jan 2006 15:04:35 GMT"), openAIRateLimitTokens},
		transient(classify.ReasonRateLimited, true, 30*time.Second)},
	{"429 tokens limit x-ratelimit-reset-tokens", reply{429, h("x-ratelimit-reset-requests", "1s", "x-ratelimit-reset-tokens", "6m0s"), openAIRateLimitTokens},
		transient(classify.ReasonRateLimited, true, 6*time.Minute)},
	{"429 tokens limit: the tokens reset even when the requests reset is later", reply{429, h("x-ratelimit-reset-requests", "6m0s", "x-ratelimit-reset-tokens", "1s"), openAIRateLimitTokens},
		transient(classify.ReasonRateLimited, true, time.Second)},
	{"429 requests limit x-ratelimit-reset-requests", reply{429, h("x-ratelimit-reset-requests", "20ms", "x-ratelimit-reset-tokens", "6m0s"), openAIRateLimitReqs},
		transient(classify.ReasonRateLimited, true, 20*time.Millisecond)},
	// Garbage headers give no hint: the message's "Please try again in 3.89s" does.
	{"429 garbage hints", reply{429, h("retry-after-ms", "NaN", "Retry-After", "-5", "x-ratelimit-reset-requests", "soon"), openAIRateLimitTokens},
		transient(classify.ReasonRateLimited, true, 3890*time.Millisecond)},
	{"429 slow_down", reply{429, nil, openAISlowDown},
		transient(classify.ReasonRateLimited, true, 0)},
	{"429 numeric code", reply{429, nil, openAINumericCode},
		transient(classify.ReasonRateLimited, true, 0)},

	// Quota: systemic, provider-wide, no hint even when headers offer one.
	{"429 credit_balance_exhausted", reply{429, nil, quotaBody("credit_balance_exhausted")},
		systemic(classify.ReasonQuotaExhausted, true)},
	{"429 monthly_spend_limit_exceeded", reply{429, nil, quotaBody("monthly_spend_limit_exceeded")},
		systemic(classify.ReasonQuotaExhausted, true)},
	{"429 organization_usage_limit_exceeded", reply{429, nil, quotaBody("organization_usage_limit_exceeded")},
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

	// Permanent.
	{"501", reply{501, nil, openAINotImplemented}, suspect(classify.ReasonNotImplemented)},
	{"400 invalid_request_error", reply{400, nil, openAIInvalidRequest}, suspect(classify.ReasonInvalidRequest)},
	{"400 a value out of its range", reply{400, nil, openAIInvalidValue}, permanent(classify.ReasonInvalidRequest)},
	{"413 HTML page (RequestError)", reply{413, h("Content-Type", "text/html"), htmlTooLarge}, permanent(classify.ReasonTooLarge)},
	{"422 non-OpenAI JSON (RequestError)", reply{422, nil, fastAPI422}, permanent(classify.ReasonInvalidRequest)},
	{"400 content_policy_violation", reply{400, nil, openAIContentPolicy}, permanent(classify.ReasonContentFiltered)},
	// A proof code fails the job whatever the status, unless the account
	// vocabulary says the account is at fault: the server's own statuses
	// skip the vocabulary only when the verdict is transient anyway.
	{"500 content_policy_violation", reply{500, nil, openAIContentPolicy}, permanent(classify.ReasonContentFiltered)},
	{"500 content_policy_violation about the API key", reply{500, nil, `{"error":{"code":"content_policy_violation","message":"Your API key was blocked for repeated policy violations."}}`},
		systemic(classify.ReasonAuth, true)},
	{"503 Azure innererror about the subscription's billing", reply{503, nil, `{"error":{"code":"E_UNKNOWN","message":"Billing is disabled for this subscription.","innererror":{"code":"E_OTHER"}}}`},
		systemic(classify.ReasonQuotaExhausted, true)},

	// x-should-retry decides retry or not; the body still tells permanent
	// from systemic.
	{"x-should-retry false on 500", reply{500, h("x-should-retry", "false", "Retry-After", "3"), openAIServerError},
		suspect(classify.ReasonShouldNotRetry)},
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

	exp := transient(classify.ReasonRateLimited, true, 3890*time.Millisecond) // the message's "try again in 3.89s"
	assertVerdict(t, exp, classify.Default(err), err)

	err = classify.WithHeader(err, resp.Header())
	exp = transient(classify.ReasonRateLimited, true, 2500*time.Millisecond)
	assertVerdict(t, exp, classify.Default(err), err)
	var he *classify.HTTPError
	if !errors.As(err, &he) || he.StatusCode != 429 || he.Code != "rate_limit_exceeded" || he.Err == nil {
		t.Errorf("WithHeader result: want *HTTPError with status 429 and code wrapping the error, got %#v", he)
	}

	if classify.WithHeader(nil, resp.Header()) != nil {
		t.Error("WithHeader(nil, h) != nil")
	}
	plain := errors.New("x")
	if got := classify.WithHeader(plain, http.Header{"X-Other": {"1"}}); got != plain {
		t.Errorf("WithHeader without hint headers: exp the error itself, got %v", got)
	}
}
