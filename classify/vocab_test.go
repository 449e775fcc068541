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
