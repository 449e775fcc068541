// Package pgtest starts real PostgreSQL servers for tests, the way
// redistest starts redis-server: on a free 127.0.0.1 port, with its data
// and its unix socket in a temp dir, fsync off, stopped in t.Cleanup (or
// by Main for the server shared by a test binary). It needs no driver:
// a test connects with the DSN it returns.
//
// The binaries (initdb, postgres, createdb) are taken from PATH, else
// from the newest /usr/lib/postgresql/<version>/bin, where Debian's
// postgresql package puts them without linking them into PATH. Where
// they are missing, tests skip, unless RETRYGATE_REQUIRE_POSTGRES=1,
// where they fail: CI sets it, so a missing install cannot pass
// silently.
//
// PostgreSQL refuses to run as root. Run as root (as CI and the dev
// machines are), the server runs as the unprivileged "postgres" user
// that Debian's package creates (the test process sets the child's
// credentials; no sudo or runuser), in a temp dir under os.TempDir()
// owned by that user. Without such a user, tests skip (or fail with
// RETRYGATE_REQUIRE_POSTGRES=1).
//
// The server runs postgres directly, not pg_ctl start, which would
// daemonise it: as the test binary's child it gets the parent-death
// signal on Linux, so a crashed or timed-out test leaves no server
// behind. Typical times on a 2-core machine: initdb and start together
// about 0.5 s, a new database (createdb from template0) about 0.1 s.
//
// It is test-only infrastructure: import it from _test.go files only.
// All exported functions and methods are safe for concurrent use.
package pgtest
