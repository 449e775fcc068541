package redistest

import (
	"errors"
	"strings"
)

// EngineFake answers as one engine does: HELLO, INFO, CONFIG GET and
// scripts, with the replies its sources write (cited at each engine
// below). The INFO texts keep each source's fields and order for the
// sections gate.Check reads (Server, Memory, Replication, KeyDB's own);
// the counters in between are cut; version numbers and counters are
// examples. Serve it with FakeServer(t, e.Answer).
type EngineFake struct {
	Hello  Map               // HELLO's reply; nil: an unknown command
	Info   string            // "\n" line ends; sent with "\r\n"
	Config map[string]string // CONFIG GET; a parameter not here gets an empty map
	// Script is the reply to EVAL (EVALSHA answers NOSCRIPT first, as a
	// server that has not seen the script does, unless ScriptErr).
	Script    any
	ScriptErr error // EVAL's and EVALSHA's reply when set
}

// Answer is a FakeServer answer function.
func (e EngineFake) Answer(cmd []string) any {
	switch cmd[0] {
	case "HELLO":
		if e.Hello == nil {
			return UnknownCommand(cmd)
		}
		return e.Hello
	case "CLIENT":
		return Status("OK")
	case "PING":
		return Status("PONG")
	case "INFO":
		return strings.ReplaceAll(e.Info, "\n", "\r\n")
	case "CONFIG":
		if len(cmd) == 3 && strings.EqualFold(cmd[1], "GET") {
			if v, ok := e.Config[cmd[2]]; ok {
				return Map{{cmd[2], v}}
			}
			return Map{}
		}
	case "EVALSHA":
		if e.ScriptErr != nil {
			return e.ScriptErr
		}
		return errors.New("NOSCRIPT No matching script. Please use EVAL.")
	case "EVAL":
		if e.ScriptErr != nil {
			return e.ScriptErr
		}
		return e.Script
	}
	return UnknownCommand(cmd)
}

// Persisting is the CONFIG GET of a server that persists and evicts
// nothing, so that only what a test is about is warned about.
func Persisting(extra map[string]string) map[string]string {
	m := map[string]string{"maxmemory-policy": "noeviction", "appendonly": "yes", "save": ""}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

// FakeRedis62 answers as redis-server 6.2.14.
//
// Redis 6.2.14's INFO, from a capture of a real server in
// krisjey/armedis src/test/java/com/github/armedis/redis/RedisInfoVoTest.java
// (maxmemory set here: that capture has none).
var FakeRedis62 = EngineFake{
	Info: `# Server
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
	Config: Persisting(nil),
}

// FakeKeyDBActiveReplica answers as KeyDB 6.3.4 with active-replica yes.
//
// KeyDB 6.3.4 with active-replica yes. INFO: Snapchat/KeyDB tag v6.3.4,
// src/server.cpp genRedisInfoString ("# Server" redis_version is KEYDB_SET_VERSION,
// src/version.h "6.3.4"; "role:active-replica" for an active replica with a
// master; the "# KeyDB" section with mvcc_depth). CONFIG GET active-replica:
// src/config.cpp configGetCommand. Set up as docs.keydb.dev/docs/multi-master
// shows (active-replica yes, multi-master yes).
var FakeKeyDBActiveReplica = EngineFake{
	Info: `# Server
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
	Config: Persisting(map[string]string{"active-replica": "yes"}),
}

// FakeValkey8 answers as Valkey 8.0.1.
//
// Valkey 8.0.1: INFO from valkey-io/valkey src/server.c genValkeyInfoString
// (redis_version is the compatibility version 7.2.4, src/version.h;
// server_name and valkey_version its own), HELLO from src/networking.c
// helloCommand ("server" "valkey" unless extended-redis-compatibility).
var FakeValkey8 = EngineFake{
	Hello: Map{{"server", "valkey"}, {"version", "8.0.1"}, {"proto", 3}, {"id", 5}, {"mode", "standalone"}, {"role", "master"}, {"modules", []any{}}},
	Info: `# Server
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
	Config: Persisting(nil),
}

// FakeDragonfly answers as Dragonfly v1.34.1 started with
// --default_lua_flags=defaultLuaFlags ("" for none).
//
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
func FakeDragonfly(defaultLuaFlags string) EngineFake {
	e := EngineFake{
		Hello: Map{{"server", "redis"}, {"version", "7.4.0"}, {"dragonfly_version", "df-v1.34.1"}, {"proto", 3}, {"id", 7}, {"mode", "standalone"}, {"role", "master"}},
		Info: `# Server
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
		Script: int64(0),
	}
	if defaultLuaFlags == "" {
		e.Script = errors.New("ERR Error running script (call to 0b9a5f8fd8b1e0d4ae7b0cdf1a0e2d7e4ffa8c3b): script tried accessing undeclared key, key: retrygate-check-probe")
	}
	return e
}

// FakeGarnet answers as Garnet 1.0.84, started with --lua or not.
//
// Garnet: INFO and HELLO from microsoft/garnet at e508a41
// (libs/server/Metrics/Info/GarnetInfoMetrics.cs PopulateServerInfo:
// garnet_version, server_name "garnet", redis_version "7.4.3"
// (libs/host/GarnetServer.cs); its Memory section has no used_memory or
// maxmemory). CONFIG GET: libs/server/Config/RuntimeServerConfig.cs
// (appendonly, save ""; no maxmemory-policy, nor --lua-transaction-mode).
// Without --lua, EVAL and EVALSHA answer RESP_ERR_LUA_DISABLED
// (libs/server/Lua/LuaCommands.cs CheckLuaEnabled, libs/server/Resp/CmdStrings.cs).
// --lua-transaction-mode ("Run Lua scripts as a transaction (lock keys -
// run script - unlock keys)", off by default: libs/host/defaults.conf):
// https://microsoft.github.io/garnet/docs/getting-started/configuration;
// nothing a client can read says whether it is on.
func FakeGarnet(lua bool) EngineFake {
	e := EngineFake{
		Hello: Map{{"server", "redis"}, {"version", "7.4.3"}, {"garnet_version", "1.0.84"}, {"proto", 3}, {"id", 3}, {"mode", "standalone"}, {"role", "master"}, {"modules", []any{}}},
		Info: `# Server
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
		Config: map[string]string{"appendonly": "yes", "save": ""},
		Script: int64(0),
	}
	if !lua {
		e.ScriptErr = errors.New("ERR This instance has Lua scripting support disabled")
	}
	return e
}
