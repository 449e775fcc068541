package httpmw_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// rawStream opens a status stream over a raw connection from local (nil:
// any) and returns the connection, its reader past the status line and
// the response's status code.
func rawStream(t *testing.T, addr string, local net.Addr, id string) (net.Conn, *bufio.Reader, int) {
	t.Helper()
	c, err := (&net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}).Dial("tcp", addr)
	if err != nil && local != nil {
		t.Skipf("cannot dial from %v (only Linux routes all of 127/8 to lo): %v", local, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	fmt.Fprintf(c, "GET /documents/%s/retry-status HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n", id)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("status line: %v", err)
	}
	var code int
	if _, err := fmt.Sscanf(line, "HTTP/1.1 %d", &code); err != nil {
		t.Fatalf("status line %q: %v", line, err)
	}
	return c, br, code
}

// TestStreamsSharedAmongClients: with the default options, 300 status
// streams opened from one address get MaxStreams/8 (32) streams and the
// 503 problem beyond, and a page from another address still gets its
// stream and its first event.
func TestStreamsSharedAmongClients(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{})
	srv := httptest.NewServer(router(g, httpmw.Options{}, ok))
	t.Cleanup(srv.Close)
	addr := srv.Listener.Addr().String()
	codes := map[int]int{}
	for range 300 {
		_, _, code := rawStream(t, addr, nil, "7")
		codes[code]++
	}
	if exp := map[int]int{200: 32, 503: 268}; fmt.Sprint(codes) != fmt.Sprint(exp) {
		t.Fatalf("300 streams from one address: %v, want %v", codes, exp)
	}
	other := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}
	_, br, code := rawStream(t, addr, other, "7")
	if code != http.StatusOK {
		t.Fatalf("a page from another address: %d, want its stream", code)
	}
	sc := bufio.NewScanner(br)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			return // its first status event
		}
	}
	t.Fatalf("a page from another address: no event (%v)", sc.Err())
}

// TestStreamsKeyFunction: StreamClient names the client (a proxy's
// forwarded address); MaxStreamsPerClient caps each.
func TestStreamsKeyFunction(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{})
	client := func(r *http.Request) string { return r.Header.Get("X-Client") }
	srv := httptest.NewServer(router(g, httpmw.Options{MaxStreamsPerClient: 2, StreamClient: client}, ok))
	t.Cleanup(srv.Close)
	for i, tc := range []struct {
		client string
		exp    int
	}{{"a", 200}, {"a", 200}, {"a", 503}, {"b", 200}} {
		resp, _ := openStream(t, srv.URL, "7", http.Header{"X-Client": {tc.client}})
		if resp.StatusCode != tc.exp {
			t.Fatalf("stream %d of client %q: %d, want %d", i, tc.client, resp.StatusCode, tc.exp)
		}
	}
}

// TestStreamsNotReadDropped: a client that stops reading loses its stream
// once the socket's buffers are full and one write has waited its
// timeout, long before the stream's lifetime ends: its place is free for
// another client.
func TestStreamsNotReadDropped(t *testing.T) {
	t.Cleanup(httpmw.SetHeartbeat(time.Millisecond)) // fills the buffers fast
	t.Cleanup(httpmw.SetStreamLimits(time.Hour, 100*time.Millisecond))
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{})
	srv := httptest.NewUnstartedServer(router(g, httpmw.Options{MaxStreams: 1}, ok))
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		_ = c.(*net.TCPConn).SetWriteBuffer(4096)
		return ctx
	}
	srv.Start()
	t.Cleanup(srv.Close)
	c, _, code := rawStream(t, srv.Listener.Addr().String(), nil, "7")
	if code != http.StatusOK {
		t.Fatalf("the stream: %d", code)
	}
	_ = c.(*net.TCPConn).SetReadBuffer(4096) // and reads nothing more
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, _ := openStream(t, srv.URL, "7", nil)
		if resp.StatusCode == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a client that reads nothing still holds its stream after 30 s (write timeout 100 ms)")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStreamsLifetime: a stream ends after its lifetime, having told the
// client when to reconnect (retry:), and the reconnection with
// Last-Event-ID continues the ids.
func TestStreamsLifetime(t *testing.T) {
	t.Cleanup(httpmw.SetStreamLimits(200*time.Millisecond, 10*time.Second))
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{})
	srv := httptest.NewServer(router(g, httpmw.Options{}, ok))
	t.Cleanup(srv.Close)
	_, events := openStream(t, srv.URL, "7", nil)
	var last sseEvent
	timeout := time.After(20 * time.Second)
	for open := true; open; {
		select {
		case ev, ok := <-events:
			if ok {
				last, open = ev, true
				if ev.id == "1" && ev.retry != "1000" {
					t.Errorf("first event: retry %q, want 1000", ev.retry)
				}
			} else {
				open = false
			}
		case <-timeout:
			t.Fatal("the stream outlived its 200 ms lifetime by 20 s")
		}
	}
	if last.id != "1" {
		t.Fatalf("last event id %q, want 1", last.id)
	}
	_, events = openStream(t, srv.URL, "7", http.Header{"Last-Event-ID": {last.id}})
	if ev := <-events; ev.id != "2" {
		t.Fatalf("reconnection: first id %q, want 2", ev.id)
	}
}

// TestClientAddr: a stream's default client is its remote IP, one /64 for
// IPv6 (a host's usual allocation: its other addresses are one client),
// an IPv4-mapped address as IPv4, and RemoteAddr as is when it is not
// host:port.
func TestClientAddr(t *testing.T) {
	for addr, exp := range map[string]string{
		"203.0.113.7:40000":          "203.0.113.7",
		"203.0.113.7:40001":          "203.0.113.7",
		"[2001:db8:1:2::1]:443":      "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::9]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:3::1]:443":      "2001:db8:1:3::/64",
		"[::ffff:203.0.113.7]:1":     "203.0.113.7",
		"@":                          "@",
		"host:1":                     "host",
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = addr
		if got := httpmw.ClientAddr(r); exp != got {
			t.Errorf("%s: exp %q, got %q", addr, exp, got)
		}
	}
}

// TestStreamsOpen: Max in all, PerClient each, and a stream's done frees
// its place (twice is once).
func TestStreamsOpen(t *testing.T) {
	s := &httpmw.Streams{Max: 3, PerClient: 2}
	req := func(addr string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = addr + ":1"
		return r
	}
	a1, ok1 := s.Open(req("10.0.0.1"))
	_, ok2 := s.Open(req("10.0.0.1"))
	_, ok3 := s.Open(req("10.0.0.1"))
	_, ok4 := s.Open(req("10.0.0.2"))
	_, ok5 := s.Open(req("10.0.0.3"))
	if exp, got := "true true false true false", fmt.Sprint(ok1, ok2, ok3, ok4, ok5); exp != got {
		t.Fatalf("opens: exp %s, got %s", exp, got)
	}
	a1()
	a1()
	_, ok6 := s.Open(req("10.0.0.3"))
	_, ok7 := s.Open(req("10.0.0.1"))
	if !ok6 || ok7 {
		t.Fatalf("after one done: another client %v (want true), then the full handler %v (want false)", ok6, ok7)
	}

	// A client that closes one of two streams still has one: it may open
	// one more, not two; and a client with none holds no entry, so the
	// entries stay at most Max.
	s = &httpmw.Streams{Max: 10, PerClient: 2}
	b1, _ := s.Open(req("10.0.0.1"))
	b2, _ := s.Open(req("10.0.0.1"))
	b1()
	b3, ok8 := s.Open(req("10.0.0.1"))
	_, ok9 := s.Open(req("10.0.0.1"))
	if !ok8 || ok9 {
		t.Fatalf("one of two closed: one more %v (want true), a third %v (want false)", ok8, ok9)
	}
	b2()
	b3()
	if n := httpmw.StreamsClients(s); n != 0 {
		t.Errorf("every stream closed: %d clients held, want 0", n)
	}
}
