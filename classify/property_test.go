package classify_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/internal/code"
)

// accountPhrases say the failure is the account's, the key's or the
// deployment's, in the words of no provider in particular.
var accountPhrases = []string{
	"insufficient balance", "billing", "payment required", "credits", "overdue",
	"in arrears", "spend limit reached", "budget exceeded", "monthly quota exceeded",
	"api key", "invalid API-Key", "expired access token", "credentials", "unauthenticated",
	"account suspended", "account has been deactivated", "organization must be verified",
	"no models loaded", "model does not exist", "permission denied",
	"You exceeded your current quota, please check your plan and billing details", "limited to 1000 API calls / month",
	"used all available credits or reached its monthly spending limit",
	"Your resource has been temporarily blocked because we detected behavior that may violate our content policy",
}

// accountBody puts phrase into one of a provider's body shapes, in the
// code, the type or the message.
func accountBody(shape int, phrase, code, typ, msg string) []byte {
	codeOf := func(s string) string { return s }
	var v any
	switch shape % 7 {
	case 0:
		v = map[string]any{"error": map[string]any{"message": phrase + ". " + msg, "type": typ, "code": code}}
	case 1:
		v = map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": codeOf(phrase)}}
	case 2:
		v = map[string]any{"error": map[string]any{"message": msg, "type": phrase, "code": code}}
	case 3:
		v = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": phrase + ": " + msg}}
	case 4:
		v = []any{map[string]any{"error": map[string]any{"code": 400, "message": phrase + " " + msg, "status": "INVALID_ARGUMENT"}}}
	case 5:
		v = map[string]any{"errors": []any{map[string]any{"code": 1000, "message": phrase + " " + msg}}, "success": false}
	default:
		v = map[string]any{"code": code, "error": phrase + " " + msg}
	}
	b, _ := json.Marshal(v)
	return b
}

// neverFailedForTheAccount is the property: with account evidence, a
// verdict is never permanent on proof, and never permanent at all for a
// status below 500 (the server's own statuses stay transient).
func neverFailedForTheAccount(t *testing.T, status int, body []byte, v classify.Verdict) {
	t.Helper()
	if v.Class == classify.ClassPermanent && (!v.Suspect || status < 500) {
		t.Fatalf("status %d, body %s: %+v, want never Failed for an account problem", status, body, v)
	}
	if !code.Evidence(v.Evidence) {
		t.Fatalf("status %d, body %s: Evidence %q is not of its form", status, body, v.Evidence)
	}
}

// TestAccountNeverFailed is the property over a generated table: every
// status 400-599 × every account phrase × every body shape × generic
// types and codes nobody lists.
func TestAccountNeverFailed(t *testing.T) {
	types := []string{"invalid_request_error", "BadRequestError", "", "error", "E_UNKNOWN"}
	n := 0
	for status := 400; status <= 599; status++ {
		for i, phrase := range accountPhrases {
			for shape := 0; shape < 7; shape++ {
				typ := types[(status+i+shape)%len(types)]
				code := fmt.Sprintf("E%04d", (status*31+i*7+shape)%10000)
				body := accountBody(shape, phrase, code, typ, "Please check and try again.")
				v := classify.Default(&classify.HTTPError{StatusCode: status, Body: body})
				neverFailedForTheAccount(t, status, body, v)
				n++
			}
		}
	}
	t.Logf("%d responses", n)
}

// requestPhrases name this request: its size over a stated limit, a
// parameter or schema feature the model rejects, the order of its
// messages, a content or guardrail verdict on it, each in the words of a
// provider's real response. server marks the phrases that are proof under
// a server's own 5xx too: a size with the numbers that state it, the order
// of the messages.
var requestPhrases = []struct {
	phrase, reason string
	server         bool
}{
	// Content and guardrail verdicts are proof under every status; the
	// others where the status rejects a request, and the server's under a
	// 5xx as well.
	{"prompt is too long: 227255 tokens > 200000 maximum", classify.ReasonContextLength, true},
	{"This model's maximum context length is 131072 tokens. However, you requested 141980 tokens", classify.ReasonContextLength, true},
	{"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 2048. Given: 3474 `inputs` tokens and 60 `max_new_tokens`", classify.ReasonContextLength, true},
	{"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576)", classify.ReasonContextLength, true},
	{"The prompt is too long for this model", classify.ReasonContextLength, false},
	{"max_tokens: 10000 > 4096, which is the maximum allowed number of output tokens for claude-3-5-sonnet-20240620", classify.ReasonInvalidRequest, false},
	{"The maximum tokens you requested exceeds the model limit of 32768", classify.ReasonInvalidRequest, false},
	{"Invalid schema for response_format 'x': In context=(), 'additionalProperties' is required to be supplied and to be false", classify.ReasonInvalidRequest, false},
	{"Unknown parameter: 'response_format.schema'", classify.ReasonInvalidRequest, false},
	{"Your request was rejected as a result of our safety system", classify.ReasonContentFiltered, true},
	{"Bedrock guardrail failed: I cannot respond to requests containing personally identifiable information", classify.ReasonContentFiltered, true},
	{"Request contains prohibited content", classify.ReasonContentFiltered, true},
	{"Blocked by Akamai Firewall for AI", classify.ReasonContentFiltered, true},
	{"Request was filtered by Lakera Guard", classify.ReasonContentFiltered, true},
	{"This model's maximum prompt length is 131072 but the request contains 136973 tokens.", classify.ReasonContextLength, true},
	{"Malformed input request: expected maxLength: 42000, actual: 46735, please reformat your input and try again.", classify.ReasonContextLength, true},
	{"Expected last role User or Tool (or Assistant with prefix True) for serving but got assistant", classify.ReasonInvalidRequest, true},
	{"system message must be at the beginning", classify.ReasonInvalidRequest, true},
	{"Missing `reasoning_content` field in the assistant message at message index 3.", classify.ReasonInvalidRequest, true},
	{"`temperature` and `top_p` cannot both be specified for this model. Please use only one.", classify.ReasonInvalidRequest, false},
	{"Invalid request content: The model does not support tool use or function calling but tools or tool_choice have been specified on the request.", classify.ReasonInvalidRequest, false},
	{"1 validation error detected: Value at 'body' failed to satisfy constraint: Member must have length less than or equal to 25000000", classify.ReasonInvalidRequest, false},
}

// TestRequestProofFailsAtOnce is the mirror of TestAccountNeverFailed: a
// response whose text names this request (its size over a limit, a
// parameter the model rejects, the order of its messages, a content
// verdict on it) is Failed on first sight, in every body shape, with
// generic types and codes nobody lists: a content verdict under every
// status but 401 and 402 (which name the account by themselves), size and
// parameter words under every status that rejects a request (not 403 nor
// 404, where the verdict stays what it was: never Failed at once), and
// under a server's 5xx a size stated in numbers and the order of the
// messages only; under a 429 the order of the messages only, since token
// counts and limits there are a rate's.
func TestRequestProofFailsAtOnce(t *testing.T) {
	types := []string{"invalid_request_error", "BadRequestError", "", "error", "E_UNKNOWN"}
	n := 0
	for status := 400; status <= 599; status++ {
		if status == http.StatusUnauthorized || status == http.StatusPaymentRequired {
			continue
		}
		for i, rp := range requestPhrases {
			for shape := 0; shape < 7; shape++ {
				typ := types[(status+i+shape)%len(types)]
				code := fmt.Sprintf("E%04d", (status*31+i*7+shape)%10000)
				body := accountBody(shape, rp.phrase, code, typ, "Please check and try again.")
				v := classify.Default(&classify.HTTPError{StatusCode: status, Body: body})
				order := rp.server && rp.reason == classify.ReasonInvalidRequest
				proof := rp.reason == classify.ReasonContentFiltered ||
					(status != http.StatusForbidden && status != http.StatusNotFound && (status < 500 || rp.server) &&
						(status != http.StatusTooManyRequests || order))
				switch {
				case proof && (v.Class != classify.ClassPermanent || v.Suspect || v.Reason != rp.reason):
					t.Fatalf("status %d, body %s: %+v, want Failed at once (%s)", status, body, v, rp.reason)
				case !proof && v.Class == classify.ClassPermanent && !v.Suspect:
					t.Fatalf("status %d, body %s: %+v, want no proof under this status", status, body, v)
				}
				n++
			}
		}
	}
	t.Logf("%d responses", n)
}

// TestAccountWordsWinOverRequestWords: where a response names both the
// request and the account (OpenRouter's "requires more credits, or fewer
// max_tokens"), the account wins: never Failed.
func TestAccountWordsWinOverRequestWords(t *testing.T) {
	for _, status := range []int{400, 403, 413, 422, 429, 500} {
		for i, rp := range requestPhrases {
			for j, ap := range accountPhrases {
				body := accountBody(i+j, ap+". "+rp.phrase, "E0001", "invalid_request_error", "")
				v := classify.Default(&classify.HTTPError{StatusCode: status, Body: body})
				if v.Class == classify.ClassPermanent && !v.Suspect {
					t.Fatalf("status %d, body %s: %+v: Failed at once though the account is named", status, body, v)
				}
			}
		}
	}
}

// TestGenericRejectionIsSuspect: a rejection that names no cause (a 400
// or 422, or a mid-stream invalid_request_error, with generic types,
// codes nobody lists and neutral words) is never Failed on first sight.
func TestGenericRejectionIsSuspect(t *testing.T) {
	types := []string{"invalid_request_error", "BadRequestError", "", "validation_error", "error"}
	msgs := []string{"Invalid request", "Bad Request", "malformed input", "parameter 'x' is invalid", "request failed", "", "Unprocessable Entity"}
	for _, status := range []int{0, 400, 422} {
		for i, typ := range types {
			for j, msg := range msgs {
				code := fmt.Sprintf("E%03d", i*10+j)
				body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}})
				v := classify.Default(&classify.HTTPError{StatusCode: status, Body: body})
				if status == 0 && typ != "invalid_request_error" {
					continue // no status and no generic type of rejection: unknown, transient
				}
				if v.Class != classify.ClassPermanent || !v.Suspect {
					t.Errorf("status %d, body %s: %+v, want a suspect", status, body, v)
				}
			}
		}
	}
}

// FuzzAccountNeverFailed: any status, any code, type and message around an
// account phrase, in any shape, is never Failed on proof.
func FuzzAccountNeverFailed(f *testing.F) {
	f.Add(400, 0, 0, "invalid_value", "invalid_request_error", "Your request was rejected.", "false")
	f.Add(429, 3, 1, "1113", "", "请充值", "")
	f.Add(403, 14, 2, "context_length_exceeded", "rate_limit_error", "tokens per min", "")
	f.Add(412, 16, 5, "", "", "Precondition Failed", "true")
	f.Add(498, 18, 6, "capacity_exceeded", "", "", "")
	f.Add(422, 9, 4, "content_policy_violation", "BadRequestError", "max_tokens is too large", "false")
	f.Add(400, 2, 0, "", "invalid_request_error", "prompt is too long: 227255 tokens > 200000 maximum", "")
	f.Add(500, 11, 3, "", "", "Bedrock guardrail failed: unsafe content", "")
	f.Fuzz(func(t *testing.T, status, phrase, shape int, errCode, typ, msg, shouldRetry string) {
		status = 400 + (status&0x7fffffff)%200
		p := accountPhrases[(phrase&0x7fffffff)%len(accountPhrases)]
		body := accountBody(shape&0x7fffffff, p, errCode, typ, msg)
		v := classify.Default(&classify.HTTPError{StatusCode: status, Body: body, Header: http.Header{"X-Should-Retry": {shouldRetry}}})
		if v.Class == classify.ClassPermanent && !v.Suspect {
			t.Fatalf("status %d, body %s: %+v: Failed on proof for an account problem", status, body, v)
		}
		if !code.Evidence(v.Evidence) {
			t.Fatalf("Evidence %q is not of its form", v.Evidence)
		}
	})
}
