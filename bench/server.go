package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	serverStartTimeout = 10 * time.Second
	serverPollInterval = 10 * time.Millisecond
	serverStartTries   = 5 // fresh ports to try when one was taken meanwhile
)

// redisServer is the one redis-server process a run measures against:
// loopback only, a free port, nothing persisted.
type redisServer struct {
	addr   string
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// startRedis starts redis-server and waits until it answers PING.
func startRedis() (*redisServer, error) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return nil, fmt.Errorf("bench: redis-server not found on PATH: %w", err)
	}
	var err error
	for range serverStartTries {
		var s *redisServer
		if s, err = tryStartRedis(); err == nil {
			return s, nil
		}
	}
	return nil, err
}

func tryStartRedis() (*redisServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	dir, err := os.MkdirTemp("", "retrygate-bench-")
	if err != nil {
		return nil, err
	}
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, exited: make(chan struct{})}
	var out strings.Builder
	s.cmd = exec.Command("redis-server",
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no")
	s.cmd.Stdout, s.cmd.Stderr = &out, &out
	s.cmd.SysProcAttr = sysProcAttr()
	if err := s.cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()

	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(serverStartTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("bench: redis-server on %s exited at startup: %s", s.addr, out.String())
		case <-time.After(serverPollInterval):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("bench: redis-server did not answer within " + serverStartTimeout.String())
		}
	}
}

func (s *redisServer) stop() {
	_ = s.cmd.Process.Kill()
	<-s.exited
	_ = os.RemoveAll(s.dir)
}
