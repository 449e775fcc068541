package httpmw

import (
	"net/http"
	"time"
)

// SetHeartbeat shortens the event streams' heartbeat until the returned
// function restores it.
func SetHeartbeat(d time.Duration) (restore func()) {
	old := heartbeat.Swap(int64(d))
	return func() { heartbeat.Store(old) }
}

// PreferredWait is the wait a middleware with MaxWait maxWait reads
// from r's Prefer header.
func PreferredWait(maxWait time.Duration, r *http.Request) time.Duration {
	return (&config{maxWait: maxWait}).preferredWait(r)
}

// SetStreamLimits shortens the event streams' lifetime and the time each
// write has until the returned function restores them.
func SetStreamLimits(lifetime, writeTimeout time.Duration) (restore func()) {
	oldLife := streamLifetime.Swap(int64(lifetime))
	oldWrite := streamWriteTimeout.Swap(int64(writeTimeout))
	return func() { streamLifetime.Store(oldLife); streamWriteTimeout.Store(oldWrite) }
}

// StreamsClients is how many clients s holds an entry for.
func StreamsClients(s *Streams) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.by)
}
