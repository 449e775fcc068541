package classify

import "strings"

// byMessage lists the provider messages that are the only signal of what
// they mean. The type, code and status they come with say something else.
// Other text is read only by the vocabulary (vocab.go). Each row is a
// prefix of the message, as the provider sends it. Where the prefix is
// not specific enough, a row adds a second fragment the message must
// contain. Each row has a corpus case in testdata/corpus naming its
// source.
var byMessage = [...]struct {
	name, prefix, contains string
	v                      Verdict
}{
	// Anthropic, 400 invalid_request_error: the organisation ran out of
	// prepaid credits. No code says so. Failing the job would fail every
	// job until someone buys credits.
	{"credit_balance_too_low", "Your credit balance is too low", "", vQuota},
	// Anthropic, 400 invalid_request_error: a spend limit the organisation
	// or workspace set was reached ("You have reached your specified
	// [workspace] API usage limits...").
	{"api_usage_limits", "You have reached your specified ", "API usage limits", vQuota},
	// OpenAI (429) and Groq (413), code rate_limit_exceeded: one request is
	// larger than the whole tokens-per-minute limit ("Limit 30000,
	// Requested 31538"). So no wait helps. The limit of the key is not the
	// problem. A stated size over a stated limit is proof.
	{"request_too_large", "Request too large for ", " per min", vTooLarge},
	// Anthropic, 429 rate_limit_error: long-context requests need extra
	// usage (credits) enabled. No wait helps. Yet the key's other requests
	// still work. So it is systemic for this job, not provider-wide.
	{"long_context", "", "required for long context requests", Verdict{Class: ClassSystemic, Reason: ReasonQuotaExhausted}},
	// xAI, 403 with gRPC's permission-denied text as its code: a content
	// safety check refused this input ("Content violates usage guidelines.
	// Team: ..., API key ID: ..., Model: ..., Failed check:
	// SAFETY_CHECK_TYPE_BIO"). The status, the code and the ids it names
	// all speak of access. The verdict is on the content.
	{"usage_guidelines", "Content violates usage guidelines", "", vContentFilter},
}

// messageVerdict looks msg up in byMessage.
func messageVerdict(msg string) (Verdict, bool) {
	msg = strings.TrimSpace(msg)
	for _, m := range byMessage {
		if strings.HasPrefix(msg, m.prefix) && strings.Contains(msg[len(m.prefix):], m.contains) {
			return m.v.with("message:" + m.name), true
		}
	}
	return Verdict{}, false
}
