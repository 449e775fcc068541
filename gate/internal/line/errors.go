package line

import (
	"errors"
	"fmt"
	"time"
)

var (
	// ErrTooLong: the turns ahead cannot come before the caller's
	// deadline; it took no place (TooLongError says how long).
	ErrTooLong = errors.New("line: the turn cannot come before the deadline")
	// ErrDeadline: the caller's deadline passed before its turn.
	ErrDeadline = errors.New("line: the deadline passed before the turn")
	// ErrLeft: Wait on a ticket that left the line.
	ErrLeft = errors.New("line: the ticket left the line")
)

// TooLongError is Join's refusal of a caller whose turn cannot come
// before its deadline.
type TooLongError struct {
	// Ahead counts the turns before the caller's; Wait is the expected
	// wait for its turn.
	Ahead int
	Wait  time.Duration
}

func (e *TooLongError) Error() string {
	return fmt.Sprintf("line: %d ahead, the turn is expected in %v, after the deadline", e.Ahead, e.Wait)
}

// Is makes errors.Is(err, ErrTooLong) hold.
func (e *TooLongError) Is(target error) bool { return target == ErrTooLong }
