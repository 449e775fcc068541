package redistest

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// conn is a minimal RESP connection for the few admin commands this
// package sends. It avoids go-redis on purpose: a pool that saw failed
// dials backs off, which would slow down startup polling. It redials
// after any error and is not safe for concurrent use.
type conn struct {
	addr    string
	timeout time.Duration // per command, dial included
	tls     *tls.Config   // nil: plain TCP
	nc      net.Conn
	r       *bufio.Reader
}

// command sends one command on a fresh connection.
func command(addr string, timeout time.Duration, args ...string) (string, error) {
	c := &conn{addr: addr, timeout: timeout}
	defer c.close()
	return c.do(args...)
}

func (c *conn) close() {
	if c.nc != nil {
		_ = c.nc.Close()
		c.nc = nil
	}
}

// do returns a simple, integer or bulk string reply; an error reply is an
// error.
func (c *conn) do(args ...string) (string, error) {
	reply, err := c.roundTrip(args)
	if err != nil {
		var rerr replyError
		if !errors.As(err, &rerr) {
			c.close()
		}
	}
	return reply, err
}

type replyError string

func (e replyError) Error() string { return string(e) }

func (c *conn) roundTrip(args []string) (string, error) {
	if c.nc == nil {
		var nc net.Conn
		var err error
		if c.tls != nil {
			nc, err = tls.DialWithDialer(&net.Dialer{Timeout: c.timeout}, "tcp", c.addr, c.tls)
		} else {
			nc, err = net.DialTimeout("tcp", c.addr, c.timeout)
		}
		if err != nil {
			return "", err
		}
		c.nc, c.r = nc, bufio.NewReader(nc)
	}
	if err := c.nc.SetDeadline(time.Now().Add(c.timeout)); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(c.nc, b.String()); err != nil {
		return "", err
	}
	line, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("redistest: empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", replyError(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("redistest: bad bulk reply %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("redistest: unexpected reply %q", line)
}

// infoField returns the value of field in an INFO or CLUSTER INFO reply.
func infoField(info, field string) string {
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return ""
}
