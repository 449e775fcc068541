package faultproxy

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const (
	dialTimeout = 2 * time.Second
	bufSize     = 32 << 10
)

// Proxy forwards TCP connections from Addr to a target address.
type Proxy struct {
	target string
	ln     net.Listener

	toServer  atomic.Int64 // latency, in ns, for client-to-server chunks
	toClient  atomic.Int64 // latency, in ns, for server-to-client chunks
	blackhole atomic.Bool
	refuse    atomic.Bool
	accepted  atomic.Int64
	held      atomic.Int64 // chunks waiting out latency; lets tests sync

	mu     sync.Mutex
	links  map[*link]struct{}
	closed bool

	wg        sync.WaitGroup // every goroutine the proxy started
	closeOnce sync.Once
}

// New starts a proxy on a free 127.0.0.1 port that forwards to target
// (host:port) and closes it in t.Cleanup.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faultproxy: listen: %v", err)
	}
	p := &Proxy{target: target, ln: ln, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.acceptLoop()
	t.Cleanup(p.Close)
	return p
}

// Addr returns the host:port clients should dial instead of the target.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetLatency delays every chunk forwarded in either direction by d.
// Chunks of one direction are forwarded in order, so a chunk that arrives
// while an earlier one is held waits for it: under pipelining the delays
// add up, as on a slow link.
func (p *Proxy) SetLatency(d time.Duration) {
	p.SetLatencyToServer(d)
	p.SetLatencyToClient(d)
}

// SetLatencyToServer delays chunks from the client to the target by d.
func (p *Proxy) SetLatencyToServer(d time.Duration) { p.toServer.Store(int64(d)) }

// SetLatencyToClient delays chunks from the target to the client by d.
func (p *Proxy) SetLatencyToClient(d time.Duration) { p.toClient.Store(int64(d)) }

// Blackhole, while on, keeps accepting connections and reading from both
// sides but forwards nothing, so requests go unanswered until the client
// times out. Live connections stall too. What was read meanwhile is
// dropped, not delivered later, so a connection that lived through a
// blackhole is out of step and should be discarded (go-redis discards a
// connection after a timeout).
func (p *Proxy) Blackhole(on bool) { p.blackhole.Store(on) }

// Refuse, while on, closes each new connection with a reset as soon as it
// is accepted. Live connections are not affected; see ResetAll.
func (p *Proxy) Refuse(on bool) { p.refuse.Store(on) }

// ResetAll closes every live connection, on both sides, with a TCP reset
// (SO_LINGER 0), as a crashed peer or a middlebox would.
func (p *Proxy) ResetAll() {
	for _, l := range p.snapshot() {
		l.close(true)
	}
}

// Accepted returns how many connections the proxy has accepted, refused
// ones included.
func (p *Proxy) Accepted() int { return int(p.accepted.Load()) }

// Live returns how many connections are being forwarded now.
func (p *Proxy) Live() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.links)
}

// Close stops accepting, resets every live connection and waits until all
// of the proxy's goroutines have ended. It is idempotent.
func (p *Proxy) Close() {
	p.closeOnce.Do(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		_ = p.ln.Close()
		p.ResetAll()
		p.wg.Wait()
	})
}

func (p *Proxy) snapshot() []*link {
	p.mu.Lock()
	defer p.mu.Unlock()
	ls := make([]*link, 0, len(p.links))
	for l := range p.links {
		ls = append(ls, l)
	}
	return ls
}

func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil {
			// Such as EMFILE: give the system a moment rather than spin.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.accepted.Add(1)
		if p.refuse.Load() {
			reset(c)
			continue
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve dials the target for one client and forwards both ways until
// either side ends or the link is closed.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	server, err := net.DialTimeout("tcp", p.target, dialTimeout)
	if err != nil {
		reset(client) // the client sees the target's refusal as a reset
		return
	}
	l := &link{p: p, client: client, server: server, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.close(true)
		return
	}
	p.links[l] = struct{}{}
	p.mu.Unlock()

	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		l.pipe(server, client, &p.toServer)
	}()
	l.pipe(client, server, &p.toClient)
}

// link is one proxied connection: the client's and the proxy's own to
// the target.
type link struct {
	p              *Proxy
	client, server net.Conn
	once           sync.Once
	done           chan struct{} // closed by close
}

// pipe copies src to dst, chunk by chunk, applying the proxy's switches,
// and closes the link when either side fails.
func (l *link) pipe(dst, src net.Conn, latency *atomic.Int64) {
	defer l.close(false)
	buf := make([]byte, bufSize)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if d := time.Duration(latency.Load()); d > 0 && !l.wait(d) {
				return
			}
			if !l.p.blackhole.Load() {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// wait holds for d and reports whether the link is still open.
func (l *link) wait(d time.Duration) bool {
	l.p.held.Add(1)
	defer l.p.held.Add(-1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-l.done:
		return false
	}
}

func (l *link) close(rst bool) {
	l.once.Do(func() {
		if rst {
			reset(l.client)
			reset(l.server)
		} else {
			_ = l.client.Close()
			_ = l.server.Close()
		}
		close(l.done)
		l.p.mu.Lock()
		delete(l.p.links, l)
		l.p.mu.Unlock()
	})
}

// reset closes c so that the peer gets a RST rather than a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
