package main

import (
	"context"
	"net"
	"os"
	"regexp"
	"strings"
	"syscall"
)

// A call that got no response fails with the text Go's HTTP client
// logs: the request's method and quoted URL (net/url's Error: `%s %q:
// %s`), then the cause. explain reads these causes, each as Go's standard
// library writes it (golang/go src/net/..., read at commit a925402b with the
// search tool and in go1.26's GOROOT):
//
//   - net/http/client.go: a Client.Timeout appends " (Client.Timeout
//     exceeded while awaiting headers)" to "context deadline exceeded" or
//     to "net/http: request canceled while waiting for connection";
//   - net/http/transport.go: "net/http: timeout awaiting response headers"
//     (ResponseHeaderTimeout), "net/http: TLS handshake timeout";
//     h2_bundle.go: "http2: timeout awaiting response headers";
//   - net/net.go: an *OpError ("dial tcp 127.0.0.1:8080: connect:
//     connection refused", "dial tcp 1.2.3.4:443: i/o timeout", "read tcp
//     a->b: read: connection reset by peer");
//   - net/net.go and dnsclient.go: a *DNSError, "lookup NAME[ on
//     SERVER]: no such host".
//
// Each becomes the typed error Go returns, so classify.Default judges the
// text as it judges the error itself.
var transportCauses = []struct {
	text string
	err  func(s string) error
}{
	{"no such host", dnsNotFound},
	{"connection refused", errnoError(syscall.ECONNREFUSED)},
	{"no route to host", errnoError(syscall.EHOSTUNREACH)},
	{"network is unreachable", errnoError(syscall.ENETUNREACH)},
	{"connection reset by peer", errnoError(syscall.ECONNRESET)},
	{"broken pipe", errnoError(syscall.EPIPE)},
	{"Client.Timeout exceeded", deadline},
	{"timeout awaiting response headers", deadline},
	{"TLS handshake timeout", deadline},
	{"i/o timeout", deadline},
	{"context deadline exceeded", deadline},
}

// transportError returns the typed error of a Go HTTP client's failure
// text that holds no response, and the cause it names; nil when s names
// none.
func transportError(s string) (error, string) {
	s = strings.TrimSpace(s)
	if strings.ContainsAny(s, "\n{") {
		return nil, "" // a body, or more than one line: not a client's error text
	}
	for _, c := range transportCauses {
		if strings.Contains(s, c.text) {
			return c.err(s), c.text
		}
	}
	return nil, ""
}

// lookupName is the name a *DNSError's text looked up.
var lookupName = regexp.MustCompile(`lookup (\S+?)(?: on \S+)?: no such host`)

func dnsNotFound(s string) error {
	e := &net.DNSError{Err: "no such host", IsNotFound: true}
	if m := lookupName.FindStringSubmatch(s); m != nil {
		e.Name = m[1]
	}
	return &net.OpError{Op: "dial", Net: "tcp", Err: e}
}

func errnoError(errno syscall.Errno) func(string) error {
	return func(string) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}
	}
}

func deadline(string) error { return context.DeadlineExceeded }
