package line

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// aclLine is what an upstream's line needs beyond the gate's rules, the
// upstream's (redistest.ACLUpstream) and pub/sub's, as docs/upstreams.md
// lists it.
var aclLine = []string{"+hget", "+hdel", "+zlexcount", "+zpopmin", "+zscore", "+zrank", "+zcard",
	"+sadd", "+srem", "+spop", "+smembers", "+scard", "+rpush", "+lrange", "+lrem", "+exists", "+set", "+get", "+zcount"}

// Every step of the line runs as a user restricted to the documented
// rules: join, place, a refusal, turn and wake, leave, renew.
func TestLineUnderTheDocumentedACL(t *testing.T) {
	const prefix = "acl"
	extra := append(append(append([]string{"&" + prefix + ":*"}, redistest.ACLUpstream...), redistest.ACLPubSub...), aclLine...)
	srv := redistest.ACLServer(t, prefix, extra)
	a, b := process(t, srv.Client(t), prefix, Config{}), process(t, srv.Client(t), prefix, Config{})
	// A process that joined with a lease of 30 ms and died: its place is
	// dropped once the lease ends.
	dead := process(t, srv.Client(t), prefix, Config{Lease: 30 * time.Millisecond})
	tr := dead.st.Trip()
	r := tr.JoinLine(context.Background(), dead.keys, dead.join(&waiter{caller: Caller{Tenant: "d"}, quantum: store.Quantum}, time.Hour, 0))
	tr.Send(context.Background())
	if _, err := r.Result(); err != nil {
		t.Fatal(err)
	}
	first := mustJoin(t, a, Caller{Tenant: "x"})
	second := mustJoin(t, b, Caller{Tenant: "y"})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		p, err := second.Place(context.Background(), 1)
		if err != nil {
			t.Fatal(err)
		}
		if p.Ahead == 1 && p.Of == 2 {
			break // the dead place dropped
		}
		if time.Now().After(deadline) {
			t.Fatalf("Place: %+v; the dead process's place was never dropped", p)
		}
	}
	if _, err := a.Join(context.Background(), Caller{}, time.Now().Add(time.Second), 0.5); !errors.Is(err, ErrTooLong) {
		t.Fatalf("an unmeetable join: %v, want ErrTooLong", err)
	}
	a.collect(context.Background(), true) // a renewal
	if err := first.Leave(context.Background()); err != nil {
		t.Fatal(err)
	}
	turn(t, a, 1)
	waitAll(t, second)
}
