package proof

import (
	"errors"
	"fmt"
	"sync"
)

// ErrStaleFence is returned by FenceStore.Write for a write whose fencing
// token is lower than one the store has already accepted for the job.
var ErrStaleFence = errors.New("proof: stale fencing token")

// FenceStore is the storage side of the fencing pattern, as a user's
// database would implement it (a conditional UPDATE ... WHERE fence <= ?):
// it keeps the highest fence it has seen per job and rejects writes that
// carry a lower one. Equal fences are accepted, so one lease may write
// more than once. It is safe for concurrent use; its zero value is empty
// and ready to use.
type FenceStore struct {
	mu      sync.Mutex
	highest map[string]int64
	value   map[string]string
	stale   int
}

// Write stores value for job if fence is at least the highest fence seen
// for job, and returns an error matching ErrStaleFence otherwise.
func (s *FenceStore) Write(job string, fence int64, value string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.highest == nil {
		s.highest, s.value = map[string]int64{}, map[string]string{}
	}
	if h, ok := s.highest[job]; ok && fence < h {
		s.stale++
		return fmt.Errorf("%w: job %q: fence %d < %d", ErrStaleFence, job, fence, h)
	}
	s.highest[job], s.value[job] = fence, value
	return nil
}

// Get returns the value last accepted for job and its fence.
func (s *FenceStore) Get(job string) (value string, fence int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.value[job], s.highest[job]
}

// Rejected returns how many writes were rejected as stale.
func (s *FenceStore) Rejected() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stale
}
