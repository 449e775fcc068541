package anthropicsdk_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/classify/sdk/anthropicsdk"
)

// TestRuleReadsStreamErrors: an error event in the middle of a Messages
// stream, which the SDK reports as an *anthropic.Error holding the
// stream's 200, gets the verdict the same error gets outside a stream.
// The event form is the one https://docs.anthropic.com/en/docs/build-with-claude/streaming#error-events
// shows (event: error, data: {"type": "error", "error": {"type":
// "overloaded_error", "message": "Overloaded"}}), the other error types
// those of https://docs.anthropic.com/en/api/errors.
func TestRuleReadsStreamErrors(t *testing.T) {
	const start = "event: message_start\n" +
		`data: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-4-5","stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}` + "\n\n"
	tests := []struct {
		name  string
		event string
		exp   classify.Verdict
	}{
		{"overloaded", `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`,
			classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonOverloaded, ProviderWide: true, Evidence: "type:overloaded_error"}},
		{"rate limit", `{"type": "error", "error": {"type": "rate_limit_error", "message": "This request would exceed your account's rate limit. Please try again later."}}`,
			classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonRateLimited, ProviderWide: true, Evidence: "type:rate_limit_error"}},
		{"api error", `{"type": "error", "error": {"type": "api_error", "message": "An unexpected error has occurred internal to Anthropic's systems."}}`,
			classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonUpstream5xx, Evidence: "type:api_error"}},
		{"a type nobody lists is no 200", `{"type": "error", "error": {"type": "stream_interrupted_error", "message": "The stream was interrupted."}}`,
			classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonUnknown, Evidence: "default:unknown"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := newClient(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				io.WriteString(w, start+"event: error\ndata: "+tc.event+"\n\n")
			}))
			err := stream(t, client)
			v, ok := anthropicsdk.Rule(err)
			if !ok || v != tc.exp {
				t.Errorf("Rule(%v) = %+v %v, want %+v", err, v, ok, tc.exp)
			}
		})
	}
}
