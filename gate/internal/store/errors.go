package store

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Refused reports an error reply from Redis that no wait fixes (NOPERM,
// OOM, READONLY, NOSCRIPT, WRONGTYPE...). Some replies pass by
// themselves: a slot moving, a cluster or replica healing, a server
// loading its data or busy with a script. They are unavailability, as a
// network failure is.
func Refused(err error) bool {
	if !Replied(err) {
		return false
	}
	msg := err.Error()
	var re redis.Error
	if errors.As(err, &re) {
		msg = re.Error()
	}
	code, _, _ := strings.Cut(msg, " ")
	switch code {
	case "TRYAGAIN", "CLUSTERDOWN", "MOVED", "ASK", "LOADING", "MASTERDOWN", "BUSY":
		return false
	}
	return true
}

// Reached reports whether Redis was reached. Either it replied with an
// error, or the lock was written but too few replicas acknowledged it.
func Reached(err error) bool {
	var nr *notReplicatedError
	return Replied(err) || errors.As(err, &nr)
}

// Replied reports whether err is an error reply from Redis, rather than a
// network failure or a timeout. Then Redis was reached.
func Replied(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !errors.Is(err, redis.Nil)
}

// notReplicatedError: fewer replicas than WaitReplicas acknowledged an
// acquire in time.
type notReplicatedError struct {
	acked  int64
	want   int
	within time.Duration
}

func (e *notReplicatedError) Error() string {
	return fmt.Sprintf("%d of %d replicas acknowledged the lock within %v", e.acked, e.want, e.within)
}

// movedTo returns the address of a MOVED redirection. It returns "" for
// any other error.
func movedTo(err error) string {
	if err == nil {
		return ""
	}
	f := strings.Fields(err.Error())
	if len(f) != 3 || f[0] != "MOVED" {
		return ""
	}
	return f[2]
}
