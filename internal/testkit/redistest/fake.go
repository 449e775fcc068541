package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// FakeSrv is a RESP server on 127.0.0.1 that answers every command with
// what its answer function returns: a stand-in for an engine this machine
// does not run (KeyDB, Dragonfly, Garnet, Valkey), for tests of what a
// client reads from a server about itself (INFO, HELLO, CONFIG GET). It
// speaks RESP2, and RESP3 to a connection that asked for it with HELLO 3.
type FakeSrv struct {
	ln     net.Listener
	answer func(cmd []string) any
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]bool
	seen  [][]string
}

// Replies an answer function may return, besides string (a bulk string),
// int / int64 (an integer), nil (a null), []any (an array) and error (an
// error reply, its text as is: "ERR ...", "NOPERM ...").
type (
	// Status is a simple string reply ("OK").
	Status string
	// Map is a map reply in RESP3, a flat array of keys and values in
	// RESP2, in the order given.
	Map [][2]any
)

// UnknownCommand is Redis's reply to a command it does not have.
func UnknownCommand(cmd []string) error {
	name := ""
	if len(cmd) > 0 {
		name = cmd[0]
	}
	return fmt.Errorf("ERR unknown command '%s', with args beginning with: ", name)
}

// FakeServer starts a FakeSrv answering with answer (called on the
// connection's goroutine; cmd[0] is upper case) and stops it in t.Cleanup.
func FakeServer(t testing.TB, answer func(cmd []string) any) *FakeSrv {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &FakeSrv{ln: ln, answer: answer, conns: map[net.Conn]bool{}}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

// Addr returns host:port.
func (f *FakeSrv) Addr() string { return f.ln.Addr().String() }

// Client returns a go-redis client of the server, closed in t.Cleanup.
func (f *FakeSrv) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: f.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Seen returns the commands received so far, in order.
func (f *FakeSrv) Seen() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([][]string(nil), f.seen...)
}

func (f *FakeSrv) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns[c] = true
		f.mu.Unlock()
		f.wg.Add(1)
		go f.serve(c)
	}
}

func (f *FakeSrv) close() {
	_ = f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

func (f *FakeSrv) serve(c net.Conn) {
	defer f.wg.Done()
	defer func() {
		_ = c.Close()
		f.mu.Lock()
		delete(f.conns, c)
		f.mu.Unlock()
	}()
	r, w := bufio.NewReader(c), bufio.NewWriter(c)
	resp3 := false
	for {
		cmd, err := readCommand(r)
		if err != nil {
			return
		}
		cmd[0] = strings.ToUpper(cmd[0])
		f.mu.Lock()
		f.seen = append(f.seen, cmd)
		f.mu.Unlock()
		reply := f.answer(cmd)
		if cmd[0] == "HELLO" && len(cmd) > 1 {
			if _, isErr := reply.(error); !isErr {
				resp3 = cmd[1] == "3"
			}
		}
		writeReply(w, reply, resp3)
		if err := w.Flush(); err != nil {
			return
		}
	}
}

// readCommand reads one command: an array of bulk strings, as clients send.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := readLine(r)
	if err != nil {
		return nil, err
	}
	if len(line) < 2 || line[0] != '*' {
		return nil, fmt.Errorf("redistest: fake: unexpected %q", line)
	}
	n, err := strconv.Atoi(line[1:])
	if err != nil || n < 1 {
		return nil, fmt.Errorf("redistest: fake: bad array %q", line)
	}
	cmd := make([]string, n)
	for i := range cmd {
		line, err := readLine(r)
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimPrefix(line, "$"))
		if err != nil || size < 0 || line[0] != '$' {
			return nil, fmt.Errorf("redistest: fake: bad bulk %q", line)
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		cmd[i] = string(buf[:size])
	}
	return cmd, nil
}

func readLine(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
	if line == "" {
		return "", errors.New("redistest: fake: empty line")
	}
	return line, nil
}

func writeReply(w *bufio.Writer, v any, resp3 bool) {
	switch v := v.(type) {
	case nil:
		if resp3 {
			w.WriteString("_\r\n")
		} else {
			w.WriteString("$-1\r\n")
		}
	case Status:
		fmt.Fprintf(w, "+%s\r\n", v)
	case error:
		fmt.Fprintf(w, "-%s\r\n", strings.NewReplacer("\r", " ", "\n", " ").Replace(v.Error()))
	case string:
		fmt.Fprintf(w, "$%d\r\n%s\r\n", len(v), v)
	case int:
		fmt.Fprintf(w, ":%d\r\n", v)
	case int64:
		fmt.Fprintf(w, ":%d\r\n", v)
	case []any:
		fmt.Fprintf(w, "*%d\r\n", len(v))
		for _, e := range v {
			writeReply(w, e, resp3)
		}
	case Map:
		if resp3 {
			fmt.Fprintf(w, "%%%d\r\n", len(v))
		} else {
			fmt.Fprintf(w, "*%d\r\n", 2*len(v))
		}
		for _, kv := range v {
			writeReply(w, kv[0], resp3)
			writeReply(w, kv[1], resp3)
		}
	default:
		panic(fmt.Sprintf("redistest: fake: cannot send a %T", v))
	}
}
