package proof_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
)

// The worker process of TestSoakPausedRedis: the test binary started
// again with pausedWorkerEnv set (TestMain runs it instead of the tests).
// It reads the window's first job from stdin ("w <n>" lines; EOF ends
// it), runs two workers as the soak's in-process ones do, and writes each
// execution ("run <json>") and each success recorded in Redis ("done
// <json>") to stdout.
const pausedWorkerEnv = "RETRYGATE_PAUSED_WORKER"

// pausedWorkerConfig is what the soak passes its worker process.
type pausedWorkerConfig struct {
	Addr   string
	Prefix string
	Window int64
}

// pausedLine is one line of the worker: an execution, or (Done set) the
// time a success reached Redis as a Done mark.
type pausedLine struct {
	Job                string
	Called, Start, End int64 // unix ns
	Fence              int64
	Completed, Done    bool
	Err                string // "", "not_owned", "lease_lost" or the error's text
	RecordedAt         int64  // Done: unix ns
}

// runPausedWorker runs the worker if this process is one.
func runPausedWorker() (code int, ok bool) {
	raw, ok := os.LookupEnv(pausedWorkerEnv)
	if !ok {
		return 0, false
	}
	var cfg pausedWorkerConfig
	if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "paused worker:", err)
		return 1, true
	}
	pausedWork(cfg, os.Stdin, os.Stdout)
	return 0, true
}

func pausedWork(cfg pausedWorkerConfig, in io.Reader, out io.Writer) {
	var mu sync.Mutex
	emit := func(l pausedLine) {
		b, _ := json.Marshal(l)
		mu.Lock()
		fmt.Fprintf(out, "line %s\n", b)
		mu.Unlock()
	}
	c := redis.NewClient(&redis.Options{Addr: cfg.Addr, ContextTimeoutEnabled: true, DialTimeout: pausedTimeout,
		ReadTimeout: pausedTimeout, WriteTimeout: pausedTimeout, PoolTimeout: pausedTimeout})
	defer c.Close()
	obs := observerFunc(func(e gate.Event) {
		if e.Kind == gate.EventSettled && e.State == gate.Done && e.Err == nil {
			emit(pausedLine{Job: e.Job, Fence: e.Fence, Done: true, RecordedAt: time.Now().UnixNano()})
		}
	})
	g, err := gate.New(c, gate.Options{Lease: pausedLease, Retention: gate.Retention{Done: time.Hour}, Redis: gate.RedisPolicy{Timeout: pausedTimeout}, Prefix: cfg.Prefix,
		Classify: classifyTest, Observer: obs})
	if err != nil {
		fmt.Fprintln(out, "error", err)
		return
	}
	var first atomic.Int64
	ctx, stop := context.WithCancel(context.Background())
	go func() {
		defer stop()
		sc := bufio.NewScanner(in)
		for sc.Scan() {
			if n, err := strconv.ParseInt(strings.TrimPrefix(sc.Text(), "w "), 10, 64); err == nil {
				first.Store(n)
			}
		}
	}()
	fmt.Fprintln(out, "ready")
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(rand.Uint64(), uint64(w)))
			for ctx.Err() == nil {
				job := "job-" + strconv.FormatInt(first.Load()+rng.Int64N(cfg.Window), 10)
				hold := time.Duration(rng.IntN(20)) * time.Millisecond
				if rng.IntN(3) == 0 {
					hold = time.Duration(50+rng.IntN(100)) * time.Millisecond
				}
				l := pausedLine{Job: job, Called: time.Now().UnixNano()}
				ran := false
				err := g.Do(context.Background(), job, func(fctx context.Context, lease *gate.Lease) error {
					ran = true
					l.Start, l.Fence = time.Now().UnixNano(), lease.Fence()
					select {
					case <-fctx.Done():
						l.End = time.Now().UnixNano()
						return context.Cause(fctx)
					case <-time.After(hold):
					}
					l.End, l.Completed = time.Now().UnixNano(), true
					return nil
				})
				switch {
				case err == nil:
				case errors.Is(err, gate.ErrNotOwned):
					l.Err = "not_owned"
				case errors.Is(err, gate.ErrLeaseLost):
					l.Err = "lease_lost"
				default:
					l.Err = err.Error()
				}
				if ran {
					emit(l)
				}
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	fmt.Fprintln(out, "end")
}

// pausedWorker is the worker process, seen from the soak.
type pausedWorker struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	ended  chan struct{} // closed when its stdout ends
	stderr strings.Builder
}

// startPausedWorker starts the worker process as process proc and feeds
// what it reports into h, runs and ev; it returns once the worker is
// ready. stop ends it (closes its stdin) and waits for its last line.
func startPausedWorker(t *testing.T, cfg pausedWorkerConfig, proc int, first *atomic.Int64, h *history, runs *pausedRuns, ev *events) (stop func()) {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := &pausedWorker{cmd: exec.Command(os.Args[0], "-test.run=^$"), ended: make(chan struct{})}
	w.cmd.Env = append(os.Environ(), pausedWorkerEnv+"="+string(raw))
	w.cmd.Stderr = &w.stderr
	if w.in, err = w.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	outp, err := w.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.cmd.Process.Kill(); _ = w.cmd.Wait() })
	ready := make(chan struct{})
	go func() {
		defer close(w.ended)
		sc := bufio.NewScanner(outp)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			text := sc.Text()
			switch {
			case text == "ready":
				close(ready)
			case strings.HasPrefix(text, "line "):
				var l pausedLine
				if err := json.Unmarshal([]byte(strings.TrimPrefix(text, "line ")), &l); err != nil {
					t.Errorf("the worker process wrote %q: %v", text, err)
					continue
				}
				pausedFeed(l, proc, h, runs, ev)
			}
		}
	}()
	deadline := time.Now().Add(slack + 15*time.Second)
	for {
		select {
		case <-ready:
		case <-w.ended:
			t.Fatalf("the worker process ended before it was ready: %s", w.stderr.String())
		case <-time.After(5 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("the worker process was not ready within 15 s")
			}
			continue
		}
		break
	}
	// The window, as it moves.
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		last := int64(-1)
		for {
			select {
			case <-w.ended:
				return
			case <-time.After(5 * time.Millisecond):
			}
			if n := first.Load(); n != last {
				if _, err := fmt.Fprintf(w.in, "w %d\n", n); err != nil {
					return
				}
				last = n
			}
		}
	}()
	return func() {
		_ = w.in.Close()
		select {
		case <-w.ended:
		case <-time.After(slack + 10*time.Second):
			t.Errorf("the worker process did not end: %s", w.stderr.String())
		}
		<-fed
	}
}

// pausedFeed records a line of the worker process as the in-process
// workers' are recorded.
func pausedFeed(l pausedLine, proc int, h *history, runs *pausedRuns, ev *events) {
	if l.Done {
		at := time.Unix(0, l.RecordedAt)
		ev.mu.Lock()
		if ev.recorded == nil {
			ev.recorded = map[string]time.Time{}
		}
		ev.recorded[runKey(l.Job, l.Fence)] = at
		ev.mu.Unlock()
		ev.note(proc, at, fmt.Sprintf("settled done fence %d (worker process)", l.Fence), l.Job)
		return
	}
	var err error
	switch l.Err {
	case "":
	case "not_owned":
		err = gate.ErrNotOwned
	case "lease_lost":
		err = gate.ErrLeaseLost
	default:
		err = errors.New(l.Err)
	}
	e := &execution{worker: -1, job: l.Job, called: time.Unix(0, l.Called), start: time.Unix(0, l.Start), end: time.Unix(0, l.End),
		fence: l.Fence, gated: true, outcome: succeed, err: err}
	h.add(e)
	ev.note(proc, e.start, fmt.Sprintf("ran fence %d (worker process), completed %v, Do: %v", l.Fence, l.Completed, err), l.Job)
	runs.mu.Lock()
	runs.runs = append(runs.runs, &pausedRun{e: e, proc: proc, completed: l.Completed, err: err})
	runs.mu.Unlock()
}
