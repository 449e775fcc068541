package pgtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

const (
	startAttempts = 8                // fresh ports to try on a clash
	startTimeout  = 30 * time.Second // generous: initdb, -race, 2 shared cores
	stopTimeout   = 10 * time.Second // fast shutdown grace before SIGKILL
	pollInterval  = 10 * time.Millisecond
	logName       = "postgres.log"
)

var errPortInUse = errors.New("pgtest: port in use")

// Srv is one PostgreSQL server on 127.0.0.1 with trust authentication
// for the superuser "postgres".
type Srv struct {
	dir  string // temp dir: data/, the unix socket, the log
	port int
	bin  string
	// uid and gid run the server; -1 to run it as the test.
	uid, gid int

	dbSeq atomic.Uint64

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// Server starts a PostgreSQL server of the test's own and stops it in
// t.Cleanup. It skips t where PostgreSQL is missing (see Require).
func Server(t testing.TB) *Srv {
	t.Helper()
	s, err := start()
	if err != nil {
		if errors.Is(err, errMissing) {
			skipOrFail(t, err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("pgtest: last lines of the server's log:\n%s", s.logTail())
		}
		s.stop()
	})
	return s
}

// DSN returns the URL of the "postgres" database.
func (s *Srv) DSN() string { return s.dsn("postgres") }

// Port returns the server's TCP port on 127.0.0.1.
func (s *Srv) Port() int { return s.port }

func (s *Srv) dsn(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)), db)
}

// Database creates an empty database no other call returns and returns
// its DSN, so tests sharing a server keep to their own tables.
func (s *Srv) Database(t testing.TB) string {
	t.Helper()
	name := "t" + strconv.FormatUint(s.dbSeq.Add(1), 10)
	cmd := exec.Command(filepath.Join(s.bin, "createdb"), "-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", "postgres", "-T", "template0", name)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pgtest: createdb %s: %v: %s", name, err, out)
	}
	return s.dsn(name)
}

// errMissing marks what skips rather than fails a test.
var errMissing = errors.New("PostgreSQL is not installed")

// start runs initdb in a fresh temp dir and the server on free ports until
// one binds.
func start() (*Srv, error) {
	su, err := findSetup()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errMissing, err)
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Srv{dir: dir, bin: su.bin, uid: su.uid, gid: su.gid}
	if su.uid >= 0 {
		if err := os.Chown(dir, su.uid, su.gid); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := s.initdb(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	for range startAttempts {
		if s.port, err = freePort(); err != nil {
			break
		}
		if err = s.run(); !errors.Is(err, errPortInUse) {
			break
		}
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Srv) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = sysProcAttr(s.uid, s.gid)
	return cmd
}

func (s *Srv) initdb() error {
	cmd := s.command("initdb", "-D", filepath.Join(s.dir, "data"), "-U", "postgres",
		"--auth=trust", "--no-sync", "--encoding=UTF8", "--locale=C")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %v: %s", err, tail(string(out), 20))
	}
	return nil
}

// run starts postgres on s.port and waits until it accepts connections.
func (s *Srv) run() error {
	logPath := filepath.Join(s.dir, logName)
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	cmd := s.command("postgres", "-D", filepath.Join(s.dir, "data"),
		"-p", strconv.Itoa(s.port), "-h", "127.0.0.1", "-k", s.dir,
		// A test database needs no durability.
		"-F", "-c", "full_page_writes=off", "-c", "synchronous_commit=off",
		"-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = f, f
	err = cmd.Start()
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	if err := s.waitReady(); err != nil {
		s.stop()
		return err
	}
	return nil
}

// waitReady polls postmaster.pid until it names this very process and
// says "ready", as pg_ctl does.
func (s *Srv) waitReady() error {
	deadline := time.Now().Add(startTimeout)
	pidFile := filepath.Join(s.dir, "data", "postmaster.pid")
	want := strconv.Itoa(s.cmd.Process.Pid)
	for {
		if b, err := os.ReadFile(pidFile); err == nil {
			lines := strings.Split(string(b), "\n")
			if len(lines) > 7 && lines[0] == want && strings.TrimSpace(lines[7]) == "ready" {
				return nil
			}
		}
		select {
		case <-s.exited:
			log := s.logTail()
			if strings.Contains(log, "could not bind") || strings.Contains(log, "already in use") {
				return fmt.Errorf("%w: %d", errPortInUse, s.port)
			}
			return fmt.Errorf("pgtest: postgres exited at startup:\n%s", log)
		case <-time.After(pollInterval):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postgres not ready after %v:\n%s", startTimeout, s.logTail())
		}
	}
}

// stop shuts the server down (fast shutdown: SIGINT), kills it if it
// dawdles, and removes its temp dir.
func (s *Srv) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.exited:
		case <-time.After(stopTimeout):
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
		s.cmd = nil
	}
	_ = os.RemoveAll(s.dir)
}

func (s *Srv) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, logName))
	return tail(string(b), 30)
}

// freePort returns a loopback port that was free a moment ago; run
// retries on a clash.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
