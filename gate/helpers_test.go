package gate_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/gatetest"
	"github.com/retrygate/retrygate/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

var errBoom = errors.New("boom")

// newGate is gatetest.New with the wait hooks a test sets with
// setWaitHooks installed on the gate.
func newGate(t testing.TB, rdb gate.Client, opts gate.Options) *gate.Gate {
	t.Helper()
	g := gatetest.New(t, rdb, opts)
	gate.SetWaitHooks(g, func(job string) { waitHooks.call(0, job) }, func(job string) { waitHooks.call(1, job) })
	return g
}

// waitHooks are the AcquireWait hooks of every gate newGate makes: [0]
// runs after a wait's first refusal, before it subscribes; [1] after the
// subscription is confirmed, before each read.
var waitHooks hooks

type hooks struct {
	mu sync.Mutex
	fs [2]func(job string)
}

func (h *hooks) call(i int, job string) {
	h.mu.Lock()
	f := h.fs[i]
	h.mu.Unlock()
	if f != nil {
		f(job)
	}
}

// setWaitHooks sets the hooks of every gate newGate makes until the
// returned function restores them.
func setWaitHooks(refused, subscribed func(job string)) (restore func()) {
	waitHooks.mu.Lock()
	prev := waitHooks.fs
	waitHooks.fs = [2]func(string){refused, subscribed}
	waitHooks.mu.Unlock()
	return func() {
		waitHooks.mu.Lock()
		waitHooks.fs = prev
		waitHooks.mu.Unlock()
	}
}

// pass lets d of Redis time pass: FastForward on miniredis; real servers
// need real time, so it sleeps d there (callers keep d in tens of ms).
func pass(tg redistest.Target, d time.Duration) {
	if tg.FastForward != nil {
		tg.FastForward(d)
		return
	}
	time.Sleep(d)
}

// waitState polls Status until the job is in want, failing after within
// (plus slack on real servers). On miniredis it fast-forwards first.
func waitState(t *testing.T, tg redistest.Target, g *gate.Gate, job string, want gate.State, within time.Duration) gate.Status {
	t.Helper()
	ctx := context.Background()
	if tg.FastForward != nil {
		tg.FastForward(within)
	}
	deadline := time.Now().Add(within + 2*time.Second)
	for {
		st, err := g.Status(ctx, job)
		if err != nil {
			t.Fatalf("Status: %v", err)
		}
		if st.State == want {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %q: state %v, want %v within %v", job, st.State, want, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func mustStatus(t *testing.T, g *gate.Gate, job string) gate.Status {
	t.Helper()
	st, err := g.Status(context.Background(), job)
	if err != nil {
		t.Fatalf("Status(%q): %v", job, err)
	}
	return st
}

// failWith runs a Do whose fn returns err, and returns Do's error.
func failWith(t *testing.T, g *gate.Gate, job string, err error) error {
	t.Helper()
	ran := false
	derr := g.Do(context.Background(), job, func(ctx context.Context, l *gate.Lease) error {
		ran = true
		return err
	})
	if !ran {
		t.Fatalf("fn did not run: %v", derr)
	}
	return derr
}

// roundTrips counts the commands a client sends (a pipeline counts once).
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if gateTraffic(cmd.Name()) {
			r.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

// gateTraffic leaves out go-redis's own topology and handshake commands
// (a new connection sends CLIENT SETINFO).
func gateTraffic(name string) bool {
	switch name {
	case "cluster", "command", "hello", "ping", "readonly", "client":
		return false
	}
	return true
}
func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if gateTraffic(cmd.Name()) { // not a new connection's handshake
				r.n.Add(1)
				break
			}
		}
		return next(ctx, cmds)
	}
}

// flaky injects Redis faults (Down, Hang).
type flaky = gatetest.Flaky

// recorder is an Observer that keeps every event.
type recorder struct {
	ch chan gate.Event
}

func newRecorder() *recorder { return &recorder{ch: make(chan gate.Event, 1024)} }

func (r *recorder) Observe(_ context.Context, e gate.Event) {
	select {
	case r.ch <- e:
	default:
	}
}

// count drains the events seen so far and counts those of kind k.
func (r *recorder) drain() []gate.Event {
	var out []gate.Event
	for {
		select {
		case e := <-r.ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

func countKind(evs []gate.Event, k gate.EventKind) int {
	n := 0
	for _, e := range evs {
		if e.Kind == k {
			n++
		}
	}
	return n
}

// upstream is the first upstream of a refusal by the gate's upstreams.
func upstream(b *gate.BlockedError) gate.UpstreamStatus {
	if b == nil || len(b.Upstreams) == 0 {
		return gate.UpstreamStatus{}
	}
	return b.Upstreams[0]
}

// hook adds h to tg's client so that it sees every command the gate sends,
// once: on a cluster to each node's client (the acquire's native commands
// go straight to the job's master, and the cluster client's own commands
// run through its nodes' clients too), else to the client.
func hook(tg redistest.Target, h redis.Hook) {
	if cc, ok := tg.Client.(*redis.ClusterClient); ok {
		cc.OnNewNode(func(c *redis.Client) { c.AddHook(h) })
		return
	}
	tg.Client.AddHook(h)
}
