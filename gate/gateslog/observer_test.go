package gateslog_test

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/retrygate/retrygate/internal/keyspace"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateslog"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
	"github.com/retrygate/retrygate/internal/testkit/syncbuf"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// logLines parses the JSON log lines written to buf so far.
func logLines(t *testing.T, buf *syncbuf.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q is not JSON: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

func newLogger(level slog.Level) (*slog.Logger, *syncbuf.Buffer) {
	buf := &syncbuf.Buffer{}
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: level})), buf
}

var errTimeout = errors.New("upstream timed out")

func classifyTimeout(error) classify.Verdict {
	return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonTimeout}
}

func TestLogsOneLinePerEvent(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			log, buf := newLogger(slog.LevelDebug)
			g, err := gate.New(tg.Client, gate.Options{Prefix: redistest.UniqueKey(t), Upstream: "openai",
				Cooldown: time.Hour, Classify: classifyTimeout,
				Observer: gateslog.New(log, gateslog.Options{}),
				Backoff:  gate.Backoff{Jitter: -1}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			_ = g.Do(ctx, "doc-1", func(context.Context, *gate.Lease) error { return errTimeout })
			_ = g.Do(ctx, "doc-1", func(context.Context, *gate.Lease) error { return nil })

			lines := logLines(t, buf)
			var got []string
			for _, l := range lines {
				got = append(got, l["level"].(string)+" "+l["msg"].(string))
			}
			if exp := "INFO retrygate acquired,INFO retrygate settled,DEBUG retrygate refused"; exp != strings.Join(got, ",") {
				t.Fatalf("lines: exp %s, got %s", exp, strings.Join(got, ","))
			}
			cooled := lines[1]
			for k, exp := range map[string]any{"event": "settled", "job": "doc-1", "upstream": "openai",
				"state": "cooling_down", "class": "transient", "reason": "timeout", "attempt": 1.0,
				"cooldown": float64(time.Hour)} {
				if got := cooled[k]; got != exp {
					t.Errorf("cooled_down %s: exp %v, got %v", k, exp, got)
				}
			}
			if f, _ := cooled["fence"].(float64); f <= 0 {
				t.Errorf("cooled_down fence: exp > 0, got %v", cooled["fence"])
			}
			if _, ok := cooled["held"]; !ok {
				t.Error("cooled_down: no held duration")
			}
			refused := lines[2]
			if exp, got := "cooling_down", refused["state"]; exp != got {
				t.Errorf("refused state: exp %v, got %v", exp, got)
			}
			if c, _ := refused["cooldown"].(float64); c < float64(59*time.Minute) {
				t.Errorf("refused cooldown (time left): exp ~1h, got %v", refused["cooldown"])
			}
		})
	}
}

func TestHashJobs(t *testing.T) {
	log, buf := newLogger(slog.LevelDebug)
	obs := gateslog.New(log, gateslog.Options{HashJobs: true})
	obs.Observe(context.Background(), gate.Event{Kind: gate.EventAcquired, Job: "user@example.com/secret", State: gate.Running})
	lines := logLines(t, buf)
	if exp, got := 1, len(lines); exp != got {
		t.Fatalf("lines: exp %d, got %d", exp, got)
	}
	if strings.Contains(buf.String(), "user@example.com") {
		t.Fatalf("job key leaked: %s", buf.String())
	}
	if exp, got := gateslog.HashJob("user@example.com/secret"), lines[0]["job_hash"]; exp != got {
		t.Fatalf("job_hash: exp %v, got %v", exp, got)
	}
	if exp, got := 16, len(gateslog.HashJob("x")); exp != got {
		t.Fatalf("hash length: exp %d, got %d", exp, got)
	}
	if gateslog.HashJob("a") == gateslog.HashJob("b") {
		t.Fatal("distinct jobs must hash apart")
	}
}

func TestLevels(t *testing.T) {
	for _, tc := range []struct {
		name string
		ev   gate.Event
		exp  slog.Level
	}{
		{"refused", gate.Event{Kind: gate.EventRefused}, slog.LevelDebug},
		{"renewed", gate.Event{Kind: gate.EventRenewed}, slog.LevelDebug},
		{"renew failed", gate.Event{Kind: gate.EventRenewed, Err: errors.New("down")}, slog.LevelWarn},
		{"acquired", gate.Event{Kind: gate.EventAcquired}, slog.LevelInfo},
		{"succeeded", gate.Event{Kind: gate.EventSettled, State: gate.Ready}, slog.LevelInfo},
		{"cooled down", gate.Event{Kind: gate.EventSettled, State: gate.CoolingDown}, slog.LevelInfo},
		{"marked failed", gate.Event{Kind: gate.EventSettled, State: gate.Failed}, slog.LevelInfo},
		{"not owned", gate.Event{Kind: gate.EventSettled, Err: gate.ErrNotOwned}, slog.LevelWarn},
		{"lease lost", gate.Event{Kind: gate.EventLeaseLost}, slog.LevelWarn},
		{"redis error", gate.Event{Kind: gate.EventRedisError}, slog.LevelWarn},
		{"fail open", gate.Event{Kind: gate.EventFailOpen}, slog.LevelWarn},
		{"warning", gate.Event{Kind: gate.EventWarning}, slog.LevelWarn},
		{"upstream cooling", gate.Event{Kind: gate.EventUpstreamCooling}, slog.LevelWarn},
		{"upstream paused", gate.Event{Kind: gate.EventUpstreamPaused}, slog.LevelError},
		{"upstream paused by an operator", gate.Event{Kind: gate.EventUpstreamPaused, Reason: gate.ReasonOperator}, slog.LevelWarn},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if exp, got := tc.exp, gateslog.Level(tc.ev); exp != got {
				t.Fatalf("exp %v, got %v", exp, got)
			}
			// At Info, Debug events are not written at all.
			log, buf := newLogger(slog.LevelInfo)
			tc.ev.Job = "j"
			gateslog.New(log, gateslog.Options{}).Observe(context.Background(), tc.ev)
			if exp, got := tc.exp >= slog.LevelInfo, len(logLines(t, buf)) == 1; exp != got {
				t.Fatalf("written at Info: exp %v, got %v", exp, got)
			}
		})
	}
}

// Lease loss is a Warn line with the error that caused it.
func TestLogsLeaseLoss(t *testing.T) {
	_, c := redistest.Miniredis(t)
	log, buf := newLogger(slog.LevelInfo)
	// A renewal is given Lease/3 to answer; with a 60 ms lease a loaded
	// machine missed those 20 ms and logged a redis_error (and could lose
	// the lease by timeout instead of by "not owned"). A 3 s lease gives it
	// a second, and its first renewal, the one that finds the lock gone,
	// still comes within a second.
	prefix := redistest.UniqueKey(t)
	g, err := gate.New(c, gate.Options{Prefix: prefix, Lease: 3 * time.Second, Observer: gateslog.New(log, gateslog.Options{}),
		Redis: gate.RedisPolicy{ContinueOnLeaseLost: true}})
	if err != nil {
		t.Fatal(err)
	}
	lock := keyspace.Job(prefix, "job")
	var _ error
	err = g.Do(context.Background(), "job", func(ctx context.Context, l *gate.Lease) error {
		c.Del(ctx, lock)
		deadline := time.Now().Add(time.Minute) // only so a gate that never notices cannot hang the test
		for !l.Lost() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	})
	if !errors.Is(err, gate.ErrNotOwned) {
		t.Fatalf("exp ErrNotOwned, got %v", err)
	}
	var got []string
	for _, l := range logLines(t, buf) {
		got = append(got, l["level"].(string)+" "+l["event"].(string))
	}
	if exp := "INFO acquired,WARN lease_lost,WARN settled"; exp != strings.Join(got, ",") {
		t.Fatalf("exp %s, got %s", exp, strings.Join(got, ","))
	}
	// With ContinueOnLeaseLost the settle follows, so the held time is reported once,
	// on not_owned, not on lease_lost too.
	lines := logLines(t, buf)
	if l := lines[1]; l["err"] == nil || l["held"] != nil {
		t.Errorf("lease_lost should carry err and no held: %v", l)
	}
	if l := lines[2]; l["held"] == nil {
		t.Errorf("not_owned should carry held: %v", l)
	}
}

func ExampleNew() {
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
	obs := gateslog.New(log, gateslog.Options{HashJobs: true})
	obs.Observe(context.Background(), gate.Event{Kind: gate.EventSettled, Job: "doc-42", State: gate.CoolingDown,
		Attempt: 2, Class: classify.ClassTransient, Reason: "rate_limited", Cooldown: 20 * time.Second})
	// Output:
	// level=INFO msg="retrygate settled" event=settled job_hash=6767023ae1fd50c6 state=cooling_down attempt=2 class=transient reason=rate_limited cooldown=20s
}

// A call refused by its upstream's budget logs what was left and that the
// budget refused; an acquire admitted by it, what was left after it.
func TestLogsTheBudget(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			log, buf := newLogger(slog.LevelDebug)
			g, err := gate.New(tg.Client, gate.Options{Prefix: redistest.UniqueKey(t), Upstream: "openai",
				Observer: gateslog.New(log, gateslog.Options{})})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			// OpenAI's documented headers (https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers),
			// with 2 requests left of 60.
			h := http.Header{}
			h.Set("x-ratelimit-limit-requests", "60")
			h.Set("x-ratelimit-remaining-requests", "2")
			h.Set("x-ratelimit-reset-requests", "58s")
			report := func(_ context.Context, l *gate.Lease) error {
				b, _ := classify.ParseBudget(h, time.Now())
				l.ObserveBudget(b)
				return nil
			}
			if err := g.Do(ctx, "first", report); err != nil {
				t.Fatal(err)
			}
			l, err := g.Acquire(ctx, "second") // 2 left: admitted, 1 left after it
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = l.Release(ctx) }()
			_ = g.Do(ctx, "third", report) // 1 left, below the reserve after it: refused
			lines := logLines(t, buf)
			var acquired, refused map[string]any
			for _, line := range lines {
				switch line["msg"] {
				case "retrygate acquired":
					acquired = line
				case "retrygate refused":
					refused = line
				}
			}
			if acquired == nil || acquired["budget_requests_left"] != 1.0 {
				t.Fatalf("the last acquire logged %v, want budget_requests_left 1", acquired)
			}
			if refused == nil || refused["budget_requests_left"] != 1.0 || refused["budget_spent"] != true {
				t.Fatalf("the refusal logged %v, want budget_requests_left 1 and budget_spent", refused)
			}
		})
	}
}

// Every record of a shadow gate says so; an enforcing gate's say nothing.
func TestLogsShadow(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	for _, shadow := range []bool{false, true} {
		log, buf := newLogger(slog.LevelDebug)
		g, err := gate.New(rdb, gate.Options{Prefix: redistest.UniqueKey(t), Cooldown: time.Hour, Classify: classifyTimeout,
			Shadow: shadow, Observer: gateslog.New(log, gateslog.Options{})})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		_ = g.Do(ctx, "doc-1", func(context.Context, *gate.Lease) error { return errTimeout })
		_ = g.Do(ctx, "doc-1", func(context.Context, *gate.Lease) error { return nil })
		lines := logLines(t, buf)
		if len(lines) < 3 {
			t.Fatalf("shadow %v: %d lines, want acquired, settled, refused", shadow, len(lines))
		}
		for _, l := range lines {
			if got, _ := l["shadow"].(bool); got != shadow {
				t.Errorf("shadow %v: the line %v", shadow, l)
			}
		}
	}
}
