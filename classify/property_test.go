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
