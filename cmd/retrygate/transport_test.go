package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// What Go's HTTP client logs when a call gets no response, as people
// pasted it from their logs, with the verdict explain must give.
var loggedTransportFailures = []struct {
	text, source string
	reason       string
	evidence     string
}{
	{`Get "https://REDACTED.tld/api/route": dial tcp: lookup REDACTED.tld on 10.10.0.X:53: no such host`,
		"https://github.com/BishopFox/sj/issues/12", "network", "go:dns"},
	{`Get "https://api.bringyour.com/network/provider-locations": dial tcp: lookup api.bringyour.com: no such host`,
		"https://github.com/urnetwork/server/issues/66", "network", "go:dns"},
	{`Post "http://10.82.101.193:8000/v1/chat/completions": context deadline exceeded (Client.Timeout exceeded while awaiting headers)`,
		"hey's error distribution against a vLLM server, found with the search tool (find_string id 53301435507)", "timeout", "go:timeout"},
	{`Get http://127.0.0.1:5000/v2/: net/http: request canceled (Client.Timeout exceeded while awaiting headers)`,
		"docker login, found with the search tool (find_string id 118733877)", "timeout", "go:timeout"},
	{`Get "https://registry-1.docker.io/v2/": net/http: request canceled while waiting for connection (Client.Timeout exceeded while awaiting headers)`,
		"docker-compose pull, found with the search tool (find_string id 41223979017)", "timeout", "go:timeout"},
}

// explain reads what Go's HTTP client logs for a call with no response:
// the real texts people logged, and the texts this Go's net/http writes
// now for a refused connection, a Client.Timeout and a
// ResponseHeaderTimeout (made here, not copied).
func TestExplainReadsGoTransportFailures(t *testing.T) {
	type want struct{ text, class, reason, evidence string }
	var cases []want
	for _, c := range loggedTransportFailures {
		class := "transient"
		if c.evidence == "go:dns" {
			class = "systemic"
		}
		cases = append(cases, want{c.text, class, c.reason, c.evidence})
	}

	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/v1/chat/completions"
	ln.Close()
	_, err = http.Post(closed, "application/json", strings.NewReader("{}"))
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("a closed port: %v", err)
	}
	cases = append(cases, want{err.Error(), "transient", "network", "go:refused"})

	// A server that answers after the client gave up.
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	for _, c := range []*http.Client{
		{Timeout: 20 * time.Millisecond},
		{Transport: &http.Transport{ResponseHeaderTimeout: 20 * time.Millisecond}},
	} {
		_, err := c.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader("{}"))
		if err == nil {
			t.Fatal("want a timeout")
		}
		cases = append(cases, want{err.Error(), "transient", "timeout", "go:timeout"})
	}
	_, err = (&http.Client{}).Do(mustRequest(t, "http://retrygate-test.invalid/v1/chat/completions"))
	if err != nil && strings.Contains(err.Error(), "no such host") { // where the sandbox resolves at all
		cases = append(cases, want{err.Error(), "systemic", "network", "go:dns"})
	}

	for _, c := range cases {
		t.Run(c.text, func(t *testing.T) {
			withStdin(t, c.text+"\n")
			r := runCLI(t, nil, "explain", "--json")
			var j explainJSON
			if r.code != exitOK || json.Unmarshal([]byte(r.stdout), &j) != nil {
				t.Fatalf("exit %d, %q, %q", r.code, r.stdout, r.stderr)
			}
			if j.Status != 0 || j.NoResponse == "" || j.Class != c.class || j.Reason != c.reason || j.Evidence != c.evidence {
				t.Fatalf("%+v, want no response, %s/%s by %s", j, c.class, c.reason, c.evidence)
			}
			withStdin(t, c.text)
			if r := runCLI(t, nil, "explain"); r.code != exitOK || !strings.Contains(r.stdout, "no response") {
				t.Fatalf("human: exit %d, %q", r.code, r.stdout)
			}
		})
	}
	// A body that quotes such words is still a response's body.
	withStdin(t, "HTTP/1.1 502 Bad Gateway\n\n{\"error\":\"upstream connect error: connection refused\"}")
	if r := runCLI(t, nil, "explain", "--json"); !strings.Contains(r.stdout, `"status": 502`) {
		t.Fatalf("a 502 body naming a refused connection: %q", r.stdout)
	}
}

func mustRequest(t *testing.T, url string) *http.Request {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
