package goopenai

import (
	"encoding/json"
	"fmt"
	"net/http"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
)

var _ openai.HTTPDoer = (*Transport)(nil)

// Transport is an openai.HTTPDoer for go-openai's ClientConfig.HTTPClient
// that makes a failed response's retry hint headers and body reachable
// from the error the client returns, and reports every response's Budget,
// success or failure, as classify.Transport does:
//
//	cfg := openai.DefaultConfig(key)
//	cfg.HTTPClient = &goopenai.Transport{Doer: cfg.HTTPClient}
//
// For a response with status >= 400 Do reads the body, closes it and returns
// no response but a *classify.HTTPError (see classify.ReadHTTPError) whose
// Err is exactly the *openai.APIError or *openai.RequestError go-openai
// would have built from that body. go-openai hands an error from its
// HTTPClient back unchanged, for plain calls and at stream start alike, so:
//
//   - errors.As(err, &apiErr) still finds the *openai.APIError and the
//     message is unchanged, but a type assertion err.(*openai.APIError) no
//     longer matches: use errors.As;
//   - a mid-stream error arrives in a 200 response and has no hint headers;
//     classify.Default classifies it by its error type and code.
//
// Successful responses pass through untouched.
type Transport struct {
	// Doer sends the requests (default: http.DefaultClient).
	Doer openai.HTTPDoer
}

// Do implements openai.HTTPDoer.
func (t *Transport) Do(req *http.Request) (*http.Response, error) {
	var d openai.HTTPDoer = http.DefaultClient
	if t != nil && t.Doer != nil {
		d = t.Doer
	}
	// classify.Transport reports the Budget, reading a failed response's
	// message for its wait and putting back a body that reads the same.
	budget := classify.Transport{Base: doerTransport{d}}
	resp, err := budget.RoundTrip(req)
	if err != nil || resp == nil || resp.StatusCode < http.StatusBadRequest {
		return resp, err
	}
	if resp.Body != nil {
		defer resp.Body.Close()
	}
	he, err := classify.ReadHTTPError(resp)
	if err != nil {
		he.Err = fmt.Errorf("error, reading response body: %w", err)
		return nil, he
	}
	he.Err = clientError(resp, he.Body)
	return nil, he
}

// doerTransport hands classify.Transport's requests to a Doer. It is no
// RoundTripper for general use (an *http.Client behind it follows
// redirects, which a RoundTripper must not); classify.Transport calls it
// once per request and only reads the response.
type doerTransport struct{ openai.HTTPDoer }

func (d doerTransport) RoundTrip(req *http.Request) (*http.Response, error) { return d.Do(req) }

// clientError is the error go-openai's handleErrorResp builds for a failed
// response with this body (client.go, v1.43.0).
func clientError(resp *http.Response, body []byte) error {
	var errRes openai.ErrorResponse
	err := json.Unmarshal(body, &errRes)
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
		return reqErr
	}
	errRes.Error.HTTPStatus = resp.Status
	errRes.Error.HTTPStatusCode = resp.StatusCode
	return errRes.Error
}
