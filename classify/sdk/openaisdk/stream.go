package openaisdk

import (
	"encoding/json"
	"fmt"

	"github.com/openai/openai-go/v3/responses"

	"github.com/retrygate/retrygate/classify"
)

// EventError returns the failure a Responses API stream reports as an
// event, or nil for any other event. The SDK's stream delivers "error" and
// "response.failed" as ordinary events and ends with a nil Err, so a loop
// that only checks stream.Err() reports a failed call as a success. Check
// every event:
//
//	stream := client.Responses.NewStreaming(ctx, params)
//	defer stream.Close()
//	for stream.Next() {
//		ev := stream.Current()
//		if err := openaisdk.EventError(ev); err != nil {
//			return err
//		}
//		// use ev
//	}
//	return stream.Err()
//
// The error is a *classify.HTTPError without a status whose body is the
// event's error (its code serves as code and type), so classify.Default
// decides it as it decides the same error outside a stream: a
// rate_limit_exceeded is a provider-wide rate limit, a server_error an
// upstream failure, an invalid_prompt or image_content_policy_violation
// proof that the request fails. Its message is the event's type, code and
// message.
func EventError(ev responses.ResponseStreamEventUnion) error {
	var code, msg, param string
	switch ev.Type {
	case "error":
		code, msg, param = ev.Code, ev.Message, ev.Param
	case "response.failed":
		code, msg = string(ev.Response.Error.Code), ev.Response.Error.Message
	default:
		return nil
	}
	body, err := json.Marshal(map[string]any{"error": map[string]string{"type": code, "code": code, "message": msg, "param": param}})
	if err != nil { // strings always encode
		return err
	}
	return &classify.HTTPError{Type: code, Code: code, Body: body, Err: fmt.Errorf("openai: stream event %s: %s: %s", ev.Type, code, msg)}
}
