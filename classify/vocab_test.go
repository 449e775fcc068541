package classify_test

import (
	"testing"

	"github.com/retrygate/retrygate/classify"
)

// TestVocabularyEdges: the account vocabulary at the edges of its word
// matching, through Default. Each message is of a real shape; the words
// are placed where the matcher's boundaries decide.
func TestVocabularyEdges(t *testing.T) {
	msg := func(m string) string { return `{"error":{"message":"` + m + `","type":"invalid_request_error"}}` }
	tests := []struct {
		name   string
		status int
		body   string
		exp    classify.Verdict
	}{
		// "unauthori?ed": one letter free, the length fixed.
		{"unauthorized", 400, msg("Unauthorized"), systemic(classify.ReasonAuth, true)},
		{"unauthorised", 400, msg("Unauthorised"), systemic(classify.ReasonAuth, true)},
		{"unauthorize is no match", 400, msg("Unauthorize"), suspect(classify.ReasonInvalidRequest)},
		// Codes are split like text, camel case included.
		{"camel-case code", 400, `{"error":{"message":"Request rejected.","code":"InsufficientBalance"}}`, systemic(classify.ReasonQuotaExhausted, true)},
		{"snake-case code", 400, `{"error":{"message":"Request rejected.","code":"insufficient_balance"}}`, systemic(classify.ReasonQuotaExhausted, true)},
		// "budget" is money unless it is the request's thinking budget,
		// whichever side the cancelling word is on; at the end of the
		// message it still counts. The request's budget over its
		// max_tokens names a parameter over a limit: proof.
		{"budget as the last word", 400, msg("You have exceeded your budget"), systemic(classify.ReasonQuotaExhausted, true)},
		{"budget_tokens first", 400, msg("budget_tokens exceeds the limit of max_tokens"), permanent(classify.ReasonInvalidRequest)},
		{"reasoning budget", 400, msg("The reasoning budget exceeds max_tokens"), permanent(classify.ReasonInvalidRequest)},
		{"budget near max_tokens but over a limit of money", 400, msg("max_tokens would exceed your budget limit"), systemic(classify.ReasonQuotaExhausted, true)},
		// A server's own 5xx stays the server's: its words are not read.
		{"500 speaking of a rate limit", 500, msg("Internal error while checking the rate limit"), transient(classify.ReasonUpstream5xx, false, 0)},
		{"499 speaking of a rate limit", 499, msg("Client closed the request before the rate limit check"), transient(classify.ReasonRateLimited, true, 0)},
		// Money, account and key words decide under a server's own status
		// too: they fail every call whatever the server says.
		{"503 speaking of billing", 503, msg("Your billing account is past due"), systemic(classify.ReasonQuotaExhausted, true)},
		{"502 speaking of the api key", 502, msg("Upstream rejected the API key"), systemic(classify.ReasonAuth, true)},
		{"408 speaking of a suspended account", 408, msg("Account suspended"), systemic(classify.ReasonAccount, true)},
		// A moderation verdict answered 403 (OpenRouter's documented
		// "Your chosen model requires moderation and your input was
		// flagged") is the request's content, not a key problem.
		{"403 moderation verdict", 403, `{"error":{"code":403,"message":"Your chosen model requires moderation and your input was flagged","metadata":{"reasons":["harassment"],"flagged_input":"..."}}}`,
			permanent(classify.ReasonContentFiltered)},
		// Words about the request next to words about the account prove
		// nothing: the account may be why.
		{"flagged account", 400, msg("Your account was flagged for review"), suspect(classify.ReasonContentFiltered)},
		{"region not supported", 403, msg("Country, region, or territory not supported"), systemic(classify.ReasonAuth, false)},
		// Size and parameter words are proof only where the status rejects
		// a request: under 403, 404 and 5xx they describe the deployment
		// or the server, and would fail every job at once.
		{"404 endpoint not supported", 404, msg("Endpoint /v1/responses is not supported"), systemic(classify.ReasonModelNotFound, false)},
		{"403 operation not permitted", 403, msg("This operation is not permitted"), systemic(classify.ReasonAuth, false)},
		{"501 not supported", 501, msg("Streaming is not supported by this server"), suspect(classify.ReasonNotImplemented)},
		{"502 unsupported upstream answer", 502, msg("Upstream returned an unsupported response"), transient(classify.ReasonUpstream5xx, false, 0)},
		{"400 not permitted names no request part", 400, msg("This operation is not permitted"), suspect(classify.ReasonInvalidRequest)},
		{"400 extraneous key not permitted", 400, msg("extraneous key [stream] is not permitted"), permanent(classify.ReasonInvalidRequest)},
		// A moderation or guardrail service that failed is no verdict on
		// the request (LiteLLM documents "403 Bedrock guardrail request
		// failed" for a failed ApplyGuardrail call).
		{"403 guardrail request failed", 403, msg("Bedrock guardrail request failed"), systemic(classify.ReasonAuth, false)},
		{"503 moderation service unavailable", 503, msg("Moderation service unavailable"), transient(classify.ReasonOverloaded, true, 0)},
		{"500 guardrail verdict", 500, msg("Violated guardrail policy"), permanent(classify.ReasonContentFiltered)},
		// Links are addresses, not words.
		{"a link to json-schema.org", 400, msg("tools.0.input_schema: JSON schema is invalid. See https://json-schema.org/draft/2020-12"), permanent(classify.ReasonInvalidRequest)},
		// Only the link is skipped: the words after it count.
		{"words after a link", 400, msg("See https://example.com/docs/errors: Unauthorized"), systemic(classify.ReasonAuth, true)},
		// An empty Cloudflare errors list says nothing; the status decides.
		{"empty errors list", 429, `{"success":false,"errors":[],"messages":[]}`, transient(classify.ReasonRateLimited, true, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := &classify.HTTPError{StatusCode: tc.status, Body: []byte(tc.body)}
			assertVerdict(t, tc.exp, classify.Default(err), err)
		})
	}
}
