package redistest

import (
	"errors"
	"net"
	"strconv"
)

// clusterBusOffset is how far above its client port a cluster node listens
// for the cluster bus.
const clusterBusOffset = 10000

// freePort returns a loopback port that was free a moment ago; when
// cluster is set, port+10000 was free too. Another process may still take
// it before redis-server binds, so callers retry on errPortInUse.
func freePort(cluster bool) (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !cluster {
			_ = l.Close()
			return port, nil
		}
		ok := false
		if port+clusterBusOffset <= 65535 {
			if bus, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+clusterBusOffset)); err == nil {
				_ = bus.Close()
				ok = true
			}
		}
		_ = l.Close()
		if ok {
			return port, nil
		}
	}
	return 0, errors.New("redistest: no free port pair for a cluster node")
}
