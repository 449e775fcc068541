package pgtest

import (
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// RequireEnv is the environment variable that turns skips for a missing
// PostgreSQL into failures when set to "1".
const RequireEnv = "RETRYGATE_REQUIRE_POSTGRES"

// serverUser is who runs postgres when the test runs as root.
const serverUser = "postgres"

// debianBins is where Debian's postgresql packages put the server
// binaries, one directory per major version.
var debianBins = "/usr/lib/postgresql/*/bin"

// Require skips t when PostgreSQL cannot be started here, or fails it when
// RETRYGATE_REQUIRE_POSTGRES=1.
func Require(t testing.TB) {
	t.Helper()
	if _, err := findSetup(); err != nil {
		skipOrFail(t, err)
	}
}

func skipOrFail(t testing.TB, err error) {
	t.Helper()
	if os.Getenv(RequireEnv) == "1" {
		t.Fatalf("pgtest: %v, and %s=1", err, RequireEnv)
	}
	t.Skipf("pgtest: %v (set %s=1 to fail instead of skipping)", err, RequireEnv)
}

// setup is how to run the server here.
type setup struct {
	bin string // directory of initdb, postgres and createdb
	// uid and gid run the server; -1 when the test does not run as root.
	uid, gid int
}

func findSetup() (setup, error) {
	bin, err := binDir()
	if err != nil {
		return setup{}, err
	}
	s := setup{bin: bin, uid: -1, gid: -1}
	if os.Geteuid() != 0 {
		return s, nil
	}
	u, err := user.Lookup(serverUser)
	if err != nil {
		return setup{}, errors.New("running as root and there is no " + serverUser + " user to run PostgreSQL as (it refuses root)")
	}
	if s.uid, err = strconv.Atoi(u.Uid); err != nil {
		return setup{}, err
	}
	if s.gid, err = strconv.Atoi(u.Gid); err != nil {
		return setup{}, err
	}
	return s, nil
}

// binDir finds the directory holding initdb, postgres and createdb: the
// one of initdb on PATH (following a symlink, so createdb comes from the
// same version), else the newest Debian version directory.
func binDir() (string, error) {
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		dirs = append(dirs, filepath.Dir(p))
	}
	matches, _ := filepath.Glob(debianBins)
	sort.Slice(matches, func(i, j int) bool { return version(matches[i]) > version(matches[j]) })
	dirs = append(dirs, matches...)
	for _, d := range dirs {
		if hasAll(d, "initdb", "postgres", "createdb") {
			return d, nil
		}
	}
	return "", errors.New("initdb, postgres and createdb not found on PATH nor in " + debianBins)
}

// version reads the major version out of /usr/lib/postgresql/<v>/bin.
func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

func hasAll(dir string, names ...string) bool {
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// tail returns the last lines of s, for error messages.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
