package classify

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Default is the default classifier, a Func. It walks err's chain once. It
// decides by the first matching row of the table in the package doc. The
// precedence is:
//  1. explicit marks;
//  2. the provider's response (status, error type and code,
//     x-should-retry);
//  3. go-openai's client-side sentinels;
//  4. the caller's context.Canceled;
//  5. TLS and certificate errors;
//  6. timeouts;
//  7. network errors;
//  8. a URL the HTTP client cannot use;
//  9. anything else is transient ("unknown").
//
// A nil err, which the gate never passes, yields a transient "unknown"
// verdict, like any error Default does not recognise.
func Default(err error) Verdict {
	if err == nil {
		return vUnknown
	}
	var s signals
	walk(err, s.collect)
	return s.verdict(time.Now())
}

// signals is what one walk over an error chain found.
type signals struct {
	mark   Verdict
	marked bool

	api         bool // a provider response: status or body
	status      int
	p           problem
	header      http.Header
	clientSide  bool
	canceled    bool
	tls         bool
	timeout     bool
	dnsNotFound bool
	network     bool
	// address is the Evidence of a network failure that says the
	// configured address cannot be reached at all (refused, unreachable).
	// A connection that broke is not one.
	address   string
	badStream bool
	badURL    bool
}

// collect records what e itself says. It stops the walk at the outermost
// mark.
func (s *signals) collect(e error) bool {
	if status, p, ok := goOpenAIError(e); ok {
		s.addAPI(status, p)
	}
	switch x := e.(type) {
	case *marked:
		if x != nil {
			s.mark, s.marked = x.v, true
			return true
		}
	case *HTTPError:
		if x != nil {
			p := parseBody(x.Body)
			if p.typ == "" && p.code == "" {
				p.typ, p.code = x.Type, x.Code
			}
			s.addAPI(x.StatusCode, p)
			if s.header == nil && len(x.Header) > 0 {
				s.header = x.Header
			}
		}
	case StatusError:
		s.addAPI(x.HTTPStatusCode(), problem{})
	case *url.Error:
		// net/http reports "unsupported protocol scheme" as plain text. The
		// typed signal is the URL itself, which the error carries.
		if x != nil {
			if x.Op == "parse" {
				s.badURL = true
			} else if u, err := url.Parse(x.URL); err == nil && u.Scheme != "http" && u.Scheme != "https" {
				s.badURL = true
			}
		}
	case *net.DNSError:
		switch {
		case x == nil:
		case x.IsNotFound:
			s.dnsNotFound = true
		case x.IsTimeout:
			s.timeout = true
		default:
			s.network = true
		}
	case syscall.Errno:
		switch x {
		case syscall.ETIMEDOUT:
			s.timeout = true
		case syscall.ECONNREFUSED:
			s.network, s.address = true, "go:refused"
		case syscall.EHOSTUNREACH, syscall.ENETUNREACH:
			s.network, s.address = true, "go:unreachable"
		case syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE:
			s.network = true
		}
	case x509.UnknownAuthorityError, *x509.UnknownAuthorityError,
		x509.HostnameError, *x509.HostnameError,
		x509.CertificateInvalidError, *x509.CertificateInvalidError,
		x509.SystemRootsError, *x509.SystemRootsError,
		tls.RecordHeaderError, *tls.RecordHeaderError,
		tls.AlertError, *tls.CertificateVerificationError:
		s.tls = true
	case *json.UnsupportedTypeError, *json.UnsupportedValueError, *json.MarshalerError:
		s.clientSide = true // the request cannot be encoded, ever
	}

	switch {
	case is(e, context.Canceled):
		s.canceled = true
	case is(e, context.DeadlineExceeded):
		s.timeout = true
	case is(e, io.EOF), is(e, io.ErrUnexpectedEOF), is(e, net.ErrClosed):
		s.network = true
	case is(e, http.ErrSchemeMismatch):
		s.tls = true
	case goOpenAIEmptyStreamErr(e):
		s.badStream = true
	case goOpenAISentinel(e):
		s.clientSide = true
	}
	if ne, ok := e.(net.Error); ok && ne.Timeout() {
		s.timeout = true
	} else if _, ok := e.(*net.OpError); ok {
		s.network = true
	}
	return false
}

// addAPI records one layer's view of a provider response. The outermost
// layer that knows the status wins. So does the outermost whose body says
// anything. An *HTTPError from goopenai.Transport holds the whole body.
// The go-openai error it wraps holds only part of it.
func (s *signals) addAPI(status int, p problem) {
	s.api = true
	if s.status == 0 {
		s.status = status
	}
	if s.p == (problem{}) {
		s.p = p
	}
}

func (s *signals) verdict(now time.Time) Verdict {
	if s.marked {
		return s.mark
	}
	var v Verdict
	switch {
	case s.api:
		p := s.p
		if p.typ == "" {
			p.typ = awsErrorType(s.header.Get("X-Amzn-Errortype"))
		}
		v = apiVerdict(s.status, p)
	case s.clientSide:
		v = Verdict{Class: ClassPermanent, Reason: ReasonClientSide, Evidence: "go:client"}
	case s.canceled:
		return Verdict{Class: ClassCanceled, Reason: ReasonCanceled, Evidence: "go:canceled"}
	case s.tls:
		v = Verdict{Class: ClassSystemic, Reason: ReasonTLS, Evidence: "go:tls"}
	case s.timeout:
		v = vTimeout.with("go:timeout")
	case s.dnsNotFound:
		// The configured host does not resolve. An operator must fix it.
		v = Verdict{Class: ClassSystemic, Reason: ReasonNetwork, Evidence: "go:dns"}
	case s.network:
		v = Verdict{Class: ClassTransient, Reason: ReasonNetwork, Evidence: "go:network"}
		if s.address != "" {
			v.Evidence = s.address
		}
	case s.badStream:
		v = Verdict{Class: ClassTransient, Reason: ReasonBadStream, Evidence: "go:stream"}
	case s.badURL:
		v = Verdict{Class: ClassSystemic, Reason: ReasonInvalidURL, Evidence: "go:url"}
	default:
		v = vUnknown.with(evidenceUnknown)
	}
	v = shouldRetry(v, s.header.Get("X-Should-Retry"))
	if v.Class != ClassTransient {
		return v
	}
	if d, ok := parseRetryAfter(s.header, now); ok {
		v.RetryAfter = d
	} else if s.p.hasDelay {
		v.RetryAfter = s.p.delay // google.rpc.RetryInfo: as explicit as Retry-After
	} else if v.Reason == ReasonRateLimited {
		// OpenAI sends x-ratelimit-reset-* on every response. They say
		// when a limit refills, which answers only a rate-limit failure.
		// Its 429 error type ("requests" or "tokens") names the limit hit.
		// Without them, the wait the message states is read ("Please try
		// again in 20s"). An error that reached fn without its headers
		// has only that.
		var ok bool
		if v.RetryAfter, ok = parseRateLimitReset(s.header, s.p.typ); !ok {
			if v.RetryAfter, ok = parseAnthropicReset(s.header, now); !ok {
				v.RetryAfter, _ = retryIn(s.p.message)
			}
		}
	}
	return v
}

// evidenceUnknown is the Evidence of a verdict nothing decided.
const evidenceUnknown = "default:unknown"

// evidenceShouldRetry is the Evidence of a verdict x-should-retry decided.
const evidenceShouldRetry = "header:x-should-retry"

// awsErrorType reads AWS's x-amzn-ErrorType header,
// "ThrottlingException:http://internal.amazon.com/coral/...".
func awsErrorType(h string) string {
	t, _, _ := strings.Cut(h, ":")
	return strings.TrimSpace(t)
}

// shouldRetry applies the server's explicit x-should-retry instruction. It
// decides between retrying and not. Between permanent and systemic, the
// response body still decides. So a 401 or an exhausted quota sent with
// "x-should-retry: false" stays systemic, instead of failing the job. A
// "false" is no proof that the request is at fault. The verdict it makes
// is a suspect.
func shouldRetry(v Verdict, h string) Verdict {
	switch strings.ToLower(strings.TrimSpace(h)) {
	case "true":
		if v.Class != ClassTransient {
			return Verdict{Class: ClassTransient, Reason: ReasonShouldRetry, Evidence: evidenceShouldRetry}
		}
	case "false":
		if v.Class == ClassTransient {
			return Verdict{Class: ClassPermanent, Reason: ReasonShouldNotRetry, Suspect: true, Evidence: evidenceShouldRetry}
		}
	}
	return v
}
