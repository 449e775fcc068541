package redistest

import (
	"syscall"
	"time"
)

// Pause freezes the server for d, as a long fork, a swapped-out host or a
// stalled VM does: SIGSTOP, then SIGCONT after d; it returns once the
// server runs again. Connections stay open and the kernel keeps accepting
// connections and buffering commands, which the server runs when it
// resumes, by its own clock: keys whose TTL ended during the pause are
// gone then. A server that is not running is left alone.
func (s *Srv) Pause(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.runningLocked() {
		return
	}
	p := s.cmd.Process
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return
	}
	defer func() { _ = p.Signal(syscall.SIGCONT) }()
	select {
	case <-s.exited:
	case <-time.After(d):
	}
}
