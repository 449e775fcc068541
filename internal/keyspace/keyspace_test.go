package keyspace

import (
	"strings"
	"testing"
)

func TestEncodeName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"doc-1", "doc-1"},
		{"tenant:42/doc_7.v2", "tenant:42/doc_7.v2"},
		{"{doc}", "~e2RvY30"},
		{"~abc", "~fmFiYw"},
		{"a b", "~YSBi"},
		{"\x00", "~AA"},
	}
	for _, tt := range tests {
		if got := Encode(tt.in); got != tt.want {
			t.Errorf("Encode(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestLockPatternEscapesGlob(t *testing.T) {
	if exp, got := `a\*b\?\[c\]:{*}:lock`, LockPattern("a*b?[c]"); exp != got {
		t.Fatalf("exp %q, got %q", exp, got)
	}
}

// FuzzEncodeName: any job name round-trips, stays inside its hash tag and
// never encodes to another name's encoding.
func FuzzEncodeName(f *testing.F) {
	for _, s := range []string{"doc-1", "{", "}", "~", "~YQ", "a}:lock", "\x00\xff", "ünï", strings.Repeat("{", 64)} {
		f.Add(s, s+"x")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ea, eb := Encode(a), Encode(b)
		if strings.ContainsAny(ea, "{}") {
			t.Fatalf("Encode(%q) = %q breaks the hash tag", a, ea)
		}
		if got, ok := Decode(ea); a != "" && (!ok || got != a) {
			t.Fatalf("Decode(Encode(%q)) = %q, %v", a, got, ok)
		}
		if a != b && ea == eb {
			t.Fatalf("%q and %q both encode to %q", a, b, ea)
		}
		if a != "" {
			key := "p:{" + ea + "}:lock"
			if job, ok := JobFromLock("p", key); !ok || job != a {
				t.Fatalf("JobFromLock(%q) = %q, %v", key, job, ok)
			}
		}
	})
}
