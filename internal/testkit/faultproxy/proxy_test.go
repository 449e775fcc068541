package faultproxy

import (
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// echoServer echoes every connection until closed in t.Cleanup.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// dialRoundTrip dials addr and round-trips one message. The RST of a
// refused connection can arrive before connect returns, so the dial may
// be what fails.
func dialRoundTrip(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = roundTrip(c, "x", time.Second)
	return err
}

// roundTrip writes msg and reads the echo within timeout.
func roundTrip(c net.Conn, msg string, timeout time.Duration) (string, error) {
	if err := c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, msg); err != nil {
		return "", err
	}
	buf := make([]byte, len(msg))
	_, err := io.ReadFull(c, buf)
	return string(buf), err
}

func TestForwardsAndCounts(t *testing.T) {
	p := New(t, echoServer(t))
	for i := range 3 {
		c := dial(t, p.Addr())
		if got, err := roundTrip(c, "hello", time.Second); err != nil || got != "hello" {
			t.Fatalf("conn %d: got %q, %v", i, got, err)
		}
	}
	if exp, got := 3, p.Accepted(); exp != got {
		t.Fatalf("Accepted: exp %d, got %d", exp, got)
	}
	if exp, got := 3, p.Live(); exp != got {
		t.Fatalf("Live: exp %d, got %d", exp, got)
	}
}

func TestLatencyPerDirection(t *testing.T) {
	p := New(t, echoServer(t))
	c := dial(t, p.Addr())
	measure := func() time.Duration {
		t.Helper()
		start := time.Now()
		if _, err := roundTrip(c, "x", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		return time.Since(start)
	}
	const d = 60 * time.Millisecond
	if got := measure(); got >= d {
		t.Fatalf("round trip without latency took %v, want < %v", got, d)
	}
	for _, tc := range []struct {
		name string
		set  func()
		min  time.Duration
	}{
		{"to server", func() { p.SetLatencyToServer(d) }, d},
		{"to client", func() { p.SetLatencyToClient(d) }, d},
		{"both", func() { p.SetLatency(d) }, 2 * d},
	} {
		p.SetLatency(0)
		tc.set()
		if got := measure(); got < tc.min {
			t.Fatalf("%s: round trip %v, want >= %v", tc.name, got, tc.min)
		}
	}
}

func TestBlackholeStallsAndRecovers(t *testing.T) {
	p := New(t, echoServer(t))
	live := dial(t, p.Addr())
	if _, err := roundTrip(live, "a", time.Second); err != nil {
		t.Fatal(err)
	}
	p.Blackhole(true)
	var nerr net.Error
	if _, err := roundTrip(live, "b", 150*time.Millisecond); !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("live conn in blackhole: exp a timeout, got %v", err)
	}
	fresh := dial(t, p.Addr()) // accepted, but unanswered
	if _, err := roundTrip(fresh, "c", 150*time.Millisecond); !errors.As(err, &nerr) || !nerr.Timeout() {
		t.Fatalf("new conn in blackhole: exp a timeout, got %v", err)
	}
	p.Blackhole(false)
	if got, err := roundTrip(dial(t, p.Addr()), "d", time.Second); err != nil || got != "d" {
		t.Fatalf("after blackhole: got %q, %v", got, err)
	}
}

func TestResetAllSendsRST(t *testing.T) {
	p := New(t, echoServer(t))
	c := dial(t, p.Addr())
	if _, err := roundTrip(c, "a", time.Second); err != nil {
		t.Fatal(err)
	}
	p.ResetAll()
	if _, err := roundTrip(c, "b", time.Second); !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("after ResetAll: exp ECONNRESET, got %v", err)
	}
	if exp, got := 0, p.Live(); exp != got {
		t.Fatalf("Live after ResetAll: exp %d, got %d", exp, got)
	}
	if got, err := roundTrip(dial(t, p.Addr()), "c", time.Second); err != nil || got != "c" {
		t.Fatalf("new conn after ResetAll: got %q, %v", got, err)
	}
}

func TestRefuse(t *testing.T) {
	p := New(t, echoServer(t))
	live := dial(t, p.Addr())
	if _, err := roundTrip(live, "a", time.Second); err != nil {
		t.Fatal(err)
	}
	p.Refuse(true)
	if err := dialRoundTrip(p.Addr()); err == nil {
		t.Fatal("new conn while refusing: exp an error")
	}
	if got, err := roundTrip(live, "c", time.Second); err != nil || got != "c" {
		t.Fatalf("live conn while refusing: got %q, %v", got, err)
	}
	p.Refuse(false)
	if got, err := roundTrip(dial(t, p.Addr()), "d", time.Second); err != nil || got != "d" {
		t.Fatalf("after Refuse(false): got %q, %v", got, err)
	}
	if exp, got := 3, p.Accepted(); exp != got {
		t.Fatalf("Accepted: exp %d (refused one included), got %d", exp, got)
	}
}

func TestTargetDownResetsClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	_ = ln.Close()
	p := New(t, target)
	if err := dialRoundTrip(p.Addr()); err == nil {
		t.Fatal("exp an error with the target down")
	}
}

func TestCloseLeavesNoGoroutines(t *testing.T) {
	target := echoServer(t)
	before := runtime.NumGoroutine()

	p := New(t, target)
	var conns []net.Conn
	for range 4 {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		if _, err := roundTrip(c, "x", time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// Leave one goroutine parked in a latency wait and others stalled.
	p.SetLatencyToClient(time.Hour)
	_, _ = io.WriteString(conns[0], "y")
	deadline := time.Now().Add(5 * time.Second)
	for p.held.Load() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("echo never reached the latency wait")
		}
		time.Sleep(time.Millisecond)
	}
	p.SetLatencyToClient(0)
	p.Blackhole(true)
	_, _ = io.WriteString(conns[1], "z")

	closed := make(chan struct{})
	go func() {
		p.Close()
		p.Close() // idempotent
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatalf("Close did not return: goroutines stuck\n%s", stacks())
	}
	for _, c := range conns {
		_ = c.Close()
	}
	if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
		t.Fatal("proxy still accepts after Close")
	}

	// The echo server's per-conn goroutines end once the proxy's upstream
	// conns are gone, which may take a moment.
	deadline = time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines: before %d, after Close %d\n%s", before, runtime.NumGoroutine(), stacks())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func containsLine(text, line string) bool {
	for _, l := range strings.Split(text, "\r\n") {
		if l == line {
			return true
		}
	}
	return false
}

func stacks() []byte {
	buf := make([]byte, 1<<16)
	return buf[:runtime.Stack(buf, true)]
}
