// Package redistest starts Redis backends for tests: real redis-server
// processes (single or cluster), in-process miniredis instances, and the
// standard matrix of all three that state-machine tests loop over.
//
// It is test-only infrastructure: import it from _test.go files only.
//
// Real servers listen on free 127.0.0.1 ports (never fixed ones; a port
// clash at startup is retried on a new port), keep their files in a temp
// dir, persist nothing, and are stopped in t.Cleanup. Startup waits by
// polling under a deadline, never by sleeping a fixed time.
//
// Where redis-server (or, for clusters, redis-cli) is not on PATH, tests
// that need it are skipped, unless RETRYGATE_REQUIRE_REDIS=1, where they
// fail instead: set it in CI so a missing install cannot pass silently.
// RETRYGATE_TARGETS=miniredis (or miniredis,redis) narrows the backends
// to those listed: Targets leaves the others out and tests that need them
// skip, even with RETRYGATE_REQUIRE_REDIS=1. It is for fast repeated runs
// such as make mutate.
//
// Typical times on a 2-core machine under -race: a single server starts
// in 30-40 ms and stops (SIGTERM) in about 100 ms; a 3-master cluster
// without replicas is ready in 2-3 s, and 3 masters with a replica each
// in about 3 s, most of it spent in redis-cli --cluster create, which
// sleeps at least 2 s; a manual failover takes 0.5-1 s. A restarted
// cluster master reports cluster_state:ok only about 2 s after it is back
// (Redis holds a restarted master unwritable that long), so Restart then
// WaitOK on a master takes about 2 s.
//
// # Shared backends
//
// [Targets] starts one real server and one 3-master cluster per test
// binary, lazily on first use, and shares them across tests, since a
// cluster per test would be too slow. Tests must therefore keep to their
// own keys: build them with [UniqueKey] or [Prefix]. Packages that use
// Targets should stop the shared backends at exit with
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
//
// or call [Shutdown] after m.Run in their own TestMain. Without it the
// servers are still killed when the test binary exits (on Linux, through
// the parent-death signal), but their temp dirs are left behind.
//
// All exported functions and methods are safe for concurrent use.
package redistest
