package keyspace

import "testing"

func TestUpstreamPatternEscapesGlob(t *testing.T) {
	if exp, got := `a\*b\?\[c\]\\:upstream:{*}`, UpstreamPattern(`a*b?[c]\`); exp != got {
		t.Fatalf("exp %q, got %q", exp, got)
	}
	if exp, got := `a\*:*`, PrefixPattern("a*"); exp != got {
		t.Fatalf("exp %q, got %q", exp, got)
	}
}

// TestUpstreamFromKey: only an upstream's own key names an upstream; its siblings
// (the failure window, wave counters, even one whose reason ends in '}')
// and job keys do not.
func TestUpstreamFromKey(t *testing.T) {
	key, fails := Upstream("p", "openai:prod")
	encKey, _ := Upstream("p", "a b\x00")
	lock := Job("p", "doc")
	for _, tc := range []struct {
		key, exp string
		ok       bool
	}{
		{key, "openai:prod", true},
		{encKey, "a b\x00", true},
		{fails, "", false},
		{key + ":wave:invalid_request", "", false},
		{key + ":wave:odd}", "", false},
		{lock, "", false},
		{"q:upstream:{openai:prod}", "", false},
		{"p:upstream:{~!!}", "", false}, // not base64
	} {
		got, ok := UpstreamFromKey("p", tc.key)
		if got != tc.exp || ok != tc.ok {
			t.Errorf("UpstreamFromKey(%q) = %q, %v; exp %q, %v", tc.key, got, ok, tc.exp, tc.ok)
		}
	}
}
