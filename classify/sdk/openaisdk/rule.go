package openaisdk

import (
	"bytes"
	"errors"
	"io"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/retrygate/retrygate/classify"
)

var _ classify.Rule = Rule

// maxBody bounds how much of a kept response body Rule reads, as
// classify.ReadHTTPError does.
const maxBody = 1 << 20

// Rule decides any error whose chain holds an *openai.Error, or the
// *ssestream.StreamError a Chat Completions stream ends with when the
// server sends an error event mid-stream, by what the error carries; it
// passes (ok = false) on every other error. A stream error has no status
// of its own (the response was a 200): its event's error object decides,
// as it would outside a stream.
func Rule(err error) (v classify.Verdict, ok bool) {
	var se *ssestream.StreamError
	if errors.As(err, &se) && se != nil {
		return classify.Default(&classify.HTTPError{Body: se.Event.Data, Err: err}), true
	}
	var e *openai.Error
	if !errors.As(err, &e) || e == nil {
		return classify.Verdict{}, false
	}
	he := &classify.HTTPError{StatusCode: e.StatusCode, Body: body(e), Err: err}
	if e.Response != nil {
		he.Header = e.Response.Header
	}
	return classify.Default(he), true
}

// body rebuilds the response body: the SDK keeps the body's "error" member
// as RawJSON and, for any other shape, the whole body in Response.Body.
func body(e *openai.Error) []byte {
	if raw := e.RawJSON(); raw != "" {
		return []byte(`{"error":` + raw + `}`)
	}
	if e.Response == nil || e.Response.Body == nil {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(e.Response.Body, maxBody))
	e.Response.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return nil
	}
	return b
}
