package classify

import (
	"fmt"
	"io"
	"net/http"
)

// StatusError is an error that knows the HTTP status of the response it came
// from. Default classifies any error in the chain that implements it by its
// status. So any HTTP-speaking client can opt in with one method. The
// method name follows the AWS SDK for Go v2 (smithy-go's ResponseError).
// Its errors therefore fit as they are.
type StatusError interface {
	error
	HTTPStatusCode() int
}

// HTTPError is a failed HTTP response from an LLM API, as seen by Default.
// goopenai.Transport (package classify/goopenai) returns one for every
// failed go-openai call. Other clients can return one, or wrap their
// errors in one, read with ReadHTTPError. Default then reads the status,
// the provider's error body and the retry hint headers.
type HTTPError struct {
	// StatusCode is the response's HTTP status (0 = unknown).
	StatusCode int
	// Header holds the response's headers. May be nil. Default reads the
	// ones that carry retry hints: Retry-After, retry-after-ms,
	// x-should-retry, x-ratelimit-reset-*, anthropic-ratelimit-*-reset and
	// Date. It reads AWS's x-amzn-ErrorType too. ReadHTTPError keeps only
	// these.
	Header http.Header
	// Type and Code are the provider's error type and code, such as
	// "insufficient_quota" or Anthropic's "overloaded_error".
	// ReadHTTPError fills them from the body. A client that has them
	// decoded but no body can set them alone. Codes found in Body win.
	Type, Code string
	// Body is the response body, or its first MiB; nil when unknown.
	// Default reads from it the provider's error type and codes,
	// google.rpc details and the few messages listed in the package doc.
	Body []byte
	// Err is the client's own error for the response, such as the
	// *openai.APIError go-openai would have returned. May be nil.
	Err error
}

// Error returns Err's message unchanged, so wrapping in an HTTPError does not
// alter what callers log. Without Err it names the status, type and code.
// The body is upstream text and stays out of messages.
func (e *HTTPError) Error() string {
	if e.Err != nil {
		return e.Err.Error()
	}
	s := fmt.Sprintf("http status %d", e.StatusCode)
	if e.Type != "" {
		s += ", type " + e.Type
	}
	if e.Code != "" {
		s += ", code " + e.Code
	}
	return s
}

// Unwrap returns Err, so errors.As finds the client's own error type.
func (e *HTTPError) Unwrap() error { return e.Err }

// HTTPStatusCode implements StatusError.
func (e *HTTPError) HTTPStatusCode() int { return e.StatusCode }

// maxErrorBody bounds how much of a failed response's body is read.
// Provider error bodies are a few hundred bytes. An HTML error page is a
// few kilobytes.
const maxErrorBody = 1 << 20

// ReadHTTPError reads a failed response into the *HTTPError Default reads.
// It reads the status, the retry hint headers, and the body (the first
// MiB) with the provider's error type and code. Err is left for the
// caller: the client's own error for the response, if it has one.
// ReadHTTPError does not close the body. A nil body reads as empty.
//
// err is the error that reading the body met. he then holds the status
// and the headers only.
func ReadHTTPError(resp *http.Response) (he *HTTPError, err error) {
	he = &HTTPError{StatusCode: resp.StatusCode, Header: hintHeader(resp.Header)}
	if resp.Body == nil {
		return he, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return he, err
	}
	p := parseBody(body)
	he.Type, he.Code, he.Body = p.typ, p.code, body
	return he, nil
}

// hintHeaders lists the headers captured from a failed response.
var hintHeaders = [...]string{
	"Retry-After",
	"Retry-After-Ms",
	"X-Should-Retry",
	"X-Ratelimit-Reset-Requests",
	"X-Ratelimit-Reset-Tokens",
	"Date",
	"X-Amzn-Errortype", // AWS: the error's type, when the body has none
	"Anthropic-Ratelimit-Requests-Reset",
	"Anthropic-Ratelimit-Tokens-Reset",
	"Anthropic-Ratelimit-Input-Tokens-Reset",
	"Anthropic-Ratelimit-Output-Tokens-Reset",
}

// hintHeader copies the hint headers out of h. nil when there are none.
func hintHeader(h http.Header) http.Header {
	var out http.Header
	for _, k := range hintHeaders {
		if vs := h.Values(k); len(vs) > 0 {
			if out == nil {
				out = make(http.Header, len(hintHeaders))
			}
			out[k] = append([]string(nil), vs...)
		}
	}
	return out
}

// WithHeader attaches the retry hint headers of h to err. Use it where
// the caller holds the failed response's header itself. go-openai's
// non-streaming responses embed it (resp.Header()), even when the call
// fails:
//
//	resp, err := client.CreateChatCompletion(ctx, req)
//	err = classify.WithHeader(err, resp.Header())
//
// It returns nil for a nil err and err itself when h holds no hint header.
// The result is an *HTTPError whose message is err's.
func WithHeader(err error, h http.Header) error {
	if err == nil {
		return nil
	}
	hh := hintHeader(h)
	if hh == nil {
		return err
	}
	var s signals
	walk(err, s.collect)
	return &HTTPError{StatusCode: s.status, Header: hh, Type: s.p.typ, Code: s.p.code, Err: err}
}
