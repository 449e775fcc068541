package stormtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
)

// RateLimited is a model that answers every call 429 with retry-after-ms:
// Window, and records when calls arrived.
type RateLimited struct {
	Window time.Duration

	mu    sync.Mutex
	calls []time.Time
	first time.Time // when the first 429 was sent
}

func (u *RateLimited) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	u.mu.Lock()
	u.calls = append(u.calls, time.Now())
	u.mu.Unlock()
	time.Sleep(10 * time.Millisecond) // a model takes a moment even to refuse
	w.Header().Set("Retry-After-Ms", fmt.Sprint(u.Window.Milliseconds()))
	w.WriteHeader(http.StatusTooManyRequests)
	u.mu.Lock()
	if u.first.IsZero() {
		u.first = time.Now()
	}
	u.mu.Unlock()
}

// burstSpan is how long after the first 429 a call still counts as in
// flight when it was sent: the gate writes the upstream's cooldown in its
// settle, a few ms after the answer.
const burstSpan = 50 * time.Millisecond

// Calls splits the calls so far into the burst in flight at the first 429
// and those after it; ok is false before the first 429.
func (u *RateLimited) Calls() (burst, after []time.Time, first time.Time, ok bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.first.IsZero() {
		return nil, nil, time.Time{}, false
	}
	for _, c := range u.calls {
		if c.Before(u.first.Add(burstSpan)) {
			burst = append(burst, c)
		} else {
			after = append(after, c)
		}
	}
	return burst, after, u.first, true
}

// AwaitCalls waits, at most within, until n calls came after the burst,
// and returns the burst and those calls; it fails t when they do not come.
func (u *RateLimited) AwaitCalls(t *testing.T, n int, within time.Duration) (burst, after []time.Time) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(10 * time.Millisecond) {
		var ok bool
		burst, after, _, ok = u.Calls()
		if ok && len(after) >= n {
			return burst, after
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %d calls after the burst of %d, want %d", within, len(after), len(burst), n)
		}
	}
}

// OnePerWindow fails t unless the burst was at most slots calls and the
// calls after it came at most one per Window. It returns how long after
// the first 429 the last call came.
func (u *RateLimited) OnePerWindow(t *testing.T, slots int) time.Duration {
	t.Helper()
	burst, after, first, ok := u.Calls()
	if !ok || len(after) == 0 {
		t.Fatalf("no call after the burst of %d", len(burst))
	}
	if len(burst) > slots {
		t.Fatalf("%d calls in the first burst, want at most the %d worker slots", len(burst), slots)
	}
	for i := 1; i < len(after); i++ {
		if gap := after[i].Sub(after[i-1]); gap < u.Window-burstSpan {
			t.Fatalf("upstream calls %d and %d only %v apart, want one per %v window", i-1, i, gap, u.Window)
		}
	}
	elapsed := after[len(after)-1].Sub(first)
	if max := int(elapsed/u.Window) + 1; len(after) > max {
		t.Fatalf("%d upstream calls in %v after the first 429, want at most %d", len(after), elapsed, max)
	}
	return elapsed
}

// Provider is a model called in process: it records when each call began
// and ended and answers with Respond(n), n counting calls from 1.
type Provider struct {
	Respond func(ctx context.Context, n int) error

	mu     sync.Mutex
	begins []time.Time
	ends   []time.Time
}

// Call is one call of the model.
func (p *Provider) Call(ctx context.Context) error {
	p.mu.Lock()
	p.begins = append(p.begins, time.Now())
	n := len(p.begins)
	p.mu.Unlock()
	err := p.Respond(ctx, n)
	p.mu.Lock()
	p.ends = append(p.ends, time.Now())
	p.mu.Unlock()
	return err
}

// Calls counts the calls begun.
func (p *Provider) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.begins)
}

// Gap is how long after call i ended call j began, counting from 0.
func (p *Provider) Gap(i, j int) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.begins[j].Sub(p.ends[i])
}

// RateLimitError is a 429 with the hint OpenAI sends in retry-after-ms, as
// an SDK returns it.
func RateLimitError(hint time.Duration) error {
	return &classify.HTTPError{StatusCode: http.StatusTooManyRequests,
		Header: http.Header{"Retry-After-Ms": {strconv.FormatInt(hint.Milliseconds(), 10)}}}
}

// CallModel is a worker's model call: POST body to url, and an answer of
// 300 or more as a *classify.HTTPError, as an SDK would return it.
func CallModel(ctx context.Context, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return &classify.HTTPError{StatusCode: resp.StatusCode, Header: resp.Header, Body: raw}
	}
	return nil
}

// StartWorker runs the test binary again as a worker process, with cfg as
// JSON in the environment variable env (the test's TestMain runs the
// worker when it is set), and stops it with SIGTERM in t.Cleanup; its
// stderr is logged if it does not exit cleanly.
func StartWorker(t *testing.T, env string, cfg any) {
	t.Helper()
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env+"="+string(raw))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("worker exited: %v\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("worker did not stop within 10 s of SIGTERM\n%s", stderr.String())
		}
	})
}
