package main

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// TestDuplicateWaitsForTheRunningCall: two clients evaluate the slow
// document at once with Prefer: wait; one model call runs, and both get
// its result (the second through Replay once the job is done), each told
// its preference was applied (RFC 7240: the server honoured it, whether
// or not the job was running).
func TestDuplicateWaitsForTheRunningCall(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig())
	type answer struct {
		code    int
		applied string
		summary any
	}
	answers := make(chan answer, 2)
	for i := 0; i < 2; i++ {
		go func() {
			req, _ := http.NewRequest(http.MethodPost, s.base+"/documents/annual-filing/evaluate", nil)
			req.Header.Set("Prefer", "wait=10")
			resp, err := testClient.Do(req)
			if err != nil {
				answers <- answer{}
				return
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			var body struct {
				Result map[string]any `json:"result"`
			}
			_ = json.Unmarshal(raw, &body)
			answers <- answer{resp.StatusCode, resp.Header.Get("Preference-Applied"), body.Result["summary"]}
		}()
	}
	applied := 0
	for i := 0; i < 2; i++ {
		a := <-answers
		if a.code != http.StatusOK || a.summary == nil {
			t.Fatalf("answer %d: %+v, want 200 with the result", i, a)
		}
		if a.applied == "wait=10" {
			applied++
		}
	}
	if applied != 2 {
		t.Fatalf("%d answers say Preference-Applied: wait=10, want both", applied)
	}
	if exp, got := int64(1), s.stats(t).UpstreamCalls; exp != got {
		t.Fatalf("upstream calls %d, want %d", got, exp)
	}
}
