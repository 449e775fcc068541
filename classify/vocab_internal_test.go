package classify

import (
	"slices"
	"strings"
	"testing"
)

// TestWords: how text and codes are split into the words the vocabulary
// reads.
func TestWords(t *testing.T) {
	tests := []struct {
		s   string
		exp []string
	}{
		{"InsufficientBalance", []string{"insufficient", "balance"}},
		{"insufficient_balance", []string{"insufficient", "balance"}},
		{"APIKey", []string{"api", "key"}},
		{"invalidAPIKey", []string{"invalid", "api", "key"}},
		{"HTTP2Error", []string{"http2", "error"}},
		{"Throttling.RateQuota", []string{"throttling", "rate", "quota"}},
		{"  余额不足 ", []string{"余额不足"}},
		// A JSON pointer is an address, and "Location:" its label.
		{"want string, Location: /properties/messages/items/type.", []string{"want", "string"}},
		{"#/texts/0: expected maxLength", []string{"expected", "max", "length"}},
		{"at /messages/0/content", []string{"at"}},
		{"and/or /v1 stays", []string{"and", "or", "v1", "stays"}},
		{"user location /unsupported", []string{"user", "location", "unsupported"}},
		{"at /a1/b /zz/c /AB/d /ZZ/e /0x/f /9x/g end", []string{"at", "end"}}, // each end of each range
		{"at /-x/y /_x/y", []string{"at", "x", "y", "x", "y"}},                // a segment must start with a letter or a digit
		{"and /", []string{"and"}},
		{": /a/b no label", []string{"no", "label"}},
		{"instancePath: /a/b", []string{"instance"}},
		// Only a validator's words label a pointer: an account's stay
		// (fuzzed account phrases).
		{"no models loaded: /0/1", []string{"no", "models", "loaded"}},
		{"billing: /0/", []string{"billing"}},
		{"Location: /a/b", nil},
		{"", nil},
	}
	for _, tc := range tests {
		if got := words(tc.s); !slices.Equal(got, tc.exp) {
			t.Errorf("words(%q): exp %q, got %q", tc.s, tc.exp, got)
		}
	}
	// The bound holds whichever way the last word ends: at a separator or
	// at a change of case.
	for _, s := range []string{strings.Repeat("a ", 2*maxWords), strings.Repeat("aB", 2*maxWords)} {
		if got := len(words(s)); got != maxWords {
			t.Errorf("words of %.8q...: %d words, want %d", s, got, maxWords)
		}
	}
}

// TestTermWindows: "near" is within window words on either side, "after"
// only after; a phrase is not near itself; "not" cancels on either side.
func TestTermWindows(t *testing.T) {
	near := compiled{phrase: [][]string{{"cap*"}}, near: [][]string{{"over"}, {"capped"}}, window: 2}
	after := compiled{phrase: [][]string{{"model"}}, after: [][]string{{"missing"}}, window: 2}
	not := compiled{phrase: [][]string{{"budget"}}, not: []string{"tokens"}}
	long := compiled{phrase: [][]string{{"spend", "cap"}}, near: [][]string{{"hit"}}, window: 1}
	tests := []struct {
		term *compiled
		text string
		exp  bool
	}{
		{&near, "cap over", true},
		{&near, "cap x over", true},
		{&near, "cap x y over", false},
		{&near, "over cap", true},
		{&near, "over x cap", true},
		{&near, "over x y cap", false},
		{&near, "capped", false}, // the phrase's own word is not its neighbour
		{&after, "model missing", true},
		{&after, "model x missing", true},
		{&after, "model x y missing", false},
		{&after, "missing model", false},
		{&long, "hit spend cap", true},
		{&long, "hit x spend cap", false},
		{&long, "spend cap hit", true},
		{&long, "spend cap x hit", false},
		{&not, "budget", true},
		{&not, "budget tokens", false},
		{&not, "tokens budget", false},
		{&not, "x budget y", true},
	}
	for _, tc := range tests {
		if got := tc.term.matches(words(tc.text)); got != tc.exp {
			t.Errorf("%+v on %q: exp %v, got %v", *tc.term, tc.text, tc.exp, got)
		}
	}
}

// TestWordMatch: a pattern word is exact, a prefix ("suspend*"), or exact
// but for one free letter wherever its '?' stands.
func TestWordMatch(t *testing.T) {
	tests := []struct {
		p, w string
		exp  bool
	}{
		{"balance", "balance", true},
		{"balance", "balances", false},
		{"suspend*", "suspended", true},
		{"suspend*", "suspend", true},
		{"suspend*", "suspen", false},
		{"unauthori?ed", "unauthorised", true},
		{"unauthori?ed", "unauthorized", true},
		{"unauthori?ed", "unauthorizedx", false},
		{"unauthori?ed", "unauthoried", false},
		{"?ey", "key", true},
		{"?ey", "keys", false},
	}
	for _, tc := range tests {
		if got := wordMatch(tc.p, tc.w); got != tc.exp {
			t.Errorf("wordMatch(%q, %q): exp %v, got %v", tc.p, tc.w, tc.exp, got)
		}
	}
}
