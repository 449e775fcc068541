package pgtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

// psql runs one query through the server's own client and returns its
// unaligned output.
func psql(t *testing.T, s *Srv, dsn, query string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(s.bin, "psql"), "-X", "-At", "-v", "ON_ERROR_STOP=1", "-c", query, dsn).CombinedOutput()
	if err != nil {
		t.Fatalf("psql %q: %v: %s", query, err, out)
	}
	return strings.TrimSpace(string(out))
}

func TestServerAnswersSQL(t *testing.T) {
	start := time.Now()
	s := Server(t)
	t.Logf("initdb and start in %v", time.Since(start))
	if exp, got := "postgres|2", psql(t, s, s.DSN(), "SELECT current_user, 1+1"); exp != got {
		t.Fatalf("exp %q, got %q", exp, got)
	}
	// The data lives in the test's temp dir, not a system cluster.
	if got := psql(t, s, s.DSN(), "SHOW data_directory"); !strings.HasPrefix(got, s.dir) {
		t.Fatalf("data_directory %q is outside the server's temp dir %q", got, s.dir)
	}
}

func TestDatabasesAreSeparate(t *testing.T) {
	s := Shared(t)
	a, b := s.Database(t), s.Database(t)
	if a == b {
		t.Fatalf("two databases share a DSN: %s", a)
	}
	psql(t, s, a, "CREATE TABLE only_in_a (x int)")
	if exp, got := "0", psql(t, s, b, "SELECT count(*) FROM pg_tables WHERE tablename = 'only_in_a'"); exp != got {
		t.Fatalf("a table made in one database is seen in the other: count %s", got)
	}
}

func TestStopEndsTheServerAndRemovesItsFiles(t *testing.T) {
	Require(t)
	s, err := start()
	if err != nil {
		t.Fatal(err)
	}
	pid := s.cmd.Process.Pid
	s.stop()
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Fatalf("temp dir %s left after stop (stat: %v)", s.dir, err)
	}
	if err := exec.Command("kill", "-0", strconv.Itoa(pid)).Run(); err == nil {
		t.Fatalf("postgres (pid %d) still runs after stop", pid)
	}
}

func TestRunsUnprivilegedAsRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not running as root")
	}
	s := Shared(t)
	fi, err := os.Stat(filepath.Join(s.dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fileUID(fi); got == 0 {
		t.Fatal("the data directory belongs to root: postgres would refuse it")
	}
}

func TestMissingPostgresSkipsOrFails(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	old := debianBins
	debianBins = filepath.Join(t.TempDir(), "*", "bin")
	t.Cleanup(func() { debianBins = old })
	if _, err := findSetup(); err == nil {
		t.Fatal("findSetup found PostgreSQL with an empty PATH and no Debian directory")
	}
	for _, tc := range []struct {
		env        string
		wantFailed bool
	}{{"", false}, {"1", true}} {
		t.Setenv(RequireEnv, tc.env)
		ft := &fakeT{}
		done := make(chan struct{})
		go func() { // Skipf and Fatalf end the goroutine, as in a real test.
			defer close(done)
			Require(ft)
		}()
		<-done
		if ft.failed != tc.wantFailed || ft.skipped == tc.wantFailed {
			t.Errorf("%s=%q: failed %v, skipped %v; want failed %v", RequireEnv, tc.env, ft.failed, ft.skipped, tc.wantFailed)
		}
	}
}

// fakeT records how Require ended a test.
type fakeT struct {
	testing.TB
	failed, skipped bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Fatalf(string, ...any) { f.failed = true; runtime.Goexit() }
func (f *fakeT) Skipf(string, ...any)  { f.skipped = true; runtime.Goexit() }
