package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// check names the server it reads, and a server that would break the
// lock gets a warning that names it and says what to do (exit 3).
func TestCheckNamesTheEngine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fake   redistest.EngineFake
		server string // how check names it
		reason string // the warning, "" for none
	}{
		{"Valkey", redistest.FakeValkey8, "Valkey 8.0.1", ""},
		{"Dragonfly non-atomic", redistest.FakeDragonfly("disable-atomicity"), "Dragonfly df-v1.34.1", gate.WarnScriptsNotAtomic},
		{"KeyDB active replica", redistest.FakeKeyDBActiveReplica, "KeyDB 6.3.4", gate.WarnMultiMaster},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.FakeServer(t, tc.fake.Answer)
			r := runCLI(t, nil, "--redis", "redis://"+srv.Addr(), "check")
			if !strings.Contains(r.stdout, "server: "+tc.server+" on "+srv.Addr()+"\n") {
				t.Fatalf("check should name the server %q: %q %q", tc.server, r.stdout, r.stderr)
			}
			if tc.reason == "" {
				mustOK(t, r)
				return
			}
			if exp := "warning: " + tc.reason + ": gate: " + tc.server + " on " + srv.Addr(); r.code != exitNotMet || !strings.Contains(r.stdout, exp) {
				t.Fatalf("exp exit 3 and %q, got %d %q", exp, r.code, r.stdout)
			}
			r = runCLI(t, nil, "--redis", "redis://"+srv.Addr(), "--json", "check")
			var j struct {
				Servers  []string `json:"servers"`
				Warnings []struct {
					Reason, Engine, Version string
				} `json:"warnings"`
			}
			if err := json.Unmarshal([]byte(r.stdout), &j); err != nil || len(j.Servers) != 1 || !strings.HasPrefix(j.Servers[0], tc.server) {
				t.Fatalf("check --json: %q, %v", r.stdout, err)
			}
			found := false
			for _, w := range j.Warnings {
				if w.Reason == tc.reason && tc.server == w.Engine+" "+w.Version {
					found = true
				}
			}
			if !found {
				t.Fatalf("check --json: no %s warning with the engine: %q", tc.reason, r.stdout)
			}
		})
	}
}

// What a server says about itself (its version, a policy, an error reply)
// is printed without its control characters, as text and as JSON.
func TestCheckPrintsServerTextSafely(t *testing.T) {
	hostile := redistest.FakeValkey8
	hostile.Info = strings.Replace(strings.Replace(hostile.Info, "valkey_version:8.0.1", "valkey_version:8.0.1\x1b]0;pwned\x07\x1b[2J", 1),
		"maxmemory:1073741824", "maxmemory:0", 1)
	hostile.Config = redistest.Persisting(map[string]string{"maxmemory-policy": "allkeys-lru\x1b[31m"})
	srv := redistest.FakeServer(t, hostile.Answer)
	for _, args := range [][]string{{"check"}, {"--json", "check"}} {
		r := runCLI(t, nil, append([]string{"--redis", "redis://" + srv.Addr()}, args...)...)
		if r.code != exitNotMet || !strings.Contains(r.stdout, gate.WarnNoMaxmemory) || !strings.Contains(r.stdout, gate.WarnEvictionPolicy) {
			t.Fatalf("%v: exp exit 3 with %s and %s, got %d %q %q", args, gate.WarnNoMaxmemory, gate.WarnEvictionPolicy, r.code, r.stdout, r.stderr)
		}
		if strings.ContainsAny(r.stdout+r.stderr, "\x1b\x07") {
			t.Errorf("%v: raw control characters in the output: %q", args, r.stdout)
		}
	}
}
