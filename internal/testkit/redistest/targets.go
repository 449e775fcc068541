package redistest

import (
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Target is one backend of the standard test matrix.
type Target struct {
	Name string // "miniredis", "redis" or "cluster"
	// Client talks to the backend; it is new per Targets call and closed
	// in t.Cleanup.
	Client redis.UniversalClient
	// FastForward moves the backend's clock (TTLs) forward. It is nil for
	// real servers: there the caller must wait in real time, polling.
	FastForward func(d time.Duration)
	IsCluster   bool
}

// Targets returns the standard matrix: a fresh miniredis, the shared real
// redis-server and the shared real 3-master cluster. The real backends are
// started once per test binary, on first use, and shared by every test,
// so keys must come from UniqueKey or Prefix. Where redis-server or
// redis-cli is missing, the real targets are left out and t logs why,
// unless RETRYGATE_REQUIRE_REDIS=1, where t fails. Backends that
// RETRYGATE_TARGETS leaves out are left out, and t logs it. Use Main to
// stop the shared backends at exit.
//
// Loop over it with t.Run:
//
//	for _, tg := range redistest.Targets(t) {
//		t.Run(tg.Name, func(t *testing.T) { ... tg.Client ... })
//	}
func Targets(t *testing.T) []Target {
	t.Helper()
	var targets []Target
	if reason := leftOut(t, "miniredis"); reason != "" {
		t.Logf("redistest: skipping target miniredis: %s", reason)
	} else {
		m, mc := Miniredis(t)
		targets = append(targets, Target{Name: "miniredis", Client: mc, FastForward: func(d time.Duration) { Advance(m, d) }})
	}

	if reason := leftOut(t, "redis"); reason != "" {
		t.Logf("redistest: skipping target redis: %s", reason)
	} else if reason := missing("redis-server"); reason != "" {
		skipTarget(t, "redis", reason)
	} else {
		s, err := shared.server()
		if err != nil {
			t.Fatalf("redistest: shared redis-server: %v", err)
		}
		targets = append(targets, Target{Name: "redis", Client: s.Client(t)})
	}

	if reason := leftOut(t, "cluster"); reason != "" {
		t.Logf("redistest: skipping target cluster: %s", reason)
	} else if reason := missing("redis-server", "redis-cli"); reason != "" {
		skipTarget(t, "cluster", reason)
	} else {
		c, err := shared.cluster()
		if err != nil {
			t.Fatalf("redistest: shared cluster: %v", err)
		}
		targets = append(targets, Target{Name: "cluster", Client: c.Client(t), IsCluster: true})
	}
	return targets
}

func skipTarget(t *testing.T, name, reason string) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("redistest: target %s: %s, and %s=1", name, reason, RequireEnv)
	}
	t.Logf("redistest: skipping target %s: %s (set %s=1 to fail instead)", name, reason, RequireEnv)
}

// Main runs the tests and then stops the backends shared by Targets.
// Call it from TestMain:
//
//	func TestMain(m *testing.M) { redistest.Main(m) }
func Main(m *testing.M) {
	code := m.Run()
	Shutdown()
	os.Exit(code)
}

// Shutdown stops the backends shared by Targets and removes their temp
// dirs. Call it after m.Run in a TestMain that cannot use Main; no test
// may use Targets after it.
func Shutdown() { shared.shutdown() }

// shared holds the backends that Targets starts at most once per process.
var shared sharedBackends

type sharedBackends struct {
	serverOnce sync.Once
	srv        *Srv
	srvErr     error

	clusterOnce sync.Once
	cl          *ClusterSrv
	clErr       error

	mu   sync.Mutex
	dirs []string
}

func (b *sharedBackends) server() (*Srv, error) {
	b.serverOnce.Do(func() {
		dir, err := b.tempDir()
		if err != nil {
			b.srvErr = err
			return
		}
		b.srv, b.srvErr = newSrv(dir, false, nil)
	})
	return b.srv, b.srvErr
}

func (b *sharedBackends) cluster() (*ClusterSrv, error) {
	b.clusterOnce.Do(func() {
		dirs := make([]string, 3)
		for i := range dirs {
			var err error
			if dirs[i], err = b.tempDir(); err != nil {
				b.clErr = err
				return
			}
		}
		b.cl, b.clErr = startCluster(dirs, 3, 0)
	})
	return b.cl, b.clErr
}

func (b *sharedBackends) tempDir() (string, error) {
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	b.dirs = append(b.dirs, dir)
	b.mu.Unlock()
	return dir, nil
}

func (b *sharedBackends) shutdown() {
	// Spend the Onces so nothing starts after shutdown.
	b.serverOnce.Do(func() {})
	b.clusterOnce.Do(func() {})
	if b.srv != nil {
		b.srv.stop()
	}
	if b.cl != nil {
		b.cl.stop()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, d := range b.dirs {
		_ = os.RemoveAll(d)
	}
	b.dirs = nil
}

// RealTargets is Targets without miniredis: the backends whose TTLs pass in
// real time (for renewal, expiry and multi-client tests). It skips t when
// RETRYGATE_TARGETS leaves out both real backends.
func RealTargets(t *testing.T) []Target {
	t.Helper()
	if a, b := leftOut(t, "redis"), leftOut(t, "cluster"); a != "" && b != "" {
		t.Skipf("redistest: %s leaves out every real backend", a)
	}
	var out []Target
	for _, tg := range Targets(t) {
		if tg.FastForward == nil {
			out = append(out, tg)
		}
	}
	return out
}

// OwnClient is a go-redis client of its own to tg's backend, as another
// process would have: no pool, script cache or hook shared with
// tg.Client. It is closed in t.Cleanup.
func (tg Target) OwnClient(t testing.TB) redis.UniversalClient {
	t.Helper()
	var c redis.UniversalClient
	switch x := tg.Client.(type) {
	case *redis.Client:
		c = redis.NewClient(x.Options())
	case *redis.ClusterClient:
		c = redis.NewClusterClient(x.Options())
	default:
		t.Fatalf("redistest: a client of its own to %T", tg.Client)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
