package httpmw

import (
	"bufio"
	"net"
	"net/http"
)

// writer records the status a handler answered with, for the outcome. It
// keeps http.Flusher and http.Hijacker, and Unwrap lets
// http.ResponseController reach the server's writer for deadlines and full
// duplex. Like any http.ResponseWriter it is not safe for concurrent use.
type writer struct {
	http.ResponseWriter
	code     int // first final status; 0 until the header is written
	hijacked bool
}

var (
	_ http.Flusher  = (*writer)(nil)
	_ http.Hijacker = (*writer)(nil)
)

func (w *writer) WriteHeader(code int) {
	// 1xx other than 101 are informational: the final status follows.
	if w.code == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *writer) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush sends buffered data to the client, as server-sent events need.
func (w *writer) Flush() { _ = w.FlushError() }

// FlushError is Flush that reports an error (http.ResponseController uses
// it); ErrNotSupported when the server's writer cannot flush.
func (w *writer) FlushError() error {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack takes over the connection (WebSocket upgrades). The outcome of a
// hijacked request is a success unless the handler reported a failure.
func (w *writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if err == nil {
		w.hijacked = true
	}
	return c, rw, err
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (w *writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// wrote reports whether the handler sent a response (or took the
// connection).
func (w *writer) wrote() bool { return w.code != 0 || w.hijacked }
