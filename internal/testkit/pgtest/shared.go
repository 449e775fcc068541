package pgtest

import (
	"os"
	"sync"
	"testing"
)

// shared is the server Shared starts at most once per test binary.
var shared struct {
	once sync.Once
	srv  *Srv
	err  error
}

// Shared returns the test binary's shared server, started on first use
// (initdb costs about a second, so packages with several tests share
// one); tests keep apart with Database. It skips t where PostgreSQL is
// missing (see Require). Stop it at exit with Main.
func Shared(t testing.TB) *Srv {
	t.Helper()
	Require(t)
	shared.once.Do(func() { shared.srv, shared.err = start() })
	if shared.err != nil {
		t.Fatalf("pgtest: shared server: %v", shared.err)
	}
	return shared.srv
}

// Main runs the tests and then stops the shared server:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
//
// Without it the server is still killed when the test binary exits (on
// Linux, through the parent-death signal), but its temp dir is left.
func Main(m *testing.M) {
	code := m.Run()
	shared.once.Do(func() {})
	if shared.srv != nil {
		shared.srv.stop()
	}
	os.Exit(code)
}
