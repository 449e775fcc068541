package httpmw

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// heartbeat is how often (ns) an idle event stream gets a comment line,
// so proxies and browsers keep it open (tests shorten it).
var heartbeat atomic.Int64

func init() { heartbeat.Store(int64(15 * time.Second)) }

// streamLifetime (ns) is how long an event stream lasts before the server
// ends it and the client's EventSource reconnects (after reconnectMillis,
// with Last-Event-ID): a slot is never held for good (tests shorten it).
var streamLifetime atomic.Int64

// streamWriteTimeout (ns) is the time one event or heartbeat has to reach
// the client's socket: a client that stops reading loses its stream once
// the socket's buffers are full (tests shorten it).
var streamWriteTimeout atomic.Int64

func init() {
	streamLifetime.Store(int64(5 * time.Minute))
	streamWriteTimeout.Store(int64(10 * time.Second))
}

// reconnectMillis is the retry field of the first event: how soon an
// EventSource reconnects after the stream drops or its lifetime ends.
const reconnectMillis = 1000

// wantsEvents reports whether the request asks for server-sent events.
func wantsEvents(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(strings.ToLower(v), "text/event-stream") {
			return true
		}
	}
	return false
}

// serveEvents streams the job's RetryStatus as server-sent events: the
// current state at once (also on a reconnection with Last-Event-ID), then
// one event per change (gate.Watch), with a comment line every heartbeat.
// Event ids count up per connection, continuing from Last-Event-ID. The
// data is the same JSON as the plain answer: codes and our own sentences,
// never upstream text.
func (c *config) serveEvents(w http.ResponseWriter, r *http.Request, job string) {
	done, ok := c.streams.Open(r)
	if !ok {
		ref := c.unavailable(nil, c.opts.UnavailableRetryAfter)
		ref.Detail = "Too many live status streams are open. " + c.opts.RetryIn(c.opts.UnavailableRetryAfter)
		c.respond(w, r, ref, c.opts.Unavailable)
		return
	}
	defer done()
	ctx := r.Context()
	ch, err := c.g.Watch(ctx, job)
	if err != nil {
		c.statusError(w, r, err)
		return
	}
	id, err := strconv.ParseUint(strings.TrimSpace(r.Header.Get("Last-Event-ID")), 10, 63)
	if err != nil {
		id = 0
	}
	// Each write gets its own deadline: a server WriteTimeout would cut a
	// live stream, and none would let a client that stops reading hold it.
	rc := http.NewResponseController(w)
	writeTimeout := time.Duration(streamWriteTimeout.Load())
	_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	tick := time.NewTicker(time.Duration(heartbeat.Load()))
	defer tick.Stop()
	end := time.NewTimer(time.Duration(streamLifetime.Load()))
	defer end.Stop()
	var buf []byte
	first := true
	for {
		var st RetryStatus
		select {
		case s, ok := <-ch:
			if !ok {
				return
			}
			st = RetryStatusOf(s, c.opts.RetryIn)
		case <-tick.C:
			buf = append(buf[:0], ": heartbeat\n\n"...)
		case <-end.C:
			return // the client reconnects, after reconnectMillis
		case <-ctx.Done():
			return
		}
		if st.JobState != "" {
			id++
			buf = buf[:0]
			if first {
				buf = append(buf, "retry: "+strconv.Itoa(reconnectMillis)+"\n"...)
				first = false
			}
			data, _ := json.Marshal(st)
			buf = append(buf, "id: "...)
			buf = strconv.AppendUint(buf, id, 10)
			buf = append(buf, "\nevent: status\ndata: "...)
			buf = append(buf, data...)
			buf = append(buf, "\n\n"...)
		}
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := w.Write(buf); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
	}
}
