package classify

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	openai "github.com/sashabaranov/go-openai"
)

// HTTPDoer sends HTTP requests: *http.Client, go-openai's
// ClientConfig.HTTPClient.
type HTTPDoer interface {
	Do(req *http.Request) (*http.Response, error)
}

var (
	_ HTTPDoer        = (*http.Client)(nil)
	_ openai.HTTPDoer = (*Transport)(nil)
)

// maxErrorBody bounds how much of a failed response's body is read.
// Provider error bodies are a few hundred bytes; an HTML error page a few
// kilobytes.
const maxErrorBody = 1 << 20

// Transport is an HTTPDoer for go-openai's ClientConfig.HTTPClient that makes
// the retry hint headers of a failed response reachable from the error the
// client returns, which go-openai otherwise drops:
//
//	cfg := openai.DefaultConfig(key)
//	cfg.HTTPClient = &classify.Transport{Doer: cfg.HTTPClient}
//
// For a response with status >= 400 it reads the body, closes it and returns
// no response but an *HTTPError that holds the status, the hint headers, the
// body with its error type and code and, as Err, exactly the *openai.APIError or *openai.RequestError go-openai
// would have built from that body. go-openai hands an error from its
// HTTPClient back unchanged, for plain calls and at stream start alike, so:
//
//   - errors.As(err, &apiErr) still finds the *openai.APIError and the
//     message is unchanged, but a type assertion err.(*openai.APIError) no
//     longer matches: use errors.As;
//   - a mid-stream error arrives in a 200 response and has no hint headers;
//     Default classifies it by its error type and code.
//
// Successful responses pass through untouched. The zero value is ready to
// use. A Transport is safe for concurrent use if its Doer is.
type Transport struct {
	// Doer sends the requests (default: http.DefaultClient).
	Doer HTTPDoer
}

// Do implements HTTPDoer.
func (t *Transport) Do(req *http.Request) (*http.Response, error) {
	var d HTTPDoer = http.DefaultClient
	if t != nil && t.Doer != nil {
		d = t.Doer
	}
	resp, err := d.Do(req)
	if err != nil || resp == nil || resp.StatusCode < http.StatusBadRequest {
		return resp, err
	}
	if resp.Body == nil {
		resp.Body = http.NoBody
	}
	defer resp.Body.Close()
	return nil, responseError(resp)
}

// responseError builds the error for a failed response the way go-openai's
// handleErrorResp does (client.go, v1.43.0), wrapped in an *HTTPError.
func responseError(resp *http.Response) error {
	he := &HTTPError{StatusCode: resp.StatusCode, Header: hintHeader(resp.Header)}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		he.Err = fmt.Errorf("error, reading response body: %w", err)
		return he
	}
	p := parseBody(body)
	he.Type, he.Code, he.Body = p.typ, p.code, body
	var errRes openai.ErrorResponse
	err = json.Unmarshal(body, &errRes)
	if err != nil || errRes.Error == nil {
		reqErr := &openai.RequestError{
			HTTPStatus:     resp.Status,
			HTTPStatusCode: resp.StatusCode,
			Err:            err,
			Body:           body,
		}
		if errRes.Error != nil {
			reqErr.Err = errRes.Error
		}
		he.Err = reqErr
		return he
	}
	errRes.Error.HTTPStatus = resp.Status
	errRes.Error.HTTPStatusCode = resp.StatusCode
	he.Err = errRes.Error
	return he
}
