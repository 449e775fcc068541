package httpmw

import (
	"net"
	"net/http"
	"net/netip"
	"sync"
)

// Streams shares a handler's live streams among its clients: at most Max
// open at once and at most PerClient per client, so one client holding
// sockets it never reads cannot take every slot. StatusHandler keeps one
// (Options.MaxStreams, MaxStreamsPerClient, StreamClient); a handler of
// your own that streams (many jobs on one page, with RetryStatusOf) uses
// one like this:
//
//	var pageStreams = &httpmw.Streams{Max: 64}
//	...
//	done, ok := pageStreams.Open(r)
//	if !ok { /* 503 with Retry-After */ }
//	defer done()
//
// Its zero value uses the defaults; it is safe for concurrent use. It
// holds one entry per client with a stream open: at most Max.
type Streams struct {
	// Max bounds the streams open at once. Default: 256.
	Max int
	// PerClient bounds the streams one client has open at once.
	// Default: Max/8, at least 1.
	PerClient int
	// Client names a request's client. Default: ClientAddr, the remote
	// IP address (an IPv6 address's /64). Behind a proxy, use the address
	// the proxy vouches for (chi's middleware.RealIP sets r.RemoteAddr to
	// it, and the default then works).
	Client func(r *http.Request) string

	mu   sync.Mutex
	open int
	by   map[string]int
}

// Open counts r's stream in, false when Max streams are open or r's
// client has PerClient; call done when the stream ends.
func (s *Streams) Open(r *http.Request) (done func(), ok bool) {
	client := ClientAddr
	if s.Client != nil {
		client = s.Client
	}
	key := client(r)
	most, per := s.limits()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open >= most || s.by[key] >= per {
		return nil, false
	}
	if s.by == nil {
		s.by = map[string]int{}
	}
	s.open++
	s.by[key]++
	var once sync.Once
	return func() { once.Do(func() { s.close(key) }) }, true
}

func (s *Streams) close(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open--
	if s.by[key]--; s.by[key] <= 0 {
		delete(s.by, key)
	}
}

// limits are Max and PerClient with their defaults.
func (s *Streams) limits() (most, per int) {
	most = s.Max
	if most <= 0 {
		most = 256
	}
	per = s.PerClient
	if per <= 0 {
		per = max(most/8, 1)
	}
	return most, per
}

// ClientAddr is the default client of a stream: r.RemoteAddr's IP
// address, or its /64 for IPv6 (one host's usual allocation), or
// RemoteAddr itself when it is not host:port.
func ClientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	if ip = ip.Unmap(); ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	return ip.String()
}
