package httpmw

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
)

// problemJSON is the problem document as encoding/json writes it: the
// reference appendProblem is held to byte for byte.
type problemJSON struct {
	Type              string  `json:"type"`
	Title             string  `json:"title"`
	Status            int     `json:"status"`
	Detail            string  `json:"detail,omitempty"`
	JobState          string  `json:"job_state,omitempty"`
	RetryAfterSeconds *int64  `json:"retry_after_seconds,omitempty"`
	RetryAt           string  `json:"retry_at,omitempty"`
	Ahead             int     `json:"ahead,omitempty"`
	Attempts          *int    `json:"attempts,omitempty"`
	Reason            string  `json:"reason,omitempty"`
	StatusURL         string  `json:"status_url,omitempty"`
	Upstreams         []State `json:"upstreams,omitempty"`
}

// viaEncodingJSON renders ref with encoding/json, as WriteProblem did
// before it was written by hand.
func viaEncodingJSON(t *testing.T, ref Refusal) []byte {
	p := problemJSON{Type: ref.Type, Title: ref.Title, Status: ref.Status, Detail: ref.Detail,
		JobState: ref.State, Ahead: max(ref.Ahead, 0), Reason: safeReason(ref.Reason), StatusURL: ref.StatusURL,
		Upstreams: upstreamStates(ref.Upstreams)}
	if p.Type == "" {
		p.Type = "about:blank"
	}
	if p.Title == "" {
		p.Title = http.StatusText(ref.Status)
	}
	if ref.RetryAfter > 0 {
		s := retrySeconds(ref.RetryAfter)
		p.RetryAfterSeconds = &s
		if !ref.RetryAt.IsZero() {
			p.RetryAt = ref.RetryAt.UTC().Format(time.RFC3339)
		}
	}
	if ref.State == gate.CoolingDown.String() || ref.Attempts > 0 {
		a := ref.Attempts
		p.Attempts = &a
	}
	body, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return append(body, '\n')
}

// FuzzProblemMatchesEncodingJSON: the hand-written problem document is the
// one encoding/json writes, byte for byte, for any text in any member
// (control bytes, HTML, invalid UTF-8, U+2028), any state and wait, and
// with or without upstreams; and it is valid JSON.
func FuzzProblemMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{"", "Retry available in 4 min 12 s.", "a\"b\\c", "<script>&amp;</script>",
		"\x00\x01\b\f\n\r\t\x1f\x7f", "\xff\xfe", "\u2028\u2029", "é✓😀", "\xe2\x80", "\ufffd", "rate_limited"} {
		f.Add(s, s, 429, "cooling_down", int64(252e9), 3, "rate_limited", true, 0)
		f.Add("https://x.test/p/", s, 503, "upstream_cooling", int64(0), 0, s, false, 3)
		f.Add(s, "", 429, "ready", int64(4e9), 0, "", false, 12)
	}
	f.Fuzz(func(t *testing.T, text, url string, status int, state string, wait int64, attempts int, reason string, ups bool, ahead int) {
		ref := Refusal{Status: status, State: state, RetryAfter: time.Duration(wait), Attempts: attempts,
			Reason: reason, Detail: text, StatusURL: url, Ahead: ahead}
		if len(text)%2 == 0 {
			ref.Type, ref.Title = url, text
		}
		if ref.RetryAfter > 0 {
			ref.RetryAt = time.Unix(wait%(1<<40), 0)
		}
		if ups {
			ref.Upstreams = []gate.UpstreamStatus{
				{Upstream: text, State: gate.CoolingDown, Reason: reason, RetryAfter: time.Duration(wait)},
				{Upstream: url, State: gate.Paused, Probing: true},
				{Upstream: "b", State: gate.Ready, RetryAfter: time.Second},
			}
		}
		got, want := appendProblem(nil, ref), viaEncodingJSON(t, ref)
		if !bytes.Equal(got, want) {
			t.Fatalf("appendProblem:\n%q\nencoding/json:\n%q", got, want)
		}
		if !json.Valid(got) {
			t.Fatalf("invalid JSON: %q", got)
		}
	})
}

// TestBlockedOf: the refusal Acquire returns is found without an
// allocation (every refused request asks), a wrapped one still is, and
// another error has none.
func TestBlockedOf(t *testing.T) {
	b := &gate.BlockedError{Job: "j", State: gate.CoolingDown}
	if got := blockedOf(b); got != b {
		t.Fatalf("blockedOf(b) = %v", got)
	}
	if n := testing.AllocsPerRun(100, func() { _ = blockedOf(b) }); n != 0 {
		t.Errorf("blockedOf of a *gate.BlockedError allocates %v times, want 0", n)
	}
	if got := blockedOf(fmt.Errorf("wrapped: %w", b)); got != b {
		t.Errorf("blockedOf(wrapped b) = %v, want b", got)
	}
	if got := blockedOf(gate.ErrUnavailable); got != nil {
		t.Errorf("blockedOf(ErrUnavailable) = %v, want nil", got)
	}
}

// A caller refused because its turn in its upstream's line could not come
// within its wait is told its place and the expected wait: the member
// ahead, the sentence, Retry-After; a refusal of a caller not in line
// (or of a failed job, where waiting does not help) has no ahead.
func TestRefusalCarriesThePlaceInLine(t *testing.T) {
	c := newConfig("New", &gate.Gate{}, Options{Job: func(*http.Request) (string, error) { return "j", nil }})
	r, _ := http.NewRequest(http.MethodPost, "/", nil)
	for _, tc := range []struct {
		name   string
		b      gate.BlockedError
		member string
		detail string
	}{
		{"three ahead", gate.BlockedError{State: gate.UpstreamCooling, RetryAfter: 4 * time.Second, Ahead: 3},
			`,"ahead":3`, "3 callers are ahead of this one in line. Retry available in 4 s."},
		{"one ahead", gate.BlockedError{State: gate.CoolingDown, RetryAfter: 1500 * time.Millisecond, Ahead: 1},
			`,"ahead":1`, "1 caller is ahead of this one in line. Retry available in 2 s."},
		{"not in line", gate.BlockedError{State: gate.UpstreamCooling, RetryAfter: 4 * time.Second}, "", ""},
		{"failed", gate.BlockedError{State: gate.Failed, Ahead: 3}, "", "This job failed and will not be retried automatically."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ref := c.blocked(r, &tc.b)
			body := string(appendProblem(nil, ref))
			switch {
			case tc.member == "" && bytes.Contains([]byte(body), []byte(`"ahead"`)):
				t.Errorf("ahead written for a caller not in line: %s", body)
			case tc.member != "" && !bytes.Contains([]byte(body), []byte(tc.member)):
				t.Errorf("exp %s in %s", tc.member, body)
			}
			if tc.detail != "" && tc.detail != ref.Detail {
				t.Errorf("detail: exp %q, got %q", tc.detail, ref.Detail)
			}
			if tc.member != "" && ref.RetryAfter != tc.b.RetryAfter {
				t.Errorf("RetryAfter: exp %v, got %v", tc.b.RetryAfter, ref.RetryAfter)
			}
		})
	}
}
