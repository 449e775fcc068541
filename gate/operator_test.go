package gate_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// operatorRefusal checks that err is the refusal of an operator's pause
// of upstream with note, at most d left.
func operatorRefusal(t *testing.T, err error, upstream, note string, d time.Duration) {
	t.Helper()
	var b *gate.BlockedError
	if !errors.As(err, &b) || !errors.Is(err, gate.ErrUpstreamCooling) {
		t.Fatalf("%v, want ErrUpstreamCooling", err)
	}
	u := b.Upstreams[0]
	if b.Reason != gate.ReasonOperator || u.State != gate.Paused || u.Note != note || u.Upstream != upstream ||
		b.RetryAfter <= 0 || b.RetryAfter > d {
		t.Fatalf("refusal %+v (upstream %+v), want paused by an operator with %q, 0 < wait ≤ %v", b, u, note, d)
	}
	if msg := err.Error(); !strings.Contains(msg, "paused by an operator") || !strings.Contains(msg, note) {
		t.Fatalf("error text %q does not say who paused it and why", msg)
	}
}

// An operator's pause refuses the calls of its upstream in every process
// (four gates, four clients) from their next acquire, with the reason and
// the time left; it shows in Status, Upstreams and the events; and it ends
// by itself when its time is up: at once for every process, no probe.
func TestOperatorPauseStopsEveryProcess(t *testing.T) {
	const note = "key rotation"
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			prefix, up := redistest.UniqueKey(t), "openai"
			recs := make([]*recorder, 4)
			gates := make([]*gate.Gate, 4)
			for i := range gates {
				recs[i] = newRecorder()
				var c gate.Client = tg.Client
				if i > 0 {
					c = tg.OwnClient(t)
				}
				gates[i] = newGate(t, c, gate.Options{Prefix: prefix, Upstream: up, Observer: recs[i]})
				// Each has seen the upstream ready.
				if err := gates[i].Do(ctx, redistest.UniqueKey(t), okFn); err != nil {
					t.Fatal(err)
				}
			}
			d := time.Hour
			if tg.FastForward == nil {
				d = 300 * time.Millisecond // real time: short, polled
			}
			paused := time.Now()
			if err := gates[0].PauseUpstream(ctx, up, d, note); err != nil {
				t.Fatal(err)
			}
			for i, g := range gates {
				ran := false
				err := g.Do(ctx, redistest.UniqueKey(t), func(context.Context, *gate.Lease) error { ran = true; return nil })
				if ran {
					t.Fatalf("gate %d ran a call of the paused upstream", i)
				}
				operatorRefusal(t, err, up, note, d)
				st := mustStatus(t, g, "any")
				if st.Upstream.State != gate.Paused || st.Upstream.Note != note || st.Upstream.Reason != gate.ReasonOperator {
					t.Fatalf("gate %d: Status's upstream %+v", i, st.Upstream)
				}
				var refused int
				for _, e := range recs[i].drain() {
					if e.Kind == gate.EventRefused && e.Reason == gate.ReasonOperator && e.State == gate.UpstreamCooling {
						refused++
					}
				}
				if refused != 1 {
					t.Errorf("gate %d: %d refusal events with reason %q, want 1", i, refused, gate.ReasonOperator)
				}
			}
			// The event of the pause itself, in the process that paused.
			if _, err := gates[0].Upstreams(ctx); err != nil {
				t.Fatal(err)
			}
			if err := gates[0].PauseUpstream(ctx, up, d, note); err != nil {
				t.Fatal(err)
			}
			var pausedEv []gate.Event
			for _, e := range recs[0].drain() {
				if e.Kind == gate.EventUpstreamPaused {
					pausedEv = append(pausedEv, e)
				}
			}
			if len(pausedEv) != 1 || pausedEv[0].Reason != gate.ReasonOperator || pausedEv[0].Upstream != up ||
				pausedEv[0].Cooldown <= 0 || pausedEv[0].Cooldown > d {
				t.Fatalf("pause events %+v, want one EventUpstreamPaused, reason operator", pausedEv)
			}

			// It ends by itself, and not before its time.
			if tg.FastForward != nil {
				tg.FastForward(d)
			} else {
				deadline := time.Now().Add(10 * time.Second)
				for {
					err := gates[1].Do(ctx, redistest.UniqueKey(t), okFn)
					if err == nil {
						break
					}
					if !errors.Is(err, gate.ErrUpstreamCooling) || time.Now().After(deadline) {
						t.Fatalf("pause of %v not over %v later: %v", d, time.Since(paused), err)
					}
					time.Sleep(10 * time.Millisecond)
				}
				if took := time.Since(paused); took < d {
					t.Fatalf("pause of %v ended after %v", d, took)
				}
			}
			// No probe after it: every process runs at once, concurrently.
			ls := make([]*gate.Lease, len(gates))
			for i, g := range gates {
				l, err := g.Acquire(ctx, redistest.UniqueKey(t)+string(rune('a'+i)))
				if err != nil {
					t.Fatalf("gate %d after the pause: %v", i, err)
				}
				ls[i] = l
			}
			for _, l := range ls {
				if err := l.Succeed(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// ResumeUpstream ends an operator's pause early, for every process; it
// leaves a pause the provider caused to ResetUpstreams.
func TestResumeEndsOnlyTheOperatorsPause(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			prefix := redistest.UniqueKey(t)
			up := "openai:prod-key"
			opts := gate.Options{Prefix: prefix, Upstream: up, Classify: upstreamClassifier(300 * time.Millisecond), Cooldown: time.Minute}
			a := newGate(t, tg.Client, opts)
			b := newGate(t, tg.OwnClient(t), opts)
			if err := a.PauseUpstream(ctx, up, time.Hour, "incident 42"); err != nil {
				t.Fatal(err)
			}
			operatorRefusal(t, b.Do(ctx, "job", okFn), up, "incident 42", time.Hour)
			if err := b.ResumeUpstream(ctx, up); err != nil {
				t.Fatal(err)
			}
			for _, g := range []*gate.Gate{a, b} {
				if err := g.Do(ctx, redistest.UniqueKey(t), okFn); err != nil {
					t.Fatalf("after resume: %v", err)
				}
			}
			// The provider's pause: a quota failure.
			if err := failWith(t, a, "quota", errQuota); err == nil {
				t.Fatal("quota: want a failure")
			}
			if err := b.ResumeUpstream(ctx, up); err != nil {
				t.Fatal(err)
			}
			if ups, err := b.Upstreams(ctx); err != nil || ups[0].State != gate.Paused || ups[0].Reason == gate.ReasonOperator {
				t.Fatalf("a quota pause after ResumeUpstream: %+v, %v; want it kept", ups, err)
			}
		})
	}
}

// The operator's words are text, not a protocol: control bytes, escapes
// and bidirectional overrides become spaces, the length is bounded, and a
// ':' stays in the note.
func TestPauseNoteIsSafe(t *testing.T) {
	_, rdb := redistest.Miniredis(t)
	g := newGate(t, rdb, gate.Options{Upstream: "u"})
	ctx := context.Background()
	hostile := "key:\x1b[31mrotation\r\nstate ready\u202e\xff" + strings.Repeat("ü", 300)
	if err := g.PauseUpstream(ctx, "u", time.Hour, hostile); err != nil {
		t.Fatal(err)
	}
	ups, err := g.Upstreams(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := ups[0].Note
	if !strings.HasPrefix(n, "key: [31mrotation state ready ü") || len(n) > 200 || strings.ContainsFunc(n, func(r rune) bool {
		return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == unicode.ReplacementChar
	}) {
		t.Fatalf("note %q (%d bytes)", n, len(n))
	}
	// Bad arguments name themselves.
	for _, err := range []error{
		g.PauseUpstream(ctx, "other", time.Hour, ""),
		g.PauseUpstream(ctx, "u", 0, ""),
		g.ResumeUpstream(ctx, "other"),
	} {
		if !errors.Is(err, gate.ErrInvalidOptions) {
			t.Errorf("%v, want ErrInvalidOptions", err)
		}
	}
}
