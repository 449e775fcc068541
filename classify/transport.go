package classify

import (
	"bytes"
	"io"
	"net/http"
)

var _ http.RoundTripper = (*Transport)(nil)

// Transport is an http.RoundTripper that reports every response's
// rate-limit Budget, success or failure. It reports to the function
// WithBudgetFunc put on the request's context. The gate puts one there
// around a gated call. It serves clients that take an *http.Client
// (openai-go, anthropic-sdk-go, plain net/http):
//
//	hc := &http.Client{Transport: &classify.Transport{}}
//
// go-openai's errors drop the response's headers. For go-openai, use
// goopenai.Transport (package classify/goopenai) as its
// ClientConfig.HTTPClient instead. It reports the Budget the same way. It
// also keeps the retry hint headers in the error.
//
// RoundTrip hands every response back as it came, failures included. A
// RoundTripper must not turn a response into an error. Those SDKs build
// errors that keep the status and headers themselves (classify/sdk
// classifies them). When a function is listening, RoundTrip reads a
// failed response's body, up to 1 MiB, for the wait its message states.
// It puts back a body that reads the same.
//
// Successful responses pass through untouched. The zero value is ready to
// use. A Transport is safe for concurrent use if its Base is.
type Transport struct {
	// Base sends the requests (default: http.DefaultTransport).
	Base http.RoundTripper
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

// peekMessage reads the error message of a failed response's body. It
// replaces the body with one that reads the same bytes, then the rest. It
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
// met. So the client sees it where it would have.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
