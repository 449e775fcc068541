package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// TestEdgeSameRefusal checks that the HTTP edge compares like with like:
// over real HTTP, every handler answers a cooling job with a 429 of the
// middleware's headers and body size (httprate adds its own X-RateLimit-*
// headers), and the load loop stops on any other answer.
func TestEdgeSameRefusal(t *testing.T) {
	srv := redistest.Server(t)
	ctx := context.Background()
	jobs := []string{"a", "b"}
	s, err := newEdgeServer(ctx, srv.Addr(), "edge-test", jobs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)

	get := func(route, job string) (http.Header, []byte) {
		t.Helper()
		resp, err := http.Post("http://"+s.addr+"/"+route+"/"+job+"/evaluate", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if exp, got := http.StatusTooManyRequests, resp.StatusCode; exp != got {
			t.Fatalf("%s %s: exp status %d, got %d: %s", route, job, exp, got, body)
		}
		resp.Header.Del("Date")
		return resp.Header, body
	}
	names := func(h http.Header) []string {
		var ks []string
		for k := range h {
			if !strings.HasPrefix(k, "X-Ratelimit-") {
				ks = append(ks, k)
			}
		}
		slices.Sort(ks)
		return ks
	}
	for _, job := range jobs {
		gh, gb := get("gate", job)
		if !strings.Contains(string(gb), `"job_state":"cooling_down"`) {
			t.Errorf("gate %s: exp a cooling_down problem, got %s", job, gb)
		}
		for _, route := range []string{"bare", "get", "httprate"} {
			h, b := get(route, job)
			if exp, got := names(gh), names(h); !slices.Equal(exp, got) {
				t.Errorf("%s %s: exp headers %v, got %v", route, job, exp, got)
			}
			if exp, got := len(gb), len(b); exp != got {
				t.Errorf("%s %s: exp a %d-byte body, got %d", route, job, exp, got)
			}
		}
	}
	// Priming runs each job once behind the gate and once behind httprate.
	if exp, got := int64(2*len(jobs)), s.upstream.Load(); exp != got {
		t.Errorf("exp the upstream handlers to run only to prime %d jobs twice, ran %d times", len(jobs), got)
	}

	// A job httprate has not seen is let through (204): the load loop must
	// fail rather than count it.
	conns, err := dialLoad(ctx, s.addr, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLoad(conns)
	req := []byte("POST /httprate/unseen/evaluate HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
	if _, _, err := hammer(conns, [][]byte{req}, 20*time.Millisecond, make([]hist, 2), true); err == nil || !strings.Contains(err.Error(), "got 204") {
		t.Errorf("exp the load loop to stop on a 204, got %v", err)
	}
}

// TestReadResponse frames keep-alive responses by Content-Length and
// rejects what it cannot frame.
func TestReadResponse(t *testing.T) {
	two := "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 5\r\nRetry-After: 3\r\n\r\nhello" +
		"HTTP/1.1 204 No Content\r\n\r\n" +
		"HTTP/1.1 200 OK\r\ncontent-length:2\r\n\r\nok"
	br := bufio.NewReader(strings.NewReader(two))
	for _, exp := range []int{429, 204, 200} {
		got, err := readResponse(br)
		if err != nil || got != exp {
			t.Fatalf("exp %d, got %d, %v", exp, got, err)
		}
	}
	if _, err := readResponse(br); err != io.EOF {
		t.Errorf("exp io.EOF after the last response, got %v", err)
	}
	for _, bad := range []string{
		"HTTP/1.1 429 Too Many Requests\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"HTTP/1.1 4x9 Bad\r\nContent-Length: 0\r\n\r\n",
		"garbage\r\n",
		"HTTP/1.1 429 Too Many Requests\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 429 Too Many Requests\r\nContent-Length: 5\r\n\r\nhel",
	} {
		if code, err := readResponse(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("%q: exp an error, got status %d", bad, code)
		}
	}
}
