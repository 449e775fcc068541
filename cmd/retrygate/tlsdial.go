package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"time"
)

// handshakeFailure is a TLS handshake that failed in a way no certificate
// explains: no answer, or an answer that is not TLS.
type handshakeFailure struct {
	addr string
	// plain: the address answered a plain-text PING, so it speaks Redis
	// without TLS there.
	plain bool
}

var errPlainServer = errors.New("tls: the server answers plain-text Redis")

// plainProbe bounds the plain-text PING sent after a failed handshake.
const plainProbe = 500 * time.Millisecond

// tlsDialer dials TLS as go-redis does, and when a handshake fails
// without a certificate to blame, it asks the address a plain-text PING
// and notes the answer in c.handshake: a rediss:// URL pointed at a plain
// Redis otherwise ends in a timeout that says nothing about TLS (the
// server waits for the rest of a command that never comes).
func (c *cli) tlsDialer(cfg *tls.Config) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if h := c.handshake.Load(); h != nil && h.plain && h.addr == addr {
			// Known to speak plain text: a retry (a cluster client's
			// reload) would wait for the same timeout again.
			return nil, errPlainServer
		}
		raw, err := (&net.Dialer{Timeout: dialTimeout}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		conf := cfg
		if conf.ServerName == "" {
			host, _, _ := net.SplitHostPort(addr)
			conf = cfg.Clone()
			conf.ServerName = host
		}
		conn := tls.Client(raw, conf)
		// A handshake is a round trip and the server's crypto: the I/O
		// timeout, not the dial's (a loaded server took over a second).
		hctx, cancel := context.WithTimeout(ctx, ioTimeout)
		defer cancel()
		if err := conn.HandshakeContext(hctx); err != nil {
			_ = raw.Close()
			if notTLS(err) {
				c.handshake.Store(&handshakeFailure{addr: addr, plain: speaksPlainRedis(ctx, network, addr)})
			}
			return nil, err
		}
		return conn, nil
	}
}

// notTLS reports whether a handshake error says the peer did not answer
// in TLS: a timeout, or a first record that is not a handshake.
func notTLS(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() ||
		strings.Contains(err.Error(), "first record does not look like a TLS handshake")
}

// speaksPlainRedis sends PING in plain text and reports whether a RESP
// reply comes back (+PONG, or an error such as -NOAUTH). It has a
// deadline of its own: the dial's has often passed.
func speaksPlainRedis(ctx context.Context, network, addr string) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), plainProbe)
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return false
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	return err == nil && (strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-"))
}

// describe words the failure for an operator.
func (h *handshakeFailure) describe() string {
	if h.plain {
		return "TLS handshake with " + h.addr + " failed: the server answers plain-text Redis there, not TLS " +
			"(use a redis:// URL, or the server's tls-port)"
	}
	return "TLS handshake with " + h.addr + " failed: no TLS answer within " + ioTimeout.String() +
		"; the server may not speak TLS there (use a redis:// URL, or the server's tls-port)"
}
