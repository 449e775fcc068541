package anthropicsdk

import (
	"errors"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/retrygate/retrygate/classify"
)

var _ classify.Rule = Rule

// Rule decides any error whose chain holds an *anthropic.Error by what the
// error carries; it passes (ok = false) on every other error.
func Rule(err error) (v classify.Verdict, ok bool) {
	var e *anthropic.Error
	if !errors.As(err, &e) || e == nil {
		return classify.Verdict{}, false
	}
	he := &classify.HTTPError{StatusCode: e.StatusCode, Body: []byte(e.RawJSON()), Err: err}
	if e.Response != nil {
		he.Header = e.Response.Header
	}
	return classify.Default(he), true
}
