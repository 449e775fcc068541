package retrygate_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/classify/goopenai"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/corpus"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// Every real provider response of classify/testdata/corpus, replayed by an
// httptest upstream to the real go-openai client with classify.Transport,
// under a gate with an Upstream, on miniredis, a real redis-server and the real
// cluster. The verdict each case expects comes from its source (provider
// docs, SDK tests, issue reports); what the gate does with a verdict is its
// documented state diagram (gate/doc.go):
//
//   - permanent on proof: the job is Failed (one attempt), the upstream
//     untouched;
//   - permanent, suspect (a rejection whose meaning the response does not
//     prove): the job cools like its own transient failure, one attempt;
//     the same rejection (reason and evidence) on its next attempt fails
//     it, with two;
//   - transient, the job's: the job cools for max(hint, Cooldown), one
//     attempt, the upstream untouched;
//   - transient, provider-wide: the job cools for the provider's hint (at
//     least 1 s; none: the upstream's Cooldown), no attempt counted, and the
//     upstream cools for the hint (else its Cooldown), at most MaxCooldown;
//   - systemic: the job cools with no attempt counted, never Failed; when
//     provider-wide (the key, the quota) the upstream pauses for its Cooldown
//     first (the hint when longer; each failed probe pauses it longer, up
//     to PauseTTL) and the job cools as long, else (one job's model or
//     permission) the job cools for max(hint, Cooldown) and the upstream is
//     untouched.
func TestCorpusThroughTheGate(t *testing.T) {
	cases, err := corpus.Load("classify/testdata/corpus")
	if err != nil {
		t.Fatal(err)
	}
	const (
		cooldown         = 5 * time.Minute
		maxCooldown      = time.Hour
		upstreamCooldown = 10 * time.Second
		pause            = 10 * time.Minute
	)
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.Name, func(t *testing.T) {
					upstream := httptest.NewServer(c)
					t.Cleanup(upstream.Close)
					cfg := openai.DefaultConfig("sk-test")
					cfg.BaseURL = upstream.URL + "/v1"
					cfg.HTTPClient = &goopenai.Transport{Doer: cfg.HTTPClient}
					client := openai.NewClientWithConfig(cfg)
					g, err := gate.New(tg.Client, gate.Options{Prefix: redistest.UniqueKey(t), Upstream: "provider",
						Cooldown:       cooldown,
						UpstreamPolicy: gate.UpstreamPolicy{Cooldown: upstreamCooldown, PauseTTL: pause},
						Backoff:        gate.Backoff{Max: maxCooldown, Jitter: -1}})
					if err != nil {
						t.Fatal(err)
					}
					ctx := context.Background()
					err = g.Do(ctx, "doc", func(ctx context.Context, _ *gate.Lease) error {
						_, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "m",
							Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}}})
						return err
					})
					var ce *gate.CallError
					if !errors.As(err, &ce) || ce.SettleErr != nil {
						t.Fatalf("Do: %v, want a settled *gate.CallError", err)
					}
					want := c.Expect
					if !c.Matches(ce.Verdict) {
						t.Fatalf("verdict %+v, want %+v (source %s)", ce.Verdict, want, c.Source)
					}
					hint := min(want.RetryAfter, maxCooldown)
					var (
						state       = gate.CoolingDown
						attempts    = 0
						jobWait     time.Duration
						upState     = gate.Ready
						upstreamFor time.Duration
					)
					switch {
					case want.Class == classify.ClassPermanent && !want.Suspect:
						state, attempts = gate.Failed, 1
					case want.Class == classify.ClassSystemic:
						jobWait = min(max(hint, cooldown), maxCooldown)
						if want.ProviderWide {
							first := min(max(hint, upstreamCooldown), maxCooldown)
							jobWait, upState, upstreamFor = first, gate.Paused, first
						}
					case want.ProviderWide && statedWait[c.Name] > 0:
						// The message says when one call fits: the job and
						// the upstream wait that, the upstream's budget
						// judging the retry (issue 31).
						jobWait, upState, upstreamFor = statedWait[c.Name], gate.CoolingDown, statedWait[c.Name]
					case want.ProviderWide:
						jobWait, upState, upstreamFor = upstreamCooldown, gate.CoolingDown, upstreamCooldown
						if hint > 0 {
							jobWait, upstreamFor = max(hint, time.Second), hint
						}
					default:
						jobWait, attempts = min(max(hint, cooldown), maxCooldown), 1
					}
					if ce.State != state || ce.Attempts != attempts || !near(ce.RetryAfter, jobWait) {
						t.Fatalf("job: %v, %d attempts, retry in %v; want %v, %d, %v", ce.State, ce.Attempts, ce.RetryAfter, state, attempts, jobWait)
					}
					if state == gate.CoolingDown && jobWait < time.Second {
						// A wait of a few milliseconds ("try again in
						// 6ms") may be over before Redis can be asked
						// again: the settle's answer above is its proof.
						return
					}
					st, err := g.Status(ctx, "doc")
					if err != nil {
						t.Fatal(err)
					}
					if st.State != state || !near(st.RetryAfter, jobWait) {
						t.Fatalf("status: %v, retry in %v; want %v, %v", st.State, st.RetryAfter, state, jobWait)
					}
					if up := st.Upstream; up.State != upState || !near(up.RetryAfter, upstreamFor) {
						t.Fatalf("upstream: %v for %v, want %v for %v", up.State, up.RetryAfter, upState, upstreamFor)
					}
					if want.Suspect {
						confirmSuspect(t, tg, c, upstream.URL)
					}
					// The next job of the upstream: refused without calling
					// the provider while the upstream cools or is paused.
					if upState != gate.Ready {
						err := g.Do(ctx, "another", func(context.Context, *gate.Lease) error {
							t.Error("a job ran while the upstream was not open")
							return nil
						})
						if !errors.Is(err, gate.ErrUpstreamCooling) {
							t.Fatalf("another job: %v, want ErrUpstreamCooling", err)
						}
					}
				})
			}
		})
	}
}

// statedWait is, for the rate limits of the corpus whose message states
// when to try again, that wait, as each message says it: it wins over the
// headers' hints (the time until a limit is whole, or a retry-after the
// message contradicts).
var statedWait = map[string]time.Duration{
	"429 rate limit with the headers the reporter captured":        2 * time.Second,               // "Try again in 2 seconds."
	"429 RESOURCE_EXHAUSTED with RetryInfo 53s":                    53016342224 * time.Nanosecond, // "Please retry in 53.016342224s."
	"429 tokens per minute with the documented headers":            5289 * time.Millisecond,       // "Please try again in 5.289s."
	"429 tokens per minute with the documented rate-limit headers": 6 * time.Millisecond,          // "Please try again in 6ms."
}

// near reports whether a wait read back from Redis is within a second
// below want (time passes between the write and the read; hints parsed
// from HTTP dates lose their fraction).
func near(got, want time.Duration) bool {
	return got <= want && got > want-time.Second-time.Millisecond
}

// confirmSuspect runs a suspect case's job twice under a gate with a short
// cooldown: the first rejection cools it (one attempt), the same
// rejection on its next attempt fails it, with two attempts and the
// evidence that decided.
func confirmSuspect(t *testing.T, tg redistest.Target, c corpus.Case, url string) {
	t.Helper()
	const cooldown = 20 * time.Millisecond
	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = url + "/v1"
	cfg.HTTPClient = &goopenai.Transport{Doer: cfg.HTTPClient}
	client := openai.NewClientWithConfig(cfg)
	g, err := gate.New(tg.Client, gate.Options{Prefix: redistest.UniqueKey(t), Cooldown: cooldown, Backoff: gate.Backoff{Jitter: -1}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	call := func() *gate.CallError {
		t.Helper()
		err := g.Do(ctx, "suspect", func(ctx context.Context, _ *gate.Lease) error {
			_, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "m",
				Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}}})
			return err
		})
		var ce *gate.CallError
		if !errors.As(err, &ce) {
			t.Fatalf("Do: %v, want a *gate.CallError", err)
		}
		return ce
	}
	wait := max(min(c.Expect.RetryAfter, time.Hour), cooldown)
	if ce := call(); ce.State != gate.CoolingDown || ce.Attempts != 1 {
		t.Fatalf("first rejection: %v, %d attempts; want cooling_down, 1", ce.State, ce.Attempts)
	}
	if wait > time.Minute {
		return // a long hint: the confirmation is decide_test's
	}
	if tg.FastForward != nil {
		tg.FastForward(wait)
	}
	for deadline := time.Now().Add(wait + 5*time.Second); ; {
		st, err := g.Status(ctx, "suspect")
		if err != nil {
			t.Fatal(err)
		}
		if st.State == gate.Ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cooldown did not end: %+v", st)
		}
		time.Sleep(5 * time.Millisecond)
	}
	ce := call()
	if ce.State != gate.Failed || ce.Attempts != 2 || ce.Verdict.Evidence == "" {
		t.Fatalf("the same rejection again: %v, %d attempts, %+v; want failed, 2, with its evidence", ce.State, ce.Attempts, ce.Verdict)
	}
	st, err := g.Status(ctx, "suspect")
	if err != nil {
		t.Fatal(err)
	}
	if st.State != gate.Failed || st.Reason != c.Expect.Reason || st.Evidence != ce.Verdict.Evidence {
		t.Fatalf("status after the confirmation: %+v, want failed for %s by %s", st, c.Expect.Reason, ce.Verdict.Evidence)
	}
}

// TestHoldoutThroughTheGate runs every held-out response
// (classify/testdata/holdout: collected from providers, gateways and
// servers the rules were not written on, some after the rules) as a job
// through the gate twice, the second time after its cooldown, and counts
// the jobs Failed: no job is ever Failed for an account, key, budget or
// model-availability problem (a suspect verdict on one would be confirmed
// on the second attempt and show here).
func TestHoldoutThroughTheGate(t *testing.T) {
	cases, err := corpus.Load("classify/testdata/holdout")
	if err != nil {
		t.Fatal(err)
	}
	m, rc := redistest.Miniredis(t)
	failed, systemic, systemicFailed := 0, 0, 0
	for _, c := range cases {
		upstream := httptest.NewServer(c)
		cfg := openai.DefaultConfig("sk-test")
		cfg.BaseURL = upstream.URL + "/v1"
		cfg.HTTPClient = &goopenai.Transport{Doer: cfg.HTTPClient}
		client := openai.NewClientWithConfig(cfg)
		g, err := gate.New(rc, gate.Options{Prefix: redistest.UniqueKey(t), Cooldown: time.Second, Backoff: gate.Backoff{Max: time.Minute, Jitter: -1}})
		if err != nil {
			t.Fatal(err)
		}
		var last *gate.CallError
		for attempt := 0; attempt < 2; attempt++ {
			err := g.Do(context.Background(), "job", func(ctx context.Context, _ *gate.Lease) error {
				_, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "m",
					Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}}})
				return err
			})
			if !errors.As(err, &last) {
				if errors.Is(err, gate.ErrFailed) {
					break // the job was Failed by the first attempt: last holds it
				}
				t.Fatalf("%s: Do: %v, want a *gate.CallError or ErrFailed", c.Name, err)
			}
			redistest.Advance(m, pastCooldown)
		}
		upstream.Close()
		if c.Expect.Class == classify.ClassSystemic {
			systemic++
			if last.State == gate.Failed {
				systemicFailed++
				t.Errorf("%s: an account, key, budget or model problem Failed the job: %+v (source %s)", c.Name, last.Verdict, c.Source)
			}
		}
		if last.State == gate.Failed {
			failed++
		}
	}
	if systemic < 30 {
		t.Fatalf("%d held-out account, key, budget or model cases, want at least 30", systemic)
	}
	t.Logf("%d held-out responses through the gate: %d jobs Failed, %d of them among the %d account, key, budget or model cases", len(cases), failed, systemicFailed, systemic)
}

// pastCooldown is past any cooldown of TestHoldoutThroughTheGate's gate
// (Backoff.Max, one minute), within the time it remembers a job's last
// rejection.
const pastCooldown = 2 * time.Minute
