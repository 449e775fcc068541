package httpmw

import "time"

// SetHeartbeat shortens the event streams' heartbeat until the returned
// function restores it.
func SetHeartbeat(d time.Duration) (restore func()) {
	old := heartbeat.Swap(int64(d))
	return func() { heartbeat.Store(old) }
}
