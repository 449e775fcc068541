package gate_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// engineFake answers as one engine does: HELLO, INFO, CONFIG GET and
// scripts, with the replies its sources write (cited at each engine
// below). The INFO texts keep each source's fields and order for the
// sections Check reads (Server, Memory, Replication, KeyDB's own); the
// counters in between are cut.
type engineFake struct {
	hello  redistest.Map
	info   string            // "\n" line ends; sent with "\r\n"
	config map[string]string // CONFIG GET; a parameter not here gets an empty map
	// script is the reply to EVAL (EVALSHA answers NOSCRIPT first, as a
	// server that has not seen the script does, unless scriptErr).
	script    any
	scriptErr error // EVAL's and EVALSHA's reply when set
}

func (e engineFake) answer(cmd []string) any {
	switch cmd[0] {
	case "HELLO":
		if e.hello == nil {
			return redistest.UnknownCommand(cmd)
		}
		return e.hello
	case "CLIENT":
		return redistest.Status("OK")
	case "PING":
		return redistest.Status("PONG")
	case "INFO":
		return strings.ReplaceAll(e.info, "\n", "\r\n")
	case "CONFIG":
		if len(cmd) == 3 && strings.EqualFold(cmd[1], "GET") {
			if v, ok := e.config[cmd[2]]; ok {
				return redistest.Map{{cmd[2], v}}
			}
			return redistest.Map{}
		}
	case "EVALSHA":
		if e.scriptErr != nil {
			return e.scriptErr
		}
		return errors.New("NOSCRIPT No matching script. Please use EVAL.")
	case "EVAL":
		if e.scriptErr != nil {
			return e.scriptErr
		}
		return e.script
	}
	return redistest.UnknownCommand(cmd)
}

// persisting is the CONFIG GET of a server that persists and evicts
// nothing, so that only what a test is about is warned about.
func persisting(extra map[string]string) map[string]string {
	m := map[string]string{"maxmemory-policy": "noeviction", "appendonly": "yes", "save": ""}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// Redis 6.2.14's INFO, from a capture of a real server in
// krisjey/armedis src/test/java/com/github/armedis/redis/RedisInfoVoTest.java
// (maxmemory set here: that capture has none).
var redis62 = engineFake{
	info: `# Server
redis_version:6.2.14
redis_git_sha1:00000000
redis_git_dirty:0
redis_build_id:a712fce3205cb7ee
redis_mode:standalone
os:Linux 3.10.0-1160.105.1.el7.x86_64 x86_64
arch_bits:64

# Memory
used_memory:2406744
used_memory_human:2.30M
maxmemory:1073741824
maxmemory_human:1.00G
maxmemory_policy:noeviction

# Replication
role:master
connected_slaves:0
`,
	config: persisting(nil),
}

// KeyDB 6.3.4 with active-replica yes. INFO: Snapchat/KeyDB tag v6.3.4,
// src/server.cpp genRedisInfoString ("# Server" redis_version is KEYDB_SET_VERSION,
// src/version.h "6.3.4"; "role:active-replica" for an active replica with a
// master; the "# KeyDB" section with mvcc_depth). CONFIG GET active-replica:
// src/config.cpp configGetCommand. Set up as docs.keydb.dev/docs/multi-master
// shows (active-replica yes, multi-master yes).
var keydbActive = engineFake{
	info: `# Server
redis_version:6.3.4
redis_git_sha1:d1dff8c2
redis_git_dirty:1
redis_build_id:3c1e9c1a87b2bf74
redis_mode:standalone
os:Linux 5.15.0-91-generic x86_64
arch_bits:64
features:cluster_mget

# Memory
used_memory:2111664
maxmemory:1073741824
maxmemory_policy:noeviction

# Replication
role:active-replica
master_global_link_status:up
connected_masters:1

# KeyDB
mvcc_depth:0
`,
	config: persisting(map[string]string{"active-replica": "yes"}),
}

// Valkey 8.0.1: INFO from valkey-io/valkey src/server.c genValkeyInfoString
// (redis_version is the compatibility version 7.2.4, src/version.h;
// server_name and valkey_version its own), HELLO from src/networking.c
// helloCommand ("server" "valkey" unless extended-redis-compatibility).
var valkey8 = engineFake{
	hello: redistest.Map{{"server", "valkey"}, {"version", "8.0.1"}, {"proto", 3}, {"id", 5}, {"mode", "standalone"}, {"role", "master"}, {"modules", []any{}}},
	info: `# Server
redis_version:7.2.4
server_name:valkey
valkey_version:8.0.1
redis_git_sha1:00000000
redis_git_dirty:0
server_mode:standalone

# Memory
used_memory:1002848
maxmemory:1073741824
maxmemory_policy:noeviction

# Replication
role:master
`,
	config: persisting(nil),
}

// Dragonfly: INFO and HELLO from dragonflydb/dragonfly
// src/server/server_family.cc at f8eca6d ("redis_version" kRedisVersion
// "7.4.0", "dragonfly_version"; Memory: used_memory, maxmemory,
// maxmemory_policy "noeviction" unless --cache_mode). CONFIG GET answers
// only the flags registered with config_registry (src/server/main_service.cc):
// maxmemory-policy, appendonly and save are not, so it answers an empty map.
// A script that reads a key it does not declare is refused
// (src/server/main_service.cc CheckKeysDeclared, src/facade/error.h
// kUndeclaredKeyErr, wrapped as EvalInternal does: "Error running script
// (call to <sha>): ...") unless --default_lua_flags makes scripts
// allow-undeclared-keys or disable-atomicity (src/server/script_mgr.cc;
// https://dragonflydb.io/docs/managing-dragonfly/scripting).
func dragonfly(defaultLuaFlags string) engineFake {
	e := engineFake{
		hello: redistest.Map{{"server", "redis"}, {"version", "7.4.0"}, {"dragonfly_version", "df-v1.34.1"}, {"proto", 3}, {"id", 7}, {"mode", "standalone"}, {"role", "master"}},
		info: `# Server
redis_version:7.4.0
dragonfly_version:df-v1.34.1
redis_mode:standalone
arch_bits:64
process_id:1
multiplexing_api:iouring
tcp_port:6379

# Memory
used_memory:1193616
used_memory_human:1.14MiB
maxmemory:3221225472
maxmemory_human:3.00GiB
cache_mode:store
maxmemory_policy:noeviction

# Replication
role:master
`,
		script: int64(0),
	}
	if defaultLuaFlags == "" {
		e.script = errors.New("ERR Error running script (call to 0b9a5f8fd8b1e0d4ae7b0cdf1a0e2d7e4ffa8c3b): script tried accessing undeclared key, key: retrygate-check-probe")
	}
	return e
}

// Garnet: INFO and HELLO from microsoft/garnet at e508a41
// (libs/server/Metrics/Info/GarnetInfoMetrics.cs PopulateServerInfo:
// garnet_version, server_name "garnet", redis_version "7.4.3"
// (libs/host/GarnetServer.cs); its Memory section has no used_memory or
// maxmemory). CONFIG GET: libs/server/Config/RuntimeServerConfig.cs
// (appendonly, save ""; no maxmemory-policy, nor --lua-transaction-mode).
// Without --lua, EVAL and EVALSHA answer RESP_ERR_LUA_DISABLED
// (libs/server/Lua/LuaCommands.cs CheckLuaEnabled, libs/server/Resp/CmdStrings.cs).
func garnet(lua bool) engineFake {
	e := engineFake{
		hello: redistest.Map{{"server", "redis"}, {"version", "7.4.3"}, {"garnet_version", "1.0.84"}, {"proto", 3}, {"id", 3}, {"mode", "standalone"}, {"role", "master"}, {"modules", []any{}}},
		info: `# Server
garnet_version:1.0.84
server_name:garnet
os:Unix 6.8.0.1015
processor_count:4
arch_bits:64
uptime_in_seconds:42
redis_version:7.4.3
redis_mode:standalone

# Memory
system_page_size:4096
total_system_memory:8331419648
proc_physical_memory_size:174940160

# Replication
role:master
connected_slaves:0
`,
		config: map[string]string{"appendonly": "yes", "save": ""},
		script: int64(0),
	}
	if !lua {
		e.scriptErr = errors.New("ERR This instance has Lua scripting support disabled")
	}
	return e
}

// Check names the engine behind each server and warns, with what to do,
// where it would break the lock, against servers that answer as each
// engine does.
func TestCheckEngines(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fake    engineFake
		engine  string
		version string
		want    map[string]string // engine warning reason -> words of the fix its message must hold
	}{
		{"Redis 6.2", redis62, "Redis", "6.2.14", map[string]string{gate.WarnServerVersion: "Redis 7.0 or later"}},
		// KeyDB 6.3 is a Redis 6.2 fork: it refuses SET NX GET too.
		{"KeyDB active replica", keydbActive, "KeyDB", "6.3.4", map[string]string{gate.WarnMultiMaster: "active-replica no", gate.WarnServerVersion: "Redis 7.0 or later"}},
		{"Valkey 8", valkey8, "Valkey", "8.0.1", nil},
		{"Dragonfly", dragonfly(""), "Dragonfly", "df-v1.34.1", nil},
		{"Dragonfly disable-atomicity", dragonfly("disable-atomicity"), "Dragonfly", "df-v1.34.1", map[string]string{gate.WarnScriptsNotAtomic: "without disable-atomicity"}},
		{"Garnet without --lua", garnet(false), "Garnet", "1.0.84", map[string]string{gate.WarnScriptsNotAtomic: "--lua --lua-transaction-mode"}},
		{"Garnet with --lua", garnet(true), "Garnet", "1.0.84", map[string]string{gate.WarnScriptsUnchecked: "--lua-transaction-mode"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.FakeServer(t, tc.fake.answer)
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
	fake := redis62
	srv := redistest.FakeServer(t, func(cmd []string) any {
		if cmd[0] == "INFO" {
			return errors.New("NOPERM User retrygate has no permissions to run the 'info' command")
		}
		return fake.answer(cmd)
	})
	g, _ := checkGate(t, srv.Client(t))
	warns, err := g.Check(context.Background())
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if len(warns) != 1 || warns[0].Reason != gate.WarnUnchecked || !strings.Contains(warns[0].Message, "+info") {
		t.Fatalf("exp one %s warning naming +info, got %v", gate.WarnUnchecked, warns)
	}
}

// Check warns about a server without maxmemory, whose memory a flood of
// distinct job ids can take, and about one nearly full, which will refuse
// every new job; a server that does not report its memory (Garnet) is not
// guessed about.
func TestCheckMemory(t *testing.T) {
	withMemory := func(used, limit string) engineFake {
		e := valkey8
		e.info = strings.Replace(strings.Replace(e.info, "used_memory:1002848", "used_memory:"+used, 1),
			"maxmemory:1073741824", "maxmemory:"+limit, 1)
		return e
	}
	for _, tc := range []struct {
		name string
		fake engineFake
		exp  string // the memory warning, "" for none
		fix  string
	}{
		{"no maxmemory", withMemory("1002848", "0"), gate.WarnNoMaxmemory, "set maxmemory"},
		{"nearly full", withMemory("970000000", "1000000000"), gate.WarnMemoryNearlyFull, "raise maxmemory"},
		{"at the line", withMemory("900000000", "1000000000"), gate.WarnMemoryNearlyFull, "raise maxmemory"},
		{"room left", withMemory("899999999", "1000000000"), "", ""},
		{"not reported", garnet(true), "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.FakeServer(t, tc.fake.answer)
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
