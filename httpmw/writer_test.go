package httpmw_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// serve runs h on a real HTTP server.
func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// TestStreaming: server-sent events flush through the middleware's writer;
// the client reads each chunk while the handler is still running.
func TestStreaming(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	var ev events
	g := newGate(t, mc, gate.Options{Observer: &ev})
	read := make(chan struct{})
	h := router(g, httpmw.Options{}, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for i, chunk := range []string{"data: one\n\n", "data: two\n\n"} {
			_, _ = io.WriteString(w, chunk)
			w.(http.Flusher).Flush()
			if i == 0 {
				select { // the client must see chunk one before chunk two is written
				case <-read:
				case <-time.After(5 * time.Second):
					t.Error("client never read the first chunk: Flush did not reach it")
					return
				}
			}
		}
	})
	srv := serve(t, h)
	resp, err := http.Post(srv.URL+"/documents/1/evaluate", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	for i, exp := range []string{"data: one\n", "\n", "data: two\n", "\n"} {
		got, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		if exp != got {
			t.Fatalf("line %d: exp %q, got %q", i, exp, got)
		}
		if i == 1 {
			close(read)
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	waitEvent(t, &ev, key("1"), evSucceeded)
}

// waitEvent polls until the job's last settle is want (the server settles
// after the client has read the body).
func waitEvent(t *testing.T, ev *events, job string, want string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for ev.of(job) != want {
		if time.Now().After(deadline) {
			t.Fatalf("settle of %q: exp %v, got %v", job, want, ev.of(job))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestHijack: a handler can take over the connection through the
// middleware's writer, and that counts as a success.
func TestHijack(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	var ev events
	g := newGate(t, mc, gate.Options{Observer: &ev})
	h := router(g, httpmw.Options{}, func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("Hijack: %v", err)
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
		_ = buf.Flush()
	})
	srv := serve(t, h)
	resp, err := http.Post(srv.URL+"/documents/1/evaluate", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if exp, got := "hijacked", string(body); exp != got {
		t.Errorf("body: exp %q, got %q", exp, got)
	}
	waitEvent(t, &ev, key("1"), evSucceeded)
}

// TestResponseController: http.ResponseController reaches the server's
// writer through Unwrap (deadlines, full duplex, flush).
func TestResponseController(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	g := newGate(t, mc, gate.Options{})
	h := router(g, httpmw.Options{}, func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		for name, err := range map[string]error{
			"SetWriteDeadline": rc.SetWriteDeadline(time.Now().Add(time.Minute)),
			"SetReadDeadline":  rc.SetReadDeadline(time.Now().Add(time.Minute)),
			"EnableFullDuplex": rc.EnableFullDuplex(),
		} {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		_, _ = io.WriteString(w, "streamed")
		if err := rc.Flush(); err != nil {
			t.Errorf("Flush: %v", err)
		}
	})
	srv := serve(t, h)
	resp, err := http.Post(srv.URL+"/documents/1/evaluate", "", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if exp, got := "streamed", string(body); exp != got {
		t.Errorf("body: exp %q, got %q", exp, got)
	}
}

// TestFlushWithoutSupport: a writer that cannot flush reports
// http.ErrNotSupported through the ResponseController instead of panicking.
func TestFlushWithoutSupport(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	g := newGate(t, mc, gate.Options{})
	var flushErr, hijackErr error
	h := router(g, httpmw.Options{}, func(w http.ResponseWriter, r *http.Request) {
		flushErr = http.NewResponseController(w).Flush()
		_, _, hijackErr = w.(http.Hijacker).Hijack()
	})
	h.ServeHTTP(plainWriter{httptest.NewRecorder()}, httptest.NewRequest(http.MethodPost, "/documents/1/evaluate", nil).WithContext(context.Background()))
	if flushErr == nil || hijackErr == nil {
		t.Errorf("Flush %v, Hijack %v: want errors on a writer without support", flushErr, hijackErr)
	}
}

// plainWriter hides the recorder's Flush.
type plainWriter struct{ rec *httptest.ResponseRecorder }

func (p plainWriter) Header() http.Header         { return p.rec.Header() }
func (p plainWriter) Write(b []byte) (int, error) { return p.rec.Write(b) }
func (p plainWriter) WriteHeader(c int)           { p.rec.WriteHeader(c) }

// TestFailAfterResponseStarted: once the handler has sent its status line
// (WriteHeader, or a Flush that sends the headers of a stream), a failure
// it then reports is recorded, but the middleware writes nothing more: the
// client gets the handler's response, not a problem glued to it.
func TestFailAfterResponseStarted(t *testing.T) {
	for name, started := range map[string]func(w http.ResponseWriter){
		"WriteHeader(200)": func(w http.ResponseWriter) { w.WriteHeader(http.StatusOK) },
		"Flush":            func(w http.ResponseWriter) { w.(http.Flusher).Flush() },
	} {
		t.Run(name, func(t *testing.T) {
			_, mc := redistest.Miniredis(t)
			g := newGate(t, mc, gate.Options{})
			h := router(g, httpmw.Options{}, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				started(w)
				httpmw.Fail(r, errBoom) // the stream broke after the headers went out
			})
			rec := post(t, h, "/documents/1/evaluate")
			if exp, got := "200 text/event-stream \"\"", fmt.Sprintf("%d %s %q", rec.Code, rec.Header().Get("Content-Type"), rec.Body); exp != got {
				t.Errorf("response: exp %s, got %s", exp, got)
			}
			if exp, got := gate.CoolingDown, status(t, g, key("1")).State; exp != got {
				t.Errorf("state: exp %v, got %v", exp, got)
			}
		})
	}
}

// TestHijackFailed: a failed Hijack (HTTP/2, or a writer that cannot
// hijack) takes no connection, so a failure the handler then reports is
// answered by the middleware as usual.
func TestHijackFailed(t *testing.T) {
	_, mc := redistest.Miniredis(t)
	g := newGate(t, mc, gate.Options{})
	h := router(g, httpmw.Options{}, func(w http.ResponseWriter, r *http.Request) {
		if _, _, err := w.(http.Hijacker).Hijack(); err == nil {
			t.Error("Hijack on a recorder succeeded")
		}
		httpmw.Fail(r, errBoom) // the WebSocket upgrade could not happen
	})
	checkRow(t, post(t, h, "/documents/1/evaluate"),
		row{status: 429, jobState: "cooling_down", retryAfter: [2]int64{299, 300}, reason: "unknown", attempts: "1"})
}
