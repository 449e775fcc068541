package gatetest

import (
	"context"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
)

// Acquired is an AcquireWait's answer.
type Acquired struct {
	Lease *gate.Lease
	Err   error
}

// AcquireWait runs g.AcquireWait in a goroutine. Its answer comes on the
// channel.
func AcquireWait(ctx context.Context, g *gate.Gate, job string, wait time.Duration) <-chan Acquired {
	out := make(chan Acquired, 1)
	go func() {
		l, err := g.AcquireWait(ctx, job, wait)
		out <- Acquired{l, err}
	}()
	return out
}

// Answer returns an AcquireWait's answer. It fails t with what if none
// comes within 20 s.
func Answer(t testing.TB, ch <-chan Acquired, what string) Acquired {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal(what)
		return Acquired{}
	}
}

// InLine polls g.Status until job's caller waits in line, and returns
// that status. It fails t if that takes 20 s.
func InLine(t testing.TB, g *gate.Gate, job string) gate.Status {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, err := g.Status(context.Background(), job)
		if err != nil {
			t.Fatal(err)
		}
		if st.InLine {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q never waited in line: %+v", job, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
