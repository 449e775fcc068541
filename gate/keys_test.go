package gate

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
		if got := encodeName(tt.in); got != tt.want {
			t.Errorf("encodeName(%q) = %q, want %q", tt.in, got, tt.want)
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
		ea, eb := encodeName(a), encodeName(b)
		if strings.ContainsAny(ea, "{}") {
			t.Fatalf("encodeName(%q) = %q breaks the hash tag", a, ea)
		}
		if got, ok := decodeName(ea); a != "" && (!ok || got != a) {
			t.Fatalf("decodeName(encodeName(%q)) = %q, %v", a, got, ok)
		}
		if a != b && ea == eb {
			t.Fatalf("%q and %q both encode to %q", a, b, ea)
		}
		if a != "" {
			key := "p:{" + ea + "}:lock"
			if job, ok := JobFromKey("p", key); !ok || job != a {
				t.Fatalf("JobFromKey(%q) = %q, %v", key, job, ok)
			}
		}
	})
}

func TestStateOf(t *testing.T) {
	tests := []struct {
		v        string
		st       State
		attempts int
		reason   string
	}{
		{"r:abc", Running, -1, ""},
		{"c:3:rate_limited", CoolingDown, 3, "rate_limited"},
		{"f:1:context_length_exceeded", Failed, 1, "context_length_exceeded"},
		{"d:", Done, -1, ""},
		{"c:rate_limited", CoolingDown, -1, "rate_limited"}, // written before values carried attempts
		{"c:x:y", CoolingDown, -1, "x:y"},
		{"garbage", Running, -1, ""}, // foreign value: held, never overwritten
		{"", Running, -1, ""},
	}
	for _, tt := range tests {
		st, a, r := stateOf(tt.v)
		if st != tt.st || a != tt.attempts || r != tt.reason {
			t.Errorf("stateOf(%q) = %v %d %q, want %v %d %q", tt.v, st, a, r, tt.st, tt.attempts, tt.reason)
		}
	}
}
