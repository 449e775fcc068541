package redistest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	logName       = "redis.log"
	startAttempts = 8                // fresh ports to try on a clash
	startTimeout  = 15 * time.Second // generous: -race, 2 cores, parallel packages
	stopTimeout   = 5 * time.Second  // SIGTERM grace before SIGKILL
	pollInterval  = 5 * time.Millisecond
	logTailLines  = 40
)

// errPortInUse means redis-server could not bind its port (or bus port).
var errPortInUse = errors.New("redistest: port in use")

// Srv is one redis-server process on 127.0.0.1. Its port stays the same
// across Kill and Restart.
type Srv struct {
	dir  string
	port int
	args []string // argv after the binary name
	// tls, when set, is how this package's own admin connections (startup
	// polling) reach a server that listens for TLS only.
	tls *tls.Config

	mu     sync.Mutex // serialises start, stop and Kill
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has been reaped
}

// Option configures Server.
type Option func(*options)

type options struct{ args []string }

// WithArgs appends redis-server command-line arguments, for example
// WithArgs("--maxmemory-policy", "allkeys-lru"). They come after the
// defaults, so they override them.
func WithArgs(args ...string) Option {
	return func(o *options) { o.args = append(o.args, args...) }
}

// Server starts a redis-server on a free loopback port with no persistence
// (WithArgs may turn it on), waits until it answers, and stops it in
// t.Cleanup. It skips t where
// redis-server is missing (see Require).
func Server(t testing.TB, opts ...Option) *Srv {
	t.Helper()
	Require(t)
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	s, err := newSrv(t.TempDir(), false, o.args)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.cleanup(t) })
	return s
}

// Addr returns host:port.
func (s *Srv) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port returns the client port; a cluster node's bus port is Port()+10000.
func (s *Srv) Port() int { return s.port }

// Pid returns the process id, or 0 while the server is not running.
func (s *Srv) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.runningLocked() {
		return 0
	}
	return s.cmd.Process.Pid
}

// Client returns a new go-redis client for the server, closed in t.Cleanup.
func (s *Srv) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill sends SIGKILL, as in a crash, and returns once the process is gone.
// Connections drop and new ones are refused until Restart.
func (s *Srv) Kill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

// Restart stops the server if it runs (SIGTERM) and starts it again on the
// same port, in the same directory. By default nothing is persisted, so it
// comes back empty (a cluster node keeps its nodes.conf, so it rejoins with
// its old identity and slots); a server started WithArgs("--appendonly",
// "yes") or with a save schedule reloads what it wrote.
func (s *Srv) Restart(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
	// The port may be taken briefly by someone else: retry, bounded.
	deadline := time.Now().Add(startTimeout)
	for {
		err := s.startLocked()
		if err == nil {
			return
		}
		if !errors.Is(err, errPortInUse) || time.Now().After(deadline) {
			t.Fatalf("redistest: restart %s: %v", s.Addr(), err)
		}
		time.Sleep(50 * time.Millisecond) // the other holder needs time to let go
	}
}

// newSrv starts a server in dir, on fresh ports until one binds.
func newSrv(dir string, cluster bool, extra []string) (*Srv, error) {
	return newSrvArgs(dir, cluster, nil, func(port int) ([]string, error) {
		return serverArgs(dir, port, cluster, extra), nil
	})
}

// newSrvArgs starts a server in dir whose argv (after the binary name)
// argsFor builds for each fresh port tried; tlsCfg is for servers that
// listen for TLS only.
func newSrvArgs(dir string, cluster bool, tlsCfg *tls.Config, argsFor func(port int) ([]string, error)) (*Srv, error) {
	var err error
	for range startAttempts {
		var port int
		if port, err = freePort(cluster); err != nil {
			return nil, err
		}
		args, aerr := argsFor(port)
		if aerr != nil {
			return nil, aerr
		}
		s := &Srv{dir: dir, port: port, args: args, tls: tlsCfg}
		s.mu.Lock()
		err = s.startLocked()
		s.mu.Unlock()
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errPortInUse) {
			return nil, err
		}
	}
	return nil, err
}

func serverArgs(dir string, port int, cluster bool, extra []string) []string {
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		// A bound, as in production: Gate.Check warns about a server
		// without one (WarnNoMaxmemory). FullServer lowers it.
		"--maxmemory", "1gb",
		"--dir", dir,
		"--daemonize", "no",
		"--logfile", filepath.Join(dir, logName),
		// Without this a master waits 5 s for more replicas before a sync.
		"--repl-diskless-sync-delay", "0",
	}
	if cluster {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000",
		)
	}
	return append(args, extra...)
}

func (s *Srv) runningLocked() bool {
	if s.cmd == nil {
		return false
	}
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

func (s *Srv) startLocked() error {
	logPath := filepath.Join(s.dir, logName)
	// stdout and stderr share the log file, so errors redis prints before
	// it opens its logfile are kept too.
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	logStart, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		_ = f.Close()
		return err
	}
	cmd := exec.Command("redis-server", s.args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("redistest: start redis-server: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.cmd, s.exited = cmd, exited
	if err := s.waitReadyLocked(logStart); err != nil {
		s.killLocked()
		return err
	}
	return nil
}

// waitReadyLocked polls until the server answers as this very process: a
// server of another test that holds the port must not pass for ours.
func (s *Srv) waitReadyLocked(logStart int64) error {
	deadline := time.Now().Add(startTimeout)
	want := "process_id:" + strconv.Itoa(s.cmd.Process.Pid) + "\r\n"
	for {
		info, err := s.command(250*time.Millisecond, "INFO", "server")
		if err == nil && strings.Contains(info, want) {
			return nil
		}
		select {
		case <-s.exited:
			log := s.readLog(logStart)
			if strings.Contains(log, "Address already in use") {
				return fmt.Errorf("%w: %s", errPortInUse, s.Addr())
			}
			return fmt.Errorf("redistest: redis-server %s exited during startup (%v); log:\n%s",
				s.Addr(), s.cmd.ProcessState, lastLines(log, logTailLines))
		case <-time.After(pollInterval):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: redis-server %s did not answer within %v (last error: %v); log:\n%s",
				s.Addr(), startTimeout, err, lastLines(s.readLog(logStart), logTailLines))
		}
	}
}

func (s *Srv) killLocked() {
	if !s.runningLocked() {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// stopLocked asks the server to shut down and kills it if it dawdles.
func (s *Srv) stopLocked() {
	if !s.runningLocked() {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(stopTimeout):
		s.killLocked()
	}
}

func (s *Srv) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopLocked()
}

// cleanup stops the server and, if the test failed, shows why it might have.
func (s *Srv) cleanup(t testing.TB) {
	s.stop()
	if t.Failed() {
		t.Logf("redistest: last lines of the log of redis-server %s:\n%s", s.Addr(), s.logTail())
	}
}

// command sends one admin command on a fresh connection, over TLS when
// the server listens for TLS only.
func (s *Srv) command(timeout time.Duration, args ...string) (string, error) {
	c := &conn{addr: s.Addr(), timeout: timeout, tls: s.tls}
	defer c.close()
	return c.do(args...)
}

func (s *Srv) logTail() string { return lastLines(s.readLog(0), logTailLines) }

// readLog returns the log from byte offset from on; errors read as "".
func (s *Srv) readLog(from int64) string {
	b, err := os.ReadFile(filepath.Join(s.dir, logName))
	if err != nil || from > int64(len(b)) {
		return ""
	}
	return string(b[from:])
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
