package keyspace

import "testing"

func TestScopePatternEscapesGlob(t *testing.T) {
	if exp, got := `a\*b\?\[c\]\\:scope:{*}`, ScopePattern(`a*b?[c]\`); exp != got {
		t.Fatalf("exp %q, got %q", exp, got)
	}
	if exp, got := `a\*:*`, PrefixPattern("a*"); exp != got {
		t.Fatalf("exp %q, got %q", exp, got)
	}
}

// TestScopeFromKey: only a scope's own key names a scope; its siblings
// (the failure window, wave counters, even one whose reason ends in '}')
// and job keys do not.
func TestScopeFromKey(t *testing.T) {
	key, fails := Scope("p", "openai:prod")
	encKey, _ := Scope("p", "a b\x00")
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
		{"q:scope:{openai:prod}", "", false},
		{"p:scope:{~!!}", "", false}, // not base64
	} {
		got, ok := ScopeFromKey("p", tc.key)
		if got != tc.exp || ok != tc.ok {
			t.Errorf("ScopeFromKey(%q) = %q, %v; exp %q, %v", tc.key, got, ok, tc.exp, tc.ok)
		}
	}
}
