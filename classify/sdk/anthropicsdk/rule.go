package anthropicsdk

import (
	"errors"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/retrygate/retrygate/classify"
)

var _ classify.Rule = Rule

// Rule decides any error whose chain holds an *anthropic.Error by what the
// error carries; it passes (ok = false) on every other error. The SDK
// reports an error event in the middle of a stream as an *anthropic.Error
// carrying the stream's own 200: Rule reads it as a response without a
// status, so its error type decides, as it would outside a stream.
func Rule(err error) (v classify.Verdict, ok bool) {
	var e *anthropic.Error
	if !errors.As(err, &e) || e == nil {
		return classify.Verdict{}, false
	}
	status := e.StatusCode
	if status < http.StatusBadRequest {
		status = 0 // an error event inside a 200 stream
	}
	he := &classify.HTTPError{StatusCode: status, Body: []byte(e.RawJSON()), Err: err}
	if e.Response != nil {
		he.Header = e.Response.Header
	}
	return classify.Default(he), true
}
