package gate_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/faultproxy"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// errProviderBusy is a provider-wide rate limit without a hint.
var errProviderBusy = errors.New("429 too many requests")

func providerBusyClassifier(err error) classify.Verdict {
	if errors.Is(err, errProviderBusy) {
		return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonRateLimited, ProviderWide: true}
	}
	return classify.Default(err)
}

// A lease much longer than any test: a waiter that returns early was woken
// by the settle, not by the lease's end.
const longLease = time.Minute

// waitUntil polls cond until it holds, failing t after within.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// subscribers returns how many connections subscribe to channel on the
// server that holds it (SHARDNUMSUB on that cluster master).
func subscribers(t *testing.T, tg redistest.Target, channel string) int64 {
	t.Helper()
	ctx := context.Background()
	if cc, ok := tg.Client.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, channel)
		if err != nil {
			t.Fatal(err)
		}
		return m.PubSubShardNumSub(ctx, channel).Val()[channel]
	}
	return tg.Client.PubSubNumSub(ctx, channel).Val()[channel]
}

// waitInBackground starts g.AcquireWait(job, budget) and waits until its
// subscription is confirmed (within); it returns the wait's error and the count
// of reads it made after a confirmed subscription.
func waitInBackground(t *testing.T, g *gate.Gate, job string, budget, within time.Duration) (<-chan error, *atomic.Int32) {
	t.Helper()
	subscribed := new(atomic.Int32)
	t.Cleanup(setWaitHooks(nil, func(string) { subscribed.Add(1) }))
	done := make(chan error, 1)
	spawn(t, func(ctx context.Context) {
		_, err := g.AcquireWait(ctx, job, budget)
		done <- err
	})
	waitUntil(t, within, "waiter subscribed", func() bool { return subscribed.Load() >= 1 })
	return done, subscribed
}

// wantDone fails t unless the waiter's wait ends in ErrDone within.
func wantDone(t *testing.T, done <-chan error, within time.Duration) {
	t.Helper()
	select {
	case err := <-done:
		if !errors.Is(err, gate.ErrDone) {
			t.Fatalf("AcquireWait: %v, want ErrDone", err)
		}
	case <-time.After(within):
		t.Fatalf("waiter not answered within %v", within)
	}
}

// polled reports whether rec saw the WarnWaitPolling warning.
func polled(rec *recorder) bool { return pollWarnings(rec.drain()) > 0 }

// countSubscribed installs a subscribed hook that counts the reads made
// after a confirmed subscription, per job.
func countSubscribed(t *testing.T) func(job string) int64 {
	t.Helper()
	var mu sync.Mutex
	n := map[string]int64{}
	t.Cleanup(setWaitHooks(nil, func(job string) {
		mu.Lock()
		n[job]++
		mu.Unlock()
	}))
	return func(job string) int64 {
		mu.Lock()
		defer mu.Unlock()
		return n[job]
	}
}

func atomicAdd(p *int64) int64 { return atomic.AddInt64(p, 1) }

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

// watchedCooldown is a job's cooldown that a watcher on a real server
// must see begin: the read a settle's message wakes it for comes late on
// a busy machine (100 ms was missed), not seconds late. miniredis, its
// clock still, keeps short ones.
func watchedCooldown(tg redistest.Target) time.Duration {
	if tg.FastForward != nil {
		return 100 * time.Millisecond
	}
	return 2 * time.Second
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
func gateTraffic(name string) bool { return !redistest.ClientCommand(name) }
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
func hook(tg redistest.Target, h redis.Hook) { hookClient(tg.Client, h) }

// hookClient adds h to c, or, on a cluster, to each node's client as it
// is made (c not used yet).
func hookClient(c redis.UniversalClient, h redis.Hook) {
	if cc, ok := c.(*redis.ClusterClient); ok {
		cc.OnNewNode(func(n *redis.Client) { n.AddHook(h) })
		return
	}
	c.AddHook(h)
}

// proxied returns a fault proxy in front of srv and a client through it.
func proxied(t *testing.T, srv *redistest.Srv) (*faultproxy.Proxy, *redis.Client) {
	t.Helper()
	p := faultproxy.New(t, srv.Addr())
	c := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return p, c
}

func jobName(i int) string { return "doc-" + string(rune('a'+i%26)) + "-" + itoa(i) }

func okFn(context.Context, *gate.Lease) error { return nil }

var errTransient = classify.Transient(errBoom, 0)

// blocked runs a Do that must be refused, and returns the refusal.
func blocked(t *testing.T, g *gate.Gate, job string) *gate.BlockedError {
	t.Helper()
	err := g.Do(context.Background(), job, func(context.Context, *gate.Lease) error {
		t.Fatalf("fn ran for %q, want a refusal", job)
		return nil
	})
	var b *gate.BlockedError
	if !errors.As(err, &b) {
		t.Fatalf("Do(%q): %v, want a *BlockedError", job, err)
	}
	return b
}

// upstreamForms runs f on one miniredis through the one-node client and
// through a scripting-only wrapper, which makes the gate take the cluster
// form (the upstream read and written on its own slot).
func upstreamForms(t *testing.T, f func(t *testing.T, rdb gate.Client, advance func(time.Duration))) {
	for _, form := range []string{"one node", "cluster form"} {
		t.Run(form, func(t *testing.T) {
			m, c := redistest.Miniredis(t)
			var rdb gate.Client = c
			if form == "cluster form" {
				rdb = &gatetest.Flaky{Client: c}
			}
			f(t, rdb, func(d time.Duration) { redistest.Advance(m, d) })
		})
	}
}

// upstreamClassifier stands in for classify.Default with fixed verdicts.
func upstreamClassifier(hint time.Duration) classify.Func {
	return func(err error) classify.Verdict {
		switch {
		case errors.Is(err, errRateLimited):
			return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonRateLimited, RetryAfter: hint, ProviderWide: true}
		case errors.Is(err, errOverloaded):
			return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonOverloaded, ProviderWide: true}
		case errors.Is(err, err500):
			return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonUpstream5xx}
		case errors.Is(err, errQuota):
			return classify.Verdict{Class: classify.ClassSystemic, Reason: classify.ReasonQuotaExhausted, ProviderWide: true}
		}
		return classify.Default(err)
	}
}

func upstreamGate(t *testing.T, tg redistest.Target, prefix string, o gate.Options) *gate.Gate {
	t.Helper()
	o.Prefix = prefix
	if o.Upstream == "" {
		o.Upstream = "openai:prod-key"
	}
	if o.Classify == nil {
		o.Classify = upstreamClassifier(300 * time.Millisecond)
	}
	if o.Cooldown == 0 {
		o.Cooldown = time.Minute
	}
	return newGate(t, tg.Client, o)
}

// calls returns how often Redis ran cmd, from INFO commandstats.
func calls(t *testing.T, rdb *redis.Client, cmd string) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	return 0
}

// answered counts the commands a client sent that Redis answered.
type answered struct{ n atomic.Int64 }

func (a *answered) DialHook(next redis.DialHook) redis.DialHook { return next }
func (a *answered) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		a.n.Add(1)
		return err
	}
}
func (a *answered) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// watching starts a Watch of job that ends with the test.
func watching(t *testing.T, g *gate.Gate, job string) <-chan gate.Status {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch, err := g.Watch(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// nextState reads statuses from ch until one is in want, within d.
func nextState(t *testing.T, ch <-chan gate.Status, want gate.State, d time.Duration) gate.Status {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case st, ok := <-ch:
			if !ok {
				t.Fatalf("watch ended before %v", want)
			}
			if st.State == want {
				return st
			}
		case <-timer.C:
			t.Fatalf("no %v status within %v", want, d)
		}
	}
}

// upstreamStatus reads the state of g's first upstream (Options.Upstream),
// returning the error (firstUpstream fails the test on one); the zero
// UpstreamStatus (ready) for a gate without one.
func upstreamStatus(ctx context.Context, g *gate.Gate) (gate.UpstreamStatus, error) {
	ups, err := g.Upstreams(ctx)
	if err != nil || len(ups) == 0 {
		return gate.UpstreamStatus{}, err
	}
	return ups[0], nil
}

// The budget's readings, as the CLI's and gatequeue's tests make them too.
var (
	openAIHeader = gatetest.OpenAIRequests
	report       = gatetest.Report
)

// spentPair makes two processes' gates with opts on rdb, settles a call
// that makes their upstream known, and spends its budget as spend does.
func spentPair(t *testing.T, rdb gate.Client, opts gate.Options) (a, b *gate.Gate, l1, l2 *gate.Lease) {
	t.Helper()
	return spentPairRefilling(t, rdb, opts, time.Second)
}

// slowRefill is a request's refill for a test none of whose steps may
// see one: a busy machine can hold a step for a second (then a caller
// meant to wait in line is admitted at once), not for ten.
const slowRefill = 10 * time.Second

// spentPairRefilling is spentPair with a request refilling every refill.
func spentPairRefilling(t *testing.T, rdb gate.Client, opts gate.Options, refill time.Duration) (a, b *gate.Gate, l1, l2 *gate.Lease) {
	t.Helper()
	a, b = newGate(t, rdb, opts), newGate(t, rdb, opts)
	knownUpstream(t, a) // calls beside one in flight: not one at a time
	l1, l2 = spendRefilling(t, a, b, refill)
	return a, b, l1, l2
}

// spend reports a budget of 60 requests a minute with 3 left (a request
// refills in a second, longer than the test's steps on an idle machine)
// through a, and takes the two calls it has room for beside its reserve
// of one.
func spend(t *testing.T, a, b *gate.Gate) (l1, l2 *gate.Lease) {
	t.Helper()
	return spendRefilling(t, a, b, time.Second)
}

// spendRefilling is spend with a request refilling every refill: 57 of
// 60 requests to refill, the header's reset 57 refills away.
func spendRefilling(t *testing.T, a, b *gate.Gate, refill time.Duration) (l1, l2 *gate.Lease) {
	t.Helper()
	ctx := context.Background()
	report(t, a, "first", openAIHeader(3, 60, (57*refill).String()))
	l1, err := a.Acquire(ctx, "j1")
	if err != nil {
		t.Fatalf("first call with 3 left: %v", err)
	}
	if l2, err = b.Acquire(ctx, "j2"); err != nil {
		t.Fatalf("second call with 2 left: %v", err)
	}
	return l1, l2
}

// granted waits (20 s at most) for an AcquireWait's answer and returns its
// lease; no answer, or a refusal, fails t with what.
func granted(t *testing.T, ch <-chan gatetest.Acquired, what string) *gate.Lease {
	t.Helper()
	return grantedWithin(t, ch, 20*time.Second, what)
}

// grantedWithin is granted waiting at most within.
func grantedWithin(t *testing.T, ch <-chan gatetest.Acquired, within time.Duration, what string) *gate.Lease {
	t.Helper()
	select {
	case r := <-ch:
		if r.Err != nil {
			t.Fatalf("%s: %v", what, r.Err)
		}
		return r.Lease
	case <-time.After(within):
		t.Fatalf("%s: no answer in %v", what, within)
		return nil
	}
}

// refusedAsCooling checks that g refuses "job" as cooling down for about
// cooldown, the failure's settle unwritten, and that rec saw the
// settle_unwritten warning.
func refusedAsCooling(t *testing.T, g *gate.Gate, rec *recorder, cooldown time.Duration) {
	t.Helper()
	b := blocked(t, g, "job")
	if b.State != gate.CoolingDown || b.RetryAfter < cooldown-time.Minute || b.RetryAfter > cooldown {
		t.Fatalf("retry: %v, retry in %v; want cooling down for about %v", b.State, b.RetryAfter, cooldown)
	}
	var warned bool
	for _, e := range rec.drain() {
		if e.Kind == gate.EventWarning && e.Reason == gate.WarnSettleUnwritten && e.State == gate.CoolingDown {
			warned = true
		}
	}
	if !warned {
		t.Fatal("no settle_unwritten warning")
	}
}
