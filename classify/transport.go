package classify

import (
	"bytes"
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
	_ HTTPDoer          = (*http.Client)(nil)
	_ openai.HTTPDoer   = (*Transport)(nil)
	_ http.RoundTripper = (*Transport)(nil)
)

// maxErrorBody bounds how much of a failed response's body is read.
// Provider error bodies are a few hundred bytes; an HTML error page a few
// kilobytes.
const maxErrorBody = 1 << 20

// Transport sits between an LLM client and the network in one of two forms,
// and in both reports every response's rate-limit Budget, success or
// failure, to the function WithBudgetFunc put on the request's context (the
// gate puts one there around a gated call).
//
// As an HTTPDoer for go-openai's ClientConfig.HTTPClient it also makes the
// retry hint headers of a failed response reachable from the error the
// client returns, which go-openai otherwise drops:
//
//	cfg := openai.DefaultConfig(key)
//	cfg.HTTPClient = &classify.Transport{Doer: cfg.HTTPClient}
//
// For a response with status >= 400 Do reads the body, closes it and returns
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
// As an http.RoundTripper it serves clients that take an *http.Client
// (openai-go, anthropic-sdk-go, plain net/http):
//
//	hc := &http.Client{Transport: &classify.Transport{}}
//
// RoundTrip hands every response back as it came, failures included: a
// RoundTripper must not turn a response into an error, and those SDKs build
// errors that keep the status and headers themselves (classify/sdk
// classifies them). When a function is listening it reads a failed
// response's body, up to 1 MiB, for the wait its message states, and puts
// back a body that reads the same.
//
// Successful responses pass through untouched. The zero value is ready to
// use in both forms. A Transport is safe for concurrent use if its Doer and
// Base are.
type Transport struct {
	// Doer sends the requests of Do (default: http.DefaultClient).
	Doer HTTPDoer
	// Base sends the requests of RoundTrip (default:
	// http.DefaultTransport).
	Base http.RoundTripper
}

// Do implements HTTPDoer.
func (t *Transport) Do(req *http.Request) (*http.Response, error) {
	var d HTTPDoer = http.DefaultClient
	if t != nil && t.Doer != nil {
		d = t.Doer
	}
	resp, err := d.Do(req)
	if err != nil || resp == nil {
		return resp, err
	}
	report := budgetFunc(req.Context())
	if resp.StatusCode < http.StatusBadRequest {
		reportBudget(report, resp.Header, "")
		return resp, nil
	}
	if resp.Body == nil {
		resp.Body = http.NoBody
	}
	defer resp.Body.Close()
	message, err := responseError(resp)
	reportBudget(report, resp.Header, message)
	return nil, err
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	base := http.DefaultTransport
	if t != nil && t.Base != nil {
		base = t.Base
	}
	resp, err := base.RoundTrip(req)
	report := budgetFunc(req.Context())
	if err != nil || resp == nil || report == nil {
		return resp, err
	}
	var message string
	if resp.StatusCode >= http.StatusBadRequest && resp.Body != nil {
		message = peekMessage(resp)
	}
	reportBudget(report, resp.Header, message)
	return resp, nil
}

// peekMessage reads the error message of a failed response's body and
// replaces the body with one that reads the same bytes, then the rest, and
// closes the original.
func peekMessage(resp *http.Response) string {
	orig := resp.Body
	head, err := io.ReadAll(io.LimitReader(orig, maxErrorBody))
	var rest io.Reader = orig
	if err != nil {
		rest = errReader{err}
	}
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(head), rest), orig}
	return parseBody(head).message
}

type readCloser struct {
	io.Reader
	io.Closer
}

// errReader fails every read with the error the first read of the body
// met, so the client sees it where it would have.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// responseError builds the error for a failed response the way go-openai's
// handleErrorResp does (client.go, v1.43.0), wrapped in an *HTTPError, and
// returns the body's error message with it.
func responseError(resp *http.Response) (message string, err error) {
	he := &HTTPError{StatusCode: resp.StatusCode, Header: hintHeader(resp.Header)}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		he.Err = fmt.Errorf("error, reading response body: %w", err)
		return "", he
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
		return p.message, he
	}
	errRes.Error.HTTPStatus = resp.Status
	errRes.Error.HTTPStatusCode = resp.StatusCode
	he.Err = errRes.Error
	return p.message, he
}
