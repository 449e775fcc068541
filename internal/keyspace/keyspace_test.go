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

func TestPatternsEscapeGlob(t *testing.T) {
	if exp, got := `a\*b\?\[c\]:{*}:job`, JobPattern("a*b?[c]"); exp != got {
		t.Fatalf("exp %q, got %q", exp, got)
	}
	if exp, got := `a\*b\?\[c\]:upstream:{*}`, UpstreamPattern("a*b?[c]"); exp != got {
		t.Fatalf("exp %q, got %q", exp, got)
	}
}

func TestKeysRoundTrip(t *testing.T) {
	for _, name := range []string{"doc-1", "{x}", "a b\x00"} {
		if got, ok := JobFromKey("p", Job("p", name)); !ok || got != name {
			t.Errorf("JobFromKey(Job(%q)) = %q, %v", name, got, ok)
		}
		key, _ := Upstream("p", name)
		if got, ok := UpstreamFromKey("p", key); !ok || got != name {
			t.Errorf("UpstreamFromKey(Upstream(%q)) = %q, %v", name, got, ok)
		}
		if _, ok := UpstreamFromKey("p", key+":fails"); ok {
			t.Errorf("UpstreamFromKey took the failure window of %q for an upstream", name)
		}
		if _, ok := JobFromKey("p", key); ok {
			t.Errorf("JobFromKey took the upstream %q for a job", name)
		}
	}
}

// FuzzEncodeName: any job name round-trips, stays inside its hash tag and
// never encodes to another name's encoding.
func FuzzEncodeName(f *testing.F) {
	for _, s := range []string{"doc-1", "{", "}", "~", "~YQ", "a}:lock", "\x00\xff", "ünï", strings.Repeat("{", 64), strings.Repeat("é", 100)} {
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
		if want := "p:{" + ea + "}:job"; Job("p", a) != want {
			t.Fatalf("Job(%q) = %q, want %q", a, Job("p", a), want)
		}
		if want := "p:{" + ea + "}:done"; Done(Job("p", a)) != want {
			t.Fatalf("Done(%q) = %q, want %q", a, Done(Job("p", a)), want)
		}
		if want := "p:upstream:{u}:line:job:" + ea; LineMark("p", "u", Job("p", a)) != want {
			t.Fatalf("LineMark(%q) = %q, want %q", a, LineMark("p", "u", Job("p", a)), want)
		}
		if a != "" {
			key := Job("p", a)
			if job, ok := JobFromKey("p", key); !ok || job != a {
				t.Fatalf("JobFromKey(%q) = %q, %v", key, job, ok)
			}
		}
	})
}

// TestJobKeyOneAllocation: a job's key, encoded or not, is built in one
// allocation (an acquire builds one per call).
func TestJobKeyOneAllocation(t *testing.T) {
	for _, name := range []string{"doc-1", "tenant 42/documents/7", strings.Repeat("é", 300)} {
		if n := testing.AllocsPerRun(100, func() { _ = Job("retrygate", name) }); n != 1 {
			t.Errorf("Job(%.20q…) makes %v allocations, want 1", name, n)
		}
	}
}

// An upstream's line keys share the upstream's hash tag, so its scripts
// run on one cluster node.
func TestLineKeysShareTheUpstreamSlot(t *testing.T) {
	up, _ := Upstream("p", "a b")
	line, owners, meta, grants := Line("p", "a b")
	for _, k := range []string{line, owners, owners + ":owner", meta, grants + "owner"} {
		if !strings.HasPrefix(k, up+":") {
			t.Errorf("line key %q is not under the upstream's key %q", k, up)
		}
	}
}

// A line member decodes to its class, arrival, deadline, owner and tenant
// (which may contain ':'); anything else is refused, never half read.
func TestParseLineMember(t *testing.T) {
	for _, tc := range []struct {
		m  string
		ok bool
		e  LineMember
	}{
		{"063000000000004000000000017:1000:1700000000123:p1:acme", false, LineMember{}},
		{"063000000000000004000000000017:1000:1700000000123:p1:acme", true, LineMember{Class: 192, Seq: 17, Quantum: 1000, Deadline: 1700000000123, Owner: "p1", Tenant: "acme"}},
		{"255000000000000000000000000001:1:5:p:ten:ant", true, LineMember{Class: 0, Seq: 1, Quantum: 1, Deadline: 5, Owner: "p", Tenant: "ten:ant"}},
		{"127000000000000000000000000002:1000:5:p:", true, LineMember{Class: 128, Seq: 2, Quantum: 1000, Deadline: 5, Owner: "p"}},
		{"063000000000000004000000000017:q:5:p1:t", false, LineMember{}},
		{"063000000000000004000000000017:1000:soon:p1:acme", false, LineMember{}},
		{"063000000000000004000000000017:1000:5:p1", false, LineMember{}},
		{"256000000000000004000000000017:1000:5:p1:t", false, LineMember{}},
		{"06x000000000000004000000000017:1000:5:p1:t", false, LineMember{}},
	} {
		got, ok := ParseLineMember(tc.m)
		if ok != tc.ok || got != tc.e {
			t.Errorf("ParseLineMember(%q) = %+v, %v; want %+v, %v", tc.m, got, ok, tc.e, tc.ok)
		}
	}
}
