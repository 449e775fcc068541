package gate_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// Check names the engine behind each server and warns, with what to do,
// where it would break the lock, against servers that answer as each
// engine does.
func TestCheckEngines(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fake    redistest.EngineFake
		engine  string
		version string
		want    map[string]string // engine warning reason -> words of the fix its message must hold
	}{
		{"Redis 6.2", redistest.FakeRedis62, "Redis", "6.2.14", map[string]string{gate.WarnServerVersion: "Redis 7.0 or later"}},
		// KeyDB 6.3 is a Redis 6.2 fork: it refuses SET NX GET too.
		{"KeyDB active replica", redistest.FakeKeyDBActiveReplica, "KeyDB", "6.3.4", map[string]string{gate.WarnMultiMaster: "active-replica no", gate.WarnServerVersion: "Redis 7.0 or later"}},
		{"Valkey 8", redistest.FakeValkey8, "Valkey", "8.0.1", nil},
		{"Dragonfly", redistest.FakeDragonfly(""), "Dragonfly", "df-v1.34.1", nil},
		{"Dragonfly disable-atomicity", redistest.FakeDragonfly("disable-atomicity"), "Dragonfly", "df-v1.34.1", map[string]string{gate.WarnScriptsNotAtomic: "without disable-atomicity"}},
		{"Garnet without --lua", redistest.FakeGarnet(false), "Garnet", "1.0.84", map[string]string{gate.WarnScriptsNotAtomic: "--lua --lua-transaction-mode"}},
		{"Garnet with --lua", redistest.FakeGarnet(true), "Garnet", "1.0.84", map[string]string{gate.WarnScriptsUnchecked: "--lua-transaction-mode"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.FakeServer(t, tc.fake.Answer)
			g, obs := checkGate(t, srv.Client(t))
			warns, err := g.Check(context.Background())
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			got := map[string]gate.Warning{}
			for _, w := range warns {
				switch w.Reason {
				case gate.WarnServerVersion, gate.WarnMultiMaster, gate.WarnScriptsNotAtomic, gate.WarnScriptsUnchecked:
					if _, dup := got[w.Reason]; dup {
						t.Errorf("two %s warnings: %v", w.Reason, warns)
					}
					got[w.Reason] = w
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("engine warnings: exp %v, got %v", tc.want, got)
			}
			events := map[string]int{}
			for _, e := range obs.kinds(gate.EventWarning) {
				events[e.Reason]++
			}
			for reason, fix := range tc.want {
				w, ok := got[reason]
				if !ok {
					t.Fatalf("exp a %s warning, got %v", reason, warns)
				}
				if w.Engine != tc.engine || w.Version != tc.version || w.Addr != srv.Addr() {
					t.Errorf("%s: exp %s %s on %s, got %q %q on %q", reason, tc.engine, tc.version, srv.Addr(), w.Engine, w.Version, w.Addr)
				}
				if exp := tc.engine + " " + tc.version + " on " + srv.Addr(); !strings.Contains(w.Message, exp) {
					t.Errorf("message %q should name the server (%q)", w.Message, exp)
				}
				if !strings.Contains(w.Message, fix) {
					t.Errorf("message %q should say what to do (%q)", w.Message, fix)
				}
				if events[reason] != 1 {
					t.Errorf("%s events: exp 1, got %d", reason, events[reason])
				}
			}
		})
	}
}

// A real redis-server 7 is named as Redis and gets no engine warning.
func TestCheckRealRedisIsNoEngineWarning(t *testing.T) {
	s := redistest.Server(t, redistest.WithArgs("--appendonly", "yes"))
	g, _ := checkGate(t, s.Client(t))
	warns, err := g.Check(context.Background())
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if len(warns) != 0 {
		t.Fatalf("redis-server 7 with appendonly and maxmemory: exp no warnings, got %v", warns)
	}
}

// INFO refused (an ACL without +info): Check says what it could not tell.
func TestCheckInfoRefused(t *testing.T) {
	fake := redistest.FakeRedis62
	srv := redistest.FakeServer(t, func(cmd []string) any {
		if cmd[0] == "INFO" {
			return errors.New("NOPERM User retrygate has no permissions to run the 'info' command")
		}
		return fake.Answer(cmd)
	})
	g, _ := checkGate(t, srv.Client(t))
	warns, err := g.Check(context.Background())
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if len(warns) != 1 || warns[0].Reason != gate.WarnUnchecked || !strings.Contains(warns[0].Message, "+info") {
		t.Fatalf("exp one %s warning naming +info, got %v", gate.WarnUnchecked, warns)
	}
	if exp := "cannot read INFO on " + srv.Addr() + " (NOPERM"; !strings.Contains(warns[0].Message, exp) {
		t.Errorf("message %q, want it to name the server: %q", warns[0].Message, exp)
	}
}

// Check warns about a server without maxmemory, whose memory a flood of
// distinct job ids can take, and about one nearly full, which will refuse
// every new job; a server that does not report its memory (Garnet) is not
// guessed about.
func TestCheckMemory(t *testing.T) {
	withMemory := func(used, limit string) redistest.EngineFake {
		e := redistest.FakeValkey8
		e.Info = strings.Replace(strings.Replace(e.Info, "used_memory:1002848", "used_memory:"+used, 1),
			"maxmemory:1073741824", "maxmemory:"+limit, 1)
		return e
	}
	for _, tc := range []struct {
		name string
		fake redistest.EngineFake
		exp  string // the memory warning, "" for none
		fix  string
	}{
		{"no maxmemory", withMemory("1002848", "0"), gate.WarnNoMaxmemory, "set maxmemory"},
		{"nearly full", withMemory("970000000", "1000000000"), gate.WarnMemoryNearlyFull, "uses 970000000 of its maxmemory 1000000000 bytes (97 %)"},
		{"at the line", withMemory("900000000", "1000000000"), gate.WarnMemoryNearlyFull, "uses 900000000 of its maxmemory 1000000000 bytes (90 %): once full it refuses every new job with OOM; raise maxmemory"},
		{"room left", withMemory("899999999", "1000000000"), "", ""},
		{"not reported", redistest.FakeGarnet(true), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.FakeServer(t, tc.fake.Answer)
			g, _ := checkGate(t, srv.Client(t))
			warns, err := g.Check(context.Background())
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			var got []gate.Warning
			for _, w := range warns {
				if w.Reason == gate.WarnNoMaxmemory || w.Reason == gate.WarnMemoryNearlyFull {
					got = append(got, w)
				}
			}
			if tc.exp == "" {
				if len(got) != 0 {
					t.Fatalf("exp no memory warning, got %v", got)
				}
				return
			}
			if len(got) != 1 || got[0].Reason != tc.exp {
				t.Fatalf("exp one %s warning, got %v", tc.exp, got)
			}
			if !strings.Contains(got[0].Message, "Valkey 8.0.1 on "+srv.Addr()) || !strings.Contains(got[0].Message, tc.fix) {
				t.Errorf("message %q should name the server and say %q", got[0].Message, tc.fix)
			}
		})
	}
}

// The same against real redis-servers: without maxmemory, with room, and
// with maxmemory just above what it uses.
func TestCheckMemoryRealRedis(t *testing.T) {
	memoryWarnings := func(t *testing.T, s *redistest.Srv) []gate.Warning {
		t.Helper()
		g, _ := checkGate(t, s.Client(t))
		warns, err := g.Check(context.Background())
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		var got []gate.Warning
		for _, w := range warns {
			if w.Reason != gate.WarnNoPersistence {
				got = append(got, w)
			}
		}
		return got
	}
	t.Run("no maxmemory", func(t *testing.T) {
		s := redistest.Server(t, redistest.WithArgs("--maxmemory", "0"))
		got := memoryWarnings(t, s)
		if len(got) != 1 || got[0].Reason != gate.WarnNoMaxmemory || got[0].Engine != "Redis" || got[0].Addr != s.Addr() {
			t.Fatalf("exp one %s warning on Redis at %s, got %v", gate.WarnNoMaxmemory, s.Addr(), got)
		}
	})
	t.Run("room left", func(t *testing.T) {
		s := redistest.Server(t, redistest.WithArgs("--maxmemory", "1gb"))
		if got := memoryWarnings(t, s); len(got) != 0 {
			t.Fatalf("exp no warning, got %v", got)
		}
	})
	t.Run("nearly full", func(t *testing.T) {
		s := redistest.Server(t)
		ctx := context.Background()
		admin := s.Client(t)
		used, err := admin.InfoMap(ctx, "memory").Result()
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.ParseInt(used["Memory"]["used_memory"], 10, 64)
		if err != nil {
			t.Fatalf("used_memory: %v (%v)", err, used)
		}
		// 5 % of room: far inside the 10 % the warning allows, far
		// outside anything the check's own connections use.
		if err := admin.ConfigSet(ctx, "maxmemory", strconv.FormatInt(n+n/20, 10)).Err(); err != nil {
			t.Fatal(err)
		}
		got := memoryWarnings(t, s)
		if len(got) != 1 || got[0].Reason != gate.WarnMemoryNearlyFull {
			t.Fatalf("exp one %s warning, got %v", gate.WarnMemoryNearlyFull, got)
		}
	})
}

// What a server says about itself reaches logs and terminals: a version
// or an error reply with control characters is escaped, in every field.
func TestCheckWarningsArePrintable(t *testing.T) {
	hostile := redistest.FakeValkey8
	hostile.Info = strings.Replace(strings.Replace(redistest.FakeValkey8.Info, "valkey_version:8.0.1", "valkey_version:8.0.1\x1b]0;pwned\x07\x1b[2J\xff", 1),
		"maxmemory:1073741824", "maxmemory:0", 1)
	hostile.Config = redistest.Persisting(map[string]string{"maxmemory-policy": "allkeys-lru\x1b[31m"})
	srv := redistest.FakeServer(t, hostile.Answer)
	g, obs := checkGate(t, srv.Client(t))
	warns, err := g.Check(context.Background())
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	reasons := map[string]bool{}
	for _, w := range warns {
		reasons[w.Reason] = true
		for _, f := range []string{w.Message, w.Engine, w.Version, w.Policy} {
			if strings.ContainsAny(f, "\x1b\x07\r\n") || !utf8.ValidString(f) || strings.ContainsRune(f, utf8.RuneError) {
				t.Errorf("%s: a field holds a control character or a byte that is not UTF-8: %q", w.Reason, f)
			}
		}
		// Escaped as in a Go string, so the operator reads what came.
		if exp := `8.0.1\x1b]0;pwned\a\x1b[2J\xff`; w.Version != exp {
			t.Errorf("%s: version %q, want %q", w.Reason, w.Version, exp)
		}
	}
	for _, e := range obs.kinds(gate.EventWarning) {
		if strings.ContainsAny(e.Err.Error(), "\x1b\x07") {
			t.Errorf("event %s: %q", e.Reason, e.Err)
		}
	}
	if !reasons[gate.WarnNoMaxmemory] || !reasons[gate.WarnEvictionPolicy] {
		t.Fatalf("exp %s and %s warnings, got %v", gate.WarnNoMaxmemory, gate.WarnEvictionPolicy, warns)
	}
}

// Where CONFIG GET does not say the maxmemory-policy (refused by an ACL
// with +info only; Dragonfly, which answers an empty map), INFO's memory
// section does, and Check judges it.
func TestCheckPolicyFromInfo(t *testing.T) {
	cacheMode := redistest.FakeDragonfly("")
	cacheMode.Info = strings.Replace(strings.Replace(cacheMode.Info, "cache_mode:store", "cache_mode:cache", 1),
		"maxmemory_policy:noeviction", "maxmemory_policy:eviction", 1)
	refused := redistest.FakeValkey8
	refused.Info = strings.Replace(refused.Info, "maxmemory_policy:noeviction", "maxmemory_policy:allkeys-lru", 1)
	noConfig := func(e redistest.EngineFake) func([]string) any {
		return func(cmd []string) any {
			if cmd[0] == "CONFIG" {
				return errors.New("NOPERM User retrygate has no permissions to run the 'config|get' command")
			}
			return e.Answer(cmd)
		}
	}
	for _, tc := range []struct {
		name   string
		answer func([]string) any
		policy string // the WarnEvictionPolicy's, "" for none
		fix    string
	}{
		{"Dragonfly", redistest.FakeDragonfly("").Answer, "", ""},
		{"Dragonfly --cache_mode", cacheMode.Answer, "eviction", "without --cache_mode"},
		{"CONFIG refused", noConfig(refused), "allkeys-lru", "use noeviction"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.FakeServer(t, tc.answer)
			g, _ := checkGate(t, srv.Client(t))
			warns, err := g.Check(context.Background())
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			var policy []gate.Warning
			for _, w := range warns {
				if w.Reason == gate.WarnEvictionPolicy || (w.Reason == gate.WarnUnchecked && strings.Contains(w.Message, "maxmemory-policy")) {
					policy = append(policy, w)
				}
			}
			if tc.policy == "" {
				if len(policy) != 0 {
					t.Fatalf("exp no policy warning, got %v", policy)
				}
				return
			}
			if len(policy) != 1 || policy[0].Reason != gate.WarnEvictionPolicy || policy[0].Policy != tc.policy ||
				!strings.Contains(policy[0].Message, tc.fix) || policy[0].Addr != srv.Addr() {
				t.Fatalf("exp one %s warning for %q saying %q, got %v", gate.WarnEvictionPolicy, tc.policy, tc.fix, policy)
			}
		})
	}
}

// A KeyDB that refuses CONFIG GET still says it is an active replica in
// INFO's role (Snapchat/KeyDB v6.3.4 src/server.cpp: "role:active-replica").
func TestCheckKeyDBActiveReplicaFromInfo(t *testing.T) {
	srv := redistest.FakeServer(t, func(cmd []string) any {
		if cmd[0] == "CONFIG" {
			return errors.New("NOPERM User retrygate has no permissions to run the 'config|get' command")
		}
		return redistest.FakeKeyDBActiveReplica.Answer(cmd)
	})
	g, _ := checkGate(t, srv.Client(t))
	warns, err := g.Check(context.Background())
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	for _, w := range warns {
		if w.Reason == gate.WarnMultiMaster && w.Engine == "KeyDB" {
			return
		}
	}
	t.Fatalf("exp a %s warning, got %v", gate.WarnMultiMaster, warns)
}
