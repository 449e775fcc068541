package classify_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
)

func isErr(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

func asErr[T error](err error) bool {
	var target T
	return errors.As(err, &target)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// closedPort returns the address of a TCP port nobody listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// hijackServer runs drop on the raw connection of every request.
func hijackServer(t *testing.T, drop func(net.Conn)) *httptest.Server {
	t.Helper()
	return newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		drop(conn)
	})
}

// blockingServer never answers until the test ends or the client leaves.
func blockingServer(t *testing.T) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := newServer(t, func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) }) // runs before srv.Close
	return srv
}

// TestDefaultNetwork runs the transport-level rows through a real go-openai
// client and real sockets.
func TestDefaultNetwork(t *testing.T) {
	timeout := transient(classify.ReasonTimeout, false, 0)
	network := transient(classify.ReasonNetwork, false, 0)
	tlsV := classify.Verdict{Class: classify.ClassSystemic, Reason: classify.ReasonTLS, Evidence: "go:tls"}
	badURL := classify.Verdict{Class: classify.ClassSystemic, Reason: classify.ReasonInvalidURL, Evidence: "go:url"}

	tests := []struct {
		name  string
		setup func(t *testing.T) (baseURL string, doer openai.HTTPDoer, ctx context.Context)
		about func(error) bool // reports whether err is the error the row is about
		exp   classify.Verdict
	}{
		{"ECONNREFUSED", func(t *testing.T) (string, openai.HTTPDoer, context.Context) {
			return "http://" + closedPort(t) + "/v1", http.DefaultClient, t.Context()
		}, isErr(syscall.ECONNREFUSED), classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonNetwork, Evidence: "go:refused"}},
		{"server closes the connection: EOF", func(t *testing.T) (string, openai.HTTPDoer, context.Context) {
			srv := hijackServer(t, func(c net.Conn) { c.Close() })
			return srv.URL + "/v1", srv.Client(), t.Context()
		}, isErr(io.EOF), network},
		{"server resets the connection: ECONNRESET", func(t *testing.T) (string, openai.HTTPDoer, context.Context) {
			srv := hijackServer(t, func(c net.Conn) {
				_ = c.(*net.TCPConn).SetLinger(0) // close sends RST
				c.Close()
			})
			return srv.URL + "/v1", srv.Client(), t.Context()
		}, isErr(syscall.ECONNRESET), network},
		{"client timeout", func(t *testing.T) (string, openai.HTTPDoer, context.Context) {
			srv := blockingServer(t)
			return srv.URL + "/v1", &http.Client{Timeout: 30 * time.Millisecond}, t.Context()
		}, isTimeout, timeout},
		{"ctx deadline", func(t *testing.T) (string, openai.HTTPDoer, context.Context) {
			srv := blockingServer(t)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
			t.Cleanup(cancel)
			return srv.URL + "/v1", srv.Client(), ctx
		}, isErr(context.DeadlineExceeded), timeout},
		{"ctx canceled", func(t *testing.T) (string, openai.HTTPDoer, context.Context) {
			srv := blockingServer(t)
			ctx, cancel := context.WithCancel(t.Context())
			cancel()
			return srv.URL + "/v1", srv.Client(), ctx
		}, isErr(context.Canceled), classify.Verdict{Class: classify.ClassCanceled, Reason: classify.ReasonCanceled}},
		{"untrusted certificate", func(t *testing.T) (string, openai.HTTPDoer, context.Context) {
			srv := httptest.NewTLSServer(http.NotFoundHandler())
			t.Cleanup(srv.Close)
			return srv.URL + "/v1", &http.Client{}, t.Context()
		}, asErr[x509.UnknownAuthorityError], tlsV},
		{"certificate for another host", func(t *testing.T) (string, openai.HTTPDoer, context.Context) {
			srv := httptest.NewTLSServer(http.NotFoundHandler())
			t.Cleanup(srv.Close)
			u, _ := url.Parse(srv.URL)
			// The test certificate covers 127.0.0.1 and example.com only.
			return "https://localhost:" + u.Port() + "/v1", srv.Client(), t.Context()
		}, asErr[x509.HostnameError], tlsV},
		{"https to a plain HTTP server", func(t *testing.T) (string, openai.HTTPDoer, context.Context) {
			srv := newServer(t, http.NotFoundHandler().ServeHTTP)
			return strings.Replace(srv.URL, "http://", "https://", 1) + "/v1", srv.Client(), t.Context()
		}, isErr(http.ErrSchemeMismatch), tlsV},
		{"unsupported scheme", func(t *testing.T) (string, openai.HTTPDoer, context.Context) {
			return "ftp://api.example.com/v1", http.DefaultClient, t.Context()
		}, asErr[*url.Error], badURL},
		{"base URL without scheme", func(t *testing.T) (string, openai.HTTPDoer, context.Context) {
			return "api.example.com/v1", http.DefaultClient, t.Context()
		}, asErr[*url.Error], badURL},
		{"unparsable base URL", func(t *testing.T) (string, openai.HTTPDoer, context.Context) {
			return "http://[::1/v1", http.DefaultClient, t.Context()
		}, asErr[*url.Error], badURL},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			baseURL, doer, ctx := tc.setup(t)
			c := newClient(t, baseURL, doer, false)
			_, err := c.CreateChatCompletion(ctx, chatRequest())
			if err == nil {
				t.Fatal("call succeeded, want an error")
			}
			if !tc.about(err) {
				t.Fatalf("not the error the row is about: %T %v", err, err)
			}
			assertVerdict(t, tc.exp, classify.Default(err), err)
		})
	}
}

// TestDefaultTLSTypes checks that each certificate error type is systemic,
// including the ones a test server cannot easily produce.
func TestDefaultTLSTypes(t *testing.T) {
	errs := []error{
		x509.UnknownAuthorityError{},
		x509.HostnameError{Host: "api.example.com"},
		x509.CertificateInvalidError{Reason: x509.Expired},
		x509.SystemRootsError{},
		tls.RecordHeaderError{Msg: "first record does not look like a TLS handshake"},
		&tls.CertificateVerificationError{Err: x509.CertificateInvalidError{Reason: x509.Expired}},
		tls.AlertError(40), // handshake_failure
	}
	for _, e := range errs {
		t.Run(fmt.Sprintf("%T", e), func(t *testing.T) {
			err := &url.Error{Op: "Post", URL: "https://api.example.com/v1/chat/completions", Err: e}
			assertVerdict(t, systemic(classify.ReasonTLS, false), classify.Default(err), err)
		})
	}
}

// TestDefaultNetworkTypes covers rows that real sockets cannot produce
// deterministically.
func TestDefaultNetworkTypes(t *testing.T) {
	op := func(op string, errno syscall.Errno) error {
		return &url.Error{Op: "Post", URL: "https://api.example.com/v1", Err: &net.OpError{Op: op, Net: "tcp", Err: os.NewSyscallError(op, errno)}}
	}
	tests := []struct {
		name string
		err  error
		exp  classify.Verdict
	}{
		{"broken pipe", op("write", syscall.EPIPE), transient(classify.ReasonNetwork, false, 0)},
		{"connection aborted", op("read", syscall.ECONNABORTED), transient(classify.ReasonNetwork, false, 0)},
		{"network unreachable", op("dial", syscall.ENETUNREACH), classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonNetwork, Evidence: "go:unreachable"}},
		{"host unreachable", op("dial", syscall.EHOSTUNREACH), classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonNetwork, Evidence: "go:unreachable"}},
		{"connection reset is no address failure", op("read", syscall.ECONNRESET), classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonNetwork, Evidence: "go:network"}},
		{"ETIMEDOUT", op("dial", syscall.ETIMEDOUT), transient(classify.ReasonTimeout, false, 0)},
		{"net.ErrClosed", fmt.Errorf("read: %w", net.ErrClosed), transient(classify.ReasonNetwork, false, 0)},
		{"temporary DNS error", &net.DNSError{Err: "server misbehaving", Name: "api.example.com", IsTemporary: true}, transient(classify.ReasonNetwork, false, 0)},
		{"DNS timeout", &net.DNSError{Err: "i/o timeout", Name: "api.example.com", IsTimeout: true}, transient(classify.ReasonTimeout, false, 0)},
		{"DNS no such host", &net.DNSError{Err: "no such host", Name: "api.example.invalid", IsNotFound: true}, classify.Verdict{Class: classify.ClassSystemic, Reason: classify.ReasonNetwork, Evidence: "go:dns"}},
		{"too many empty stream messages", openai.ErrTooManyEmptyStreamMessages, transient(classify.ReasonBadStream, false, 0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assertVerdict(t, tc.exp, classify.Default(tc.err), tc.err)
		})
	}
}

// TestDefaultClientSentinels: go-openai refuses these requests before
// sending them; the same request fails the same way every time.
func TestDefaultClientSentinels(t *testing.T) {
	srv := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		t.Error("the request reached the server")
		w.WriteHeader(http.StatusInternalServerError)
	})
	c := newClient(t, srv.URL+"/v1", srv.Client(), false)
	msgs := chatRequest().Messages

	tests := []struct {
		name string
		call func() error
		is   error
	}{
		{"stream flag on CreateChatCompletion", func() error {
			_, err := c.CreateChatCompletion(t.Context(), openai.ChatCompletionRequest{Model: openai.GPT4o, Messages: msgs, Stream: true})
			return err
		}, openai.ErrChatCompletionStreamNotSupported},
		{"completion-only model on chat", func() error {
			_, err := c.CreateChatCompletion(t.Context(), openai.ChatCompletionRequest{Model: openai.GPT3TextDavinci003, Messages: msgs})
			return err
		}, openai.ErrChatCompletionInvalidModel},
		{"chat-only model on completions", func() error {
			_, err := c.CreateCompletion(t.Context(), openai.CompletionRequest{Model: openai.O3Mini, Prompt: "hi"})
			return err
		}, openai.ErrCompletionUnsupportedModel},
		{"MaxTokens on a reasoning model", func() error {
			_, err := c.CreateChatCompletion(t.Context(), openai.ChatCompletionRequest{Model: openai.O3Mini, Messages: msgs, MaxTokens: 10})
			return err
		}, openai.ErrReasoningModelMaxTokensDeprecated},
		{"logprobs on a reasoning model", func() error {
			_, err := c.CreateChatCompletion(t.Context(), openai.ChatCompletionRequest{Model: openai.O3Mini, Messages: msgs, LogProbs: true})
			return err
		}, openai.ErrReasoningModelLimitationsLogprobs},
		{"wrapped: unsupported reasoning effort", func() error {
			_, err := c.CreateChatCompletion(t.Context(), openai.ChatCompletionRequest{Model: openai.GPT6Astra, Messages: msgs, ReasoningEffort: "bogus"})
			return err
		}, openai.ErrReasoningEffortUnsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if !errors.Is(err, tc.is) {
				t.Fatalf("want %v, got %v", tc.is, err)
			}
			assertVerdict(t, permanent(classify.ReasonClientSide), classify.Default(err), err)
		})
	}
}
