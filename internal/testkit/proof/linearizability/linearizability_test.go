package linearizability_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/faultproxy"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// The failures the clients' calls end in, marked so that the default
// classifier gives their class.
var (
	errTransient = classify.Transient(errors.New("upstream 503"), 0)
	errPermanent = classify.Permanent(errors.New("upstream 400: bad request"))
)

// The job state machine as a sequential specification for porcupine.
// Leases, cooldowns and marks are long (minutes) in the recorded runs, so
// nothing expires while they run and Reset returns a job to Ready: see
// doc.go for why expiry is left out of the model.

type linOp uint8

const (
	linAcquire linOp = iota
	linSucceed
	linRelease
	linFailTransient
	linFailPermanent
	linStatus
	linReset
)

var linOpNames = [...]string{"acquire", "succeed", "release", "fail(transient)", "fail(permanent)", "status", "reset"}

// linInput is one call. fence names the lease a settle is for.
type linInput struct {
	op    linOp
	job   string
	fence int64
}

// linOutput is what the gate answered. ok: the lease was granted, the
// settle owned the lock, the reset cleared the job. state: the state
// refused by, left by the settle, or reported by status. fence: the
// granted fence (acquire) or the job's last fence (status). attempts:
// failures since the last success, as Acquire (Attempt-1 when granted,
// BlockedError.Attempts when refused), a failure's settle and Status
// report them.
type linOutput struct {
	ok       bool
	state    gate.State
	fence    int64
	attempts int
}

// linState is one job's state in Redis.
type linState struct {
	state     gate.State
	owner     int64 // the running lease's fence
	lastFence int64
	// shown is the fence Status reports: the last one, until the job's key
	// is deleted (a reset, or a release that leaves no attempt count), when
	// it is 0. New fences still exceed lastFence (Redis's clock).
	shown    int64
	attempts int
}

// linModel is the specification for a gate with MaxAttempts maxAttempts
// and a DoneTTL (success keeps the job Done).
func linModel(maxAttempts int) porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byJob := map[string][]porcupine.Operation{}
			var order []string
			for _, op := range history {
				j := op.Input.(linInput).job
				if _, ok := byJob[j]; !ok {
					order = append(order, j)
				}
				byJob[j] = append(byJob[j], op)
			}
			parts := make([][]porcupine.Operation, 0, len(order))
			for _, j := range order {
				parts = append(parts, byJob[j])
			}
			return parts
		},
		Init: func() any { return linState{state: gate.Ready} },
		Step: func(state, input, output any) (bool, any) {
			s, in, out := state.(linState), input.(linInput), output.(linOutput)
			owned := s.state == gate.Running && s.owner == in.fence
			switch in.op {
			case linAcquire:
				if s.state != gate.Ready {
					return !out.ok && out.state == s.state && out.attempts == s.attempts, s
				}
				if !out.ok || out.fence <= s.lastFence || out.attempts != s.attempts {
					return false, s
				}
				return true, linState{state: gate.Running, owner: out.fence, lastFence: out.fence, shown: out.fence, attempts: s.attempts}
			case linSucceed, linRelease, linFailTransient, linFailPermanent:
				if !owned {
					return !out.ok, s
				}
				n := s
				n.owner = 0
				switch in.op {
				case linSucceed:
					n.state, n.attempts = gate.Done, 0
				case linRelease:
					n.state = gate.Ready
					if n.attempts == 0 {
						n.shown = 0
					}
				case linFailTransient:
					n.attempts++
					n.state = gate.CoolingDown
					if maxAttempts > 0 && n.attempts >= maxAttempts {
						n.state = gate.Failed
					}
				case linFailPermanent:
					n.attempts++
					n.state = gate.Failed
				}
				if !out.ok || out.state != n.state {
					return false, s
				}
				if (in.op == linFailTransient || in.op == linFailPermanent) && out.attempts != n.attempts {
					return false, s
				}
				return true, n
			case linStatus:
				// A run taken on a free key records its fence at its first
				// renewal: until then Status shows none.
				fence := out.fence == s.shown || (s.state == gate.Running && out.fence == 0)
				return out.state == s.state && fence && out.attempts == s.attempts, s
			case linReset:
				if s.state == gate.Running {
					return !out.ok, s
				}
				n := s
				n.state, n.attempts, n.shown = gate.Ready, 0, 0
				return out.ok, n
			}
			return false, s
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(linInput), output.(linOutput)
			switch in.op {
			case linAcquire:
				if out.ok {
					return fmt.Sprintf("acquire → fence %d (attempts %d)", out.fence, out.attempts)
				}
				return fmt.Sprintf("acquire → refused %v (attempts %d)", out.state, out.attempts)
			case linStatus:
				return fmt.Sprintf("status → %v fence %d attempts %d", out.state, out.fence, out.attempts)
			case linReset:
				return fmt.Sprintf("reset → %v", out.ok)
			}
			if !out.ok {
				return fmt.Sprintf("%s(%d) → not owned", linOpNames[in.op], in.fence)
			}
			return fmt.Sprintf("%s(%d) → %v (attempts %d)", linOpNames[in.op], in.fence, out.state, out.attempts)
		},
		DescribeState: func(state any) string {
			s := state.(linState)
			if s.state == gate.Running {
				return fmt.Sprintf("running(%d) last %d attempts %d", s.owner, s.lastFence, s.attempts)
			}
			return fmt.Sprintf("%v last %d attempts %d", s.state, s.lastFence, s.attempts)
		},
	}
}

// linRecorder collects timed operations from many clients.
type linRecorder struct {
	base time.Time
	mu   sync.Mutex
	ops  []porcupine.Operation
}

func (r *linRecorder) record(client int, in linInput, call time.Time, out linOutput) {
	op := porcupine.Operation{ClientId: client, Input: in, Call: call.Sub(r.base).Nanoseconds(),
		Output: out, Return: time.Since(r.base).Nanoseconds()}
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// checkLinearizable checks ops against model within timeout and, when
// they are not linearizable, writes porcupine's visualisation to
// $RETRYGATE_ARTIFACTS (or the temp dir) and fails t with its path.
func checkLinearizable(t *testing.T, model porcupine.Model, ops []porcupine.Operation, timeout time.Duration) porcupine.CheckResult {
	t.Helper()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	t.Logf("porcupine: %d operations checked in %v: %s", len(ops), time.Since(start).Round(time.Millisecond), res)
	if res == porcupine.Ok {
		return res
	}
	path, err := writeVisualization(t, model, info)
	if err != nil {
		t.Errorf("writing the visualisation: %v", err)
	}
	t.Errorf("history is %s (not proven linearizable); visualisation: %s", res, path)
	return res
}

func writeVisualization(t *testing.T, model porcupine.Model, info porcupine.LinearizationInfo) (string, error) {
	dir := os.Getenv("RETRYGATE_ARTIFACTS")
	if dir == "" {
		dir = os.TempDir() // not t.TempDir: the file must outlive the test
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "linearizability-"+filepath.Base(t.Name())+"-*.html")
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := porcupine.Visualize(model, info, f); err != nil {
		return f.Name(), err
	}
	return f.Name(), f.Close()
}

// TestLinearizable records the operations of 8 concurrent clients, each a
// separate process with its own gate and connection, issuing random
// acquires, settles, statuses and resets on two jobs through a proxy that
// injects varying latency into real Redis, and checks with porcupine that
// the history is linearizable against the job state machine.
func TestLinearizable(t *testing.T) {
	srv := redistest.Server(t)
	p := faultproxy.New(t, srv.Addr())
	const (
		clients      = 8
		opsPerClient = 100
		maxAttempts  = 3
	)
	long := 10 * time.Minute
	o := gate.Options{Lease: long, Cooldown: long, Retention: gate.Retention{Done: long, Failed: long}, Backoff: gate.Backoff{MaxAttempts: maxAttempts, Jitter: -1}}
	o.Prefix = redistest.UniqueKey(t)
	gs := make([]*gate.Gate, clients)
	for i := range gs {
		// Every command bounded even when the proxy delays it, no retries.
		c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, DialTimeout: 5 * time.Second,
			ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, PoolTimeout: 5 * time.Second, MaxRetries: 0})
		t.Cleanup(func() { _ = c.Close() })
		gs[i] = gatetest.New(t, c, o)
	}
	jobs := []string{"job-a", "job-b"}
	// The model is the job's state machine; the default upstream's
	// admission runs one call at a time until a call settles (it learns
	// then that the provider sends no rate-limit headers) and would refuse
	// job-b while job-a runs. One call on another job settles it first.
	if err := gs[0].Do(context.Background(), "warm-up", func(context.Context, *gate.Lease) error { return nil }); err != nil {
		t.Fatal(err)
	}

	ctx, stop := context.WithCancel(context.Background())
	var chaos sync.WaitGroup
	chaos.Add(1)
	go func() { // latency from 0 to 3ms, changing every 10ms
		defer chaos.Done()
		defer p.SetLatency(0)
		for ctx.Err() == nil {
			p.SetLatencyToServer(time.Duration(rand.IntN(3000)) * time.Microsecond)
			p.SetLatencyToClient(time.Duration(rand.IntN(3000)) * time.Microsecond)
			select {
			case <-ctx.Done():
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()

	rec := &linRecorder{base: time.Now()}
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := linClient(rec, gs[c], c, jobs, opsPerClient, rand.New(rand.NewPCG(rand.Uint64(), uint64(c)))); err != nil {
				t.Errorf("client %d: %v", c, err)
			}
		}()
	}
	wg.Wait()
	stop()
	chaos.Wait()
	if t.Failed() {
		return
	}
	counts := map[string]int{}
	for _, op := range rec.ops {
		in, out := op.Input.(linInput), op.Output.(linOutput)
		counts[fmt.Sprintf("%s:%v", linOpNames[in.op], out.ok)]++
	}
	t.Logf("history: %v", counts)
	if counts["acquire:true"] < 10 || counts["fail(transient):true"] == 0 || counts["reset:true"] == 0 {
		t.Errorf("the history exercised too little: %v", counts)
	}
	checkLinearizable(t, linModel(maxAttempts), rec.ops, 30*time.Second)
}

// linClient runs n random operations on g as client c. It holds at most
// one lease per job, settles about half of the time it could, and
// settles what it holds at the end.
func linClient(rec *linRecorder, g *gate.Gate, c int, jobs []string, n int, rng *rand.Rand) error {
	ctx := context.Background()
	held := map[string]*gate.Lease{}
	settle := func(job string, op linOp) error {
		l := held[job]
		delete(held, job)
		in := linInput{op: op, job: job, fence: l.Fence()}
		call := time.Now()
		var (
			err error
			out linOutput
		)
		switch op {
		case linSucceed:
			// A written success keeps the job Done (the options set
			// DoneTTL); Succeed says only whether it was written.
			err, out.state = l.Succeed(ctx), gate.Done
		case linRelease:
			err, out.state = l.Release(ctx), gate.Ready
		case linFailTransient, linFailPermanent:
			ferr := errTransient
			if op == linFailPermanent {
				ferr = errPermanent
			}
			// Settle's *CallError says what the failure recorded.
			var ce *gate.CallError
			if !errors.As(l.Settle(ctx, ferr), &ce) {
				return fmt.Errorf("%s: no *CallError", linOpNames[op])
			}
			err, out.state, out.attempts = ce.SettleErr, ce.State, ce.Attempts
		}
		out.ok = err == nil
		if err != nil && !errors.Is(err, gate.ErrNotOwned) {
			return fmt.Errorf("%s: %w", linOpNames[op], err)
		}
		rec.record(c, in, call, out)
		return nil
	}
	for range n {
		job := jobs[rng.IntN(len(jobs))]
		if held[job] != nil && rng.IntN(2) == 0 {
			if err := settle(job, []linOp{linSucceed, linRelease, linFailTransient, linFailTransient, linFailPermanent}[rng.IntN(5)]); err != nil {
				return err
			}
			continue
		}
		call := time.Now()
		switch r := rng.IntN(10); {
		case r < 5 && held[job] == nil:
			l, err := g.Acquire(ctx, job)
			var b *gate.BlockedError
			switch {
			case err == nil:
				held[job] = l
				rec.record(c, linInput{op: linAcquire, job: job}, call, linOutput{ok: true, fence: l.Fence(), attempts: l.Attempt() - 1})
			case errors.As(err, &b):
				rec.record(c, linInput{op: linAcquire, job: job}, call, linOutput{state: b.State, attempts: b.Attempts})
			default:
				return fmt.Errorf("acquire: %w", err)
			}
		case r < 7:
			st, err := g.Status(ctx, job)
			if err != nil {
				return fmt.Errorf("status: %w", err)
			}
			rec.record(c, linInput{op: linStatus, job: job}, call, linOutput{state: st.State, fence: st.Fence, attempts: st.Attempts})
		default:
			err := g.Reset(ctx, job)
			if err != nil && !errors.Is(err, gate.ErrInFlight) {
				return fmt.Errorf("reset: %w", err)
			}
			rec.record(c, linInput{op: linReset, job: job}, call, linOutput{ok: err == nil})
		}
	}
	for job := range held {
		if err := settle(job, linRelease); err != nil {
			return err
		}
	}
	return nil
}

// TestLinearizabilityCheckRejects feeds the model histories the gate must
// never produce and asserts porcupine rejects them, so TestLinearizable
// can fail; it also writes one visualisation to show the path works.
func TestLinearizabilityCheckRejects(t *testing.T) {
	model := linModel(3)
	op := func(client int, call, ret int64, in linInput, out linOutput) porcupine.Operation {
		return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
	}
	acq := linInput{op: linAcquire, job: "j"}
	for _, tc := range []struct {
		name  string
		ops   []porcupine.Operation
		legal bool
	}{
		{"acquire, fail, refused while cooling", []porcupine.Operation{
			op(0, 0, 1, acq, linOutput{ok: true, fence: 10}),
			op(0, 2, 3, linInput{op: linFailTransient, job: "j", fence: 10}, linOutput{ok: true, state: gate.CoolingDown, attempts: 1}),
			op(1, 4, 5, acq, linOutput{state: gate.CoolingDown, attempts: 1}),
		}, true},
		{"concurrent acquires, one wins", []porcupine.Operation{
			op(0, 0, 10, acq, linOutput{ok: true, fence: 10}),
			op(1, 0, 10, acq, linOutput{state: gate.Running}),
		}, true},
		{"two owners at once", []porcupine.Operation{
			op(0, 0, 10, acq, linOutput{ok: true, fence: 10}),
			op(1, 0, 10, acq, linOutput{ok: true, fence: 11}),
		}, false},
		{"second acquire granted after the first returned", []porcupine.Operation{
			op(0, 0, 1, acq, linOutput{ok: true, fence: 10}),
			op(1, 2, 3, acq, linOutput{ok: true, fence: 11}),
		}, false},
		{"fence went backwards", []porcupine.Operation{
			op(0, 0, 1, acq, linOutput{ok: true, fence: 10}),
			op(0, 2, 3, linInput{op: linRelease, job: "j", fence: 10}, linOutput{ok: true, state: gate.Ready}),
			op(1, 4, 5, acq, linOutput{ok: true, fence: 9}),
		}, false},
		{"ran while cooling", []porcupine.Operation{
			op(0, 0, 1, acq, linOutput{ok: true, fence: 10}),
			op(0, 2, 3, linInput{op: linFailTransient, job: "j", fence: 10}, linOutput{ok: true, state: gate.CoolingDown, attempts: 1}),
			op(1, 4, 5, acq, linOutput{ok: true, fence: 11, attempts: 1}),
		}, false},
		{"stale status after a settle returned", []porcupine.Operation{
			op(0, 0, 1, acq, linOutput{ok: true, fence: 10}),
			op(0, 2, 3, linInput{op: linSucceed, job: "j", fence: 10}, linOutput{ok: true, state: gate.Done}),
			op(1, 4, 5, linInput{op: linStatus, job: "j"}, linOutput{state: gate.Running, fence: 10}),
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := porcupine.CheckOperationsTimeout(model, tc.ops, 5*time.Second)
			if exp := map[bool]porcupine.CheckResult{true: porcupine.Ok, false: porcupine.Illegal}[tc.legal]; res != exp {
				t.Fatalf("exp %s, got %s", exp, res)
			}
		})
	}

	// The failure path writes a visualisation a human can open.
	bad := []porcupine.Operation{
		op(0, 0, 1, acq, linOutput{ok: true, fence: 10}),
		op(1, 2, 3, acq, linOutput{ok: true, fence: 11}),
	}
	t.Setenv("RETRYGATE_ARTIFACTS", t.TempDir())
	res, info := porcupine.CheckOperationsVerbose(model, bad, 5*time.Second)
	if res != porcupine.Illegal {
		t.Fatalf("exp Illegal, got %s", res)
	}
	path, err := writeVisualization(t, model, info)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() < 1000 {
		t.Fatalf("visualisation %s: %v, %v", path, fi, err)
	}
}
