package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// loadConn is one keep-alive connection of the load generator.
type loadConn struct {
	c  net.Conn
	br *bufio.Reader
}

// dialLoad opens n keep-alive connections to addr.
func dialLoad(ctx context.Context, addr string, n int) ([]*loadConn, error) {
	var d net.Dialer
	conns := make([]*loadConn, 0, n)
	for range n {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			closeLoad(conns)
			return nil, err
		}
		conns = append(conns, &loadConn{c: c, br: bufio.NewReader(c)})
	}
	return conns, nil
}

func closeLoad(conns []*loadConn) {
	for _, c := range conns {
		_ = c.c.Close()
	}
}

// hammer is a wrk-like load loop: every connection sends one request,
// reads the whole response and sends the next, for d. Connection i starts
// at its own offset in reqs and walks them in turn, so with many jobs the
// connections spread over them. Every response must be a 429; anything
// else stops the run with an error. The window ends when the last request
// started in it has been answered.
func hammer(conns []*loadConn, reqs [][]byte, d time.Duration, hists []hist, record bool) (uint64, time.Duration, error) {
	var (
		stop   atomic.Bool
		total  atomic.Uint64
		wg     sync.WaitGroup
		errMu  sync.Mutex
		runErr error
	)
	start := time.Now()
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := &hists[i]
			next := i * len(reqs) / len(conns)
			var n uint64
			for !stop.Load() {
				t0 := time.Now()
				err := c.roundTrip(reqs[next])
				if err != nil {
					errMu.Lock()
					runErr = errors.Join(runErr, err)
					errMu.Unlock()
					stop.Store(true)
					break
				}
				if record {
					h.add(time.Since(t0))
				}
				n++
				if next++; next == len(reqs) {
					next = 0
				}
			}
			total.Add(n)
		}()
	}
	time.Sleep(d) // the measurement window itself
	stop.Store(true)
	wg.Wait()
	return total.Load(), time.Since(start), runErr
}

// roundTrip sends req and reads its response, which must be a 429 with a
// Content-Length (every handler measured sets one).
func (c *loadConn) roundTrip(req []byte) error {
	if _, err := c.c.Write(req); err != nil {
		return err
	}
	code, err := readResponse(c.br)
	if err != nil {
		return err
	}
	if code != 429 {
		return fmt.Errorf("exp status 429, got %d", code)
	}
	return nil
}

var contentLength = []byte("content-length")

// readResponse reads one HTTP/1.1 response from br, body included, and
// returns its status code.
func readResponse(br *bufio.Reader) (int, error) {
	line, err := br.ReadSlice('\n')
	if err != nil {
		return 0, err
	}
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	code, ok := atoiDigits(line[9:12])
	if !ok {
		return 0, fmt.Errorf("bad status line %q", line)
	}
	length := -1
	for {
		line, err = br.ReadSlice('\n')
		if err != nil {
			return 0, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if ok && bytes.EqualFold(k, contentLength) {
			if length, ok = atoiDigits(bytes.TrimSpace(v)); !ok {
				return 0, fmt.Errorf("bad Content-Length %q", v)
			}
		}
	}
	switch {
	case code == 204 || code == 304 || code < 200:
		return code, nil // no body, whatever the headers say
	case length < 0:
		return 0, errors.New("response without Content-Length")
	}
	if _, err := br.Discard(length); err != nil {
		return 0, err
	}
	return code, nil
}

// atoiDigits parses a non-empty run of ASCII digits.
func atoiDigits(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
