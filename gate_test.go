package retrygate_test

// End-to-end tests through the public API on real Redis: several gates with
// their own clients, the real go-openai client against an httptest upstream,
// the default classifier.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"
	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/classify/goopenai"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// separateClients returns n clients of tg's backend, each with its own pool,
// as n processes would have.
func separateClients(t *testing.T, tg redistest.Target, n int) []redis.UniversalClient {
	t.Helper()
	var out []redis.UniversalClient
	for i := 0; i < n; i++ {
		var c redis.UniversalClient
		switch rc := tg.Client.(type) {
		case *redis.ClusterClient:
			c = redis.NewClusterClient(&redis.ClusterOptions{Addrs: rc.Options().Addrs})
		case *redis.Client:
			c = redis.NewClient(&redis.Options{Addr: rc.Options().Addr})
		default:
			t.Fatalf("unexpected client %T", tg.Client)
		}
		t.Cleanup(func() { c.Close() })
		out = append(out, c)
	}
	return out
}

// 4 gates (4 clients, as 4 processes) × 50 goroutines retry one failing job:
// fn runs once per cooldown window, never twice at once.
func TestStormRunsOncePerWindow(t *testing.T) {
	for _, tg := range redistest.RealTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			const cooldown = 200 * time.Millisecond
			// The storm runs until the job has run this many times, not for
			// a fixed time: 200 goroutines on a loaded machine may get
			// through fewer windows in a second than an idle one (it saw one
			// call in 1.1 s under load). What is asserted is the gap
			// between calls, which load can only widen.
			const want = 4
			prefix := redistest.UniqueKey(t)
			var (
				mu      sync.Mutex
				starts  []time.Time
				running atomic.Int32
				calls   atomic.Int32
			)
			fn := func(ctx context.Context, l *gate.Lease) error {
				if running.Add(1) != 1 {
					t.Error("two executions overlap")
				}
				mu.Lock()
				starts = append(starts, time.Now())
				mu.Unlock()
				calls.Add(1)
				time.Sleep(5 * time.Millisecond) // the model call
				running.Add(-1)
				return classify.Transient(errors.New("503 overloaded"), 0)
			}
			var wg sync.WaitGroup
			// Only so a gate that stops running the job cannot hang the test.
			deadline := time.Now().Add(time.Minute)
			refused := atomic.Int64{}
			for _, c := range separateClients(t, tg, 4) {
				g, err := gate.New(c, gate.Options{Prefix: prefix, Cooldown: cooldown, Lease: time.Second, Backoff: gate.Backoff{Factor: 1, Jitter: -1}})
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < 50; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for calls.Load() < want && time.Now().Before(deadline) {
							err := g.Do(context.Background(), "doc-1", fn)
							var b *gate.BlockedError
							if errors.As(err, &b) {
								refused.Add(1)
							}
							time.Sleep(2 * time.Millisecond)
						}
					}()
				}
			}
			wg.Wait()
			sort.Slice(starts, func(i, j int) bool { return starts[i].Before(starts[j]) })
			if len(starts) < want {
				t.Fatalf("only %d calls in a minute, want %d", len(starts), want)
			}
			// Each start is at least one cooldown after the previous one:
			// the cooldown starts when Redis records the previous call's
			// failure, after that call started (10 ms for clock slop).
			for i := 1; i < len(starts); i++ {
				if gap := starts[i].Sub(starts[i-1]); gap < cooldown-10*time.Millisecond {
					t.Fatalf("calls %d and %d only %v apart, cooldown %v", i-1, i, gap, cooldown)
				}
			}
			if refused.Load() == 0 {
				t.Fatal("no retry was refused: the storm never met the gate")
			}
			t.Logf("%d upstream calls, %d retries refused", len(starts), refused.Load())
		})
	}
}

// fakeOpenAI answers chat completions with the status, headers and body the
// test sets, and counts calls.
type fakeOpenAI struct {
	calls   atomic.Int64
	mu      sync.Mutex
	status  int
	header  http.Header
	body    string
	latency time.Duration
}

func (f *fakeOpenAI) set(status int, body string, kv ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.body, f.header = status, body, http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		f.header.Set(kv[i], kv[i+1])
	}
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	f.mu.Lock()
	status, body, header, latency := f.status, f.body, f.header.Clone(), f.latency
	f.mu.Unlock()
	time.Sleep(latency)
	for k, v := range header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	if status == 0 {
		status = http.StatusOK
		body = `{"id":"c1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"fine"},"finish_reason":"stop"}]}`
	}
	w.WriteHeader(status)
	fmt.Fprint(w, body)
}

func newOpenAI(t *testing.T, f *fakeOpenAI) *openai.Client {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = srv.URL + "/v1"
	cfg.HTTPClient = &goopenai.Transport{Doer: srv.Client()}
	return openai.NewClientWithConfig(cfg)
}

func evaluate(ctx context.Context, g *gate.Gate, c *openai.Client, doc string) (string, error) {
	return gate.Call(ctx, g, doc, func(ctx context.Context, l *gate.Lease) (string, error) {
		resp, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
			Model:    openai.GPT4oMini,
			Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "evaluate " + doc}},
		})
		if err != nil {
			return "", err
		}
		return resp.Choices[0].Message.Content, nil
	})
}

// The default classifier end to end through the real go-openai client.
func TestOpenAIFailuresThroughTheGate(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			f := &fakeOpenAI{}
			c := newOpenAI(t, f)
			g, err := gate.New(tg.Client, gate.Options{Prefix: redistest.UniqueKey(t), Cooldown: 100 * time.Millisecond, Backoff: gate.Backoff{Jitter: -1}})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()

			// 429 with retry-after-ms: the hint beats the smaller Cooldown.
			f.set(429, `{"error":{"message":"Rate limit reached for gpt-4o-mini","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, "retry-after-ms", "2500")
			_, err = evaluate(ctx, g, c, "doc-429")
			var ce *gate.CallError
			if !errors.As(err, &ce) || ce.State != gate.CoolingDown || ce.RetryAfter != 2500*time.Millisecond {
				t.Fatalf("429: %v (%+v), want cooling 2.5s", err, ce)
			}
			var apiErr *openai.APIError
			if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 429 {
				t.Fatalf("the go-openai error is not reachable: %v", err)
			}
			if st, _ := g.Status(ctx, "doc-429"); st.State != gate.CoolingDown || st.RetryAfter < 2*time.Second {
				t.Fatalf("status %+v", st)
			}
			calls := f.calls.Load()
			// The gate's upstream (the default) cools with it: every job waits.
			if _, err := evaluate(ctx, g, c, "doc-429"); !errors.Is(err, gate.ErrUpstreamCooling) || f.calls.Load() != calls {
				t.Fatalf("retry during cooldown: %v, upstream calls %d → %d", err, calls, f.calls.Load())
			}
			if err := g.ResetUpstreams(ctx); err != nil { // the next rows are each job's own
				t.Fatal(err)
			}

			// 400 context_length_exceeded: failed at once, reason safe to show.
			f.set(400, `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 200000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`)
			if _, err := evaluate(ctx, g, c, "doc-long"); !errors.As(err, &ce) || ce.State != gate.Failed {
				t.Fatalf("400: %v", err)
			}
			if st, _ := g.Status(ctx, "doc-long"); st.State != gate.Failed || st.Reason != classify.ReasonContextLength {
				t.Fatalf("status %+v", st)
			}

			// 401: not the job's fault, never Failed, no attempt counted.
			f.set(401, `{"error":{"message":"Incorrect API key provided: sk-test.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
			if _, err := evaluate(ctx, g, c, "doc-auth"); !errors.As(err, &ce) || ce.State != gate.CoolingDown || ce.Attempts != 0 {
				t.Fatalf("401: %v (%+v), want cooling with no attempt", err, ce)
			}
			// A bad key pauses the upstream: the next job makes no call.
			calls = f.calls.Load()
			if _, err := evaluate(ctx, g, c, "doc-ok"); !errors.Is(err, gate.ErrUpstreamCooling) || f.calls.Load() != calls {
				t.Fatalf("after a 401: %v, upstream calls %d → %d, want the upstream paused", err, calls, f.calls.Load())
			}
			if err := g.ResetUpstreams(ctx); err != nil { // the operator fixed the key
				t.Fatal(err)
			}

			// Success releases. (The 429s above taught the upstream a rate,
			// from one call at a time: the next call may be told to wait its
			// turn, a call's length.)
			f.set(0, "")
			out, err := evaluate(ctx, g, c, "doc-ok")
			if wait, ok := gate.RetryAfter(err); errors.Is(err, gate.ErrUpstreamCooling) && ok && wait < time.Second {
				time.Sleep(wait)
				out, err = evaluate(ctx, g, c, "doc-ok")
			}
			if err != nil || out != "fine" {
				t.Fatalf("success: %q %v", out, err)
			}
		})
	}
}

// Issue 7: 1,000 jobs retried concurrently from 4 gates against an upstream
// answering 429 retry-after: 30. Once the first 429 is recorded, only
// acquires already in flight may still call; a second wave makes no call at
// all until the 30 s pass (compressed here by shortening the upstream's TTL).
func TestUpstreamLeaksNoUpstreamCalls(t *testing.T) {
	for _, tg := range redistest.RealTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			f := &fakeOpenAI{latency: 20 * time.Millisecond}
			f.set(429, `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, "retry-after", "30")
			c := newOpenAI(t, f)
			prefix := redistest.UniqueKey(t)
			var gates []*gate.Gate
			for _, rc := range separateClients(t, tg, 4) {
				g, err := gate.New(rc, gate.Options{Prefix: prefix, Upstream: "openai:test-key", Cooldown: time.Minute})
				if err != nil {
					t.Fatal(err)
				}
				gates = append(gates, g)
			}
			var (
				recorded                     atomic.Bool  // the first 429 has been settled
				acquiring                    atomic.Int64 // calls between Do and fn (acquire in flight)
				inFlightAtRecord, lateStarts atomic.Int64
				once                         sync.Once
			)
			wave := func(n int) {
				var wg sync.WaitGroup
				for i := 0; i < n; i++ {
					wg.Add(1)
					go func(i int) {
						defer wg.Done()
						g := gates[i%len(gates)]
						acquiring.Add(1)
						entered := false
						_ = g.Do(context.Background(), fmt.Sprintf("doc-%d", i), func(ctx context.Context, l *gate.Lease) error {
							entered = true
							acquiring.Add(-1)
							if recorded.Load() {
								lateStarts.Add(1)
							}
							_, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: openai.GPT4oMini,
								Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}})
							return err
						})
						if entered {
							once.Do(func() {
								inFlightAtRecord.Store(acquiring.Load())
								recorded.Store(true)
							})
						} else {
							acquiring.Add(-1)
						}
					}(i)
				}
				wg.Wait()
			}
			wave(1000)
			first := f.calls.Load()
			if late, bound := lateStarts.Load(), inFlightAtRecord.Load(); late > bound {
				t.Fatalf("%d calls started after the upstream cooldown was recorded; only %d acquires were in flight", late, bound)
			}
			ups, err := gates[0].Upstreams(context.Background())
			if err != nil || ups[0].State != gate.CoolingDown || ups[0].RetryAfter < 29*time.Second {
				t.Fatalf("upstream %+v %v, want cooling for the provider's 30 s", ups, err)
			}
			t.Logf("first wave: %d upstream calls for 1000 jobs", first)

			wave(1000)
			if n := f.calls.Load() - first; n != 0 {
				t.Fatalf("second wave during the upstream cooldown made %d upstream calls", n)
			}

			// Compress the 30 s: the upstream key expires now.
			upstreamKey, _ := keyspace.Upstream(prefix, "openai:test-key")
			if err := tg.Client.PExpire(context.Background(), upstreamKey, time.Millisecond).Err(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(2 * time.Second)
			for f.calls.Load() == first && time.Now().Before(deadline) {
				_ = gates[1].Do(context.Background(), "doc-after", func(ctx context.Context, l *gate.Lease) error {
					_, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: openai.GPT4oMini,
						Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}})
					return err
				})
				time.Sleep(5 * time.Millisecond)
			}
			if f.calls.Load() == first {
				t.Fatal("calls did not resume after the upstream cooldown ended")
			}
		})
	}
}

// The HTTP path end to end: a real chi router, httpmw, the real go-openai
// client against a rate-limited upstream, on real Redis.
func TestHTTPRetryEndpoint(t *testing.T) {
	for _, tg := range redistest.RealTargets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			f := &fakeOpenAI{}
			const secret = "Rate limit reached for org-SECRET in organization"
			f.set(429, `{"error":{"message":"`+secret+`","type":"requests","param":null,"code":"rate_limit_exceeded"}}`, "retry-after-ms", "2500")
			c := newOpenAI(t, f)
			g, err := gate.New(tg.Client, gate.Options{Prefix: redistest.UniqueKey(t), Cooldown: 100 * time.Millisecond, Upstream: "openai", Backoff: gate.Backoff{Jitter: -1}})
			if err != nil {
				t.Fatal(err)
			}
			r := chi.NewRouter()
			r.Route("/documents/{id}", func(r chi.Router) {
				r.With(httpmw.New(g, httpmw.Options{Job: httpmw.URLParam("id")})).Post("/evaluate", func(w http.ResponseWriter, r *http.Request) {
					resp, err := c.CreateChatCompletion(r.Context(), openai.ChatCompletionRequest{Model: openai.GPT4oMini,
						Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "evaluate " + chi.URLParam(r, "id")}}})
					if err != nil {
						httpmw.Fail(r, err)
						return
					}
					fmt.Fprint(w, resp.Choices[0].Message.Content)
				})
				r.Get("/retry-status", httpmw.StatusHandler(g, httpmw.Options{Job: httpmw.URLParamAs("/documents/{id}/evaluate", "id")}))
			})
			srv := httptest.NewServer(r)
			t.Cleanup(srv.Close)

			post := func(id string) (*http.Response, string) {
				t.Helper()
				resp, err := http.Post(srv.URL+"/documents/"+id+"/evaluate", "application/json", nil)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var b strings.Builder
				_, _ = io.Copy(&b, resp.Body)
				return resp, b.String()
			}
			resp, body := post("42")
			if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" || resp.Header.Get("Content-Type") != "application/problem+json" {
				t.Fatalf("first call: %d Retry-After %q %q\n%s", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Header.Get("Content-Type"), body)
			}
			if strings.Contains(body, "SECRET") || strings.Contains(body, "redis") {
				t.Fatalf("upstream or Redis text leaked into the response: %s", body)
			}
			calls := f.calls.Load()
			// The retry, and any other document (the upstream is rate
			// limited), are answered without calling the model.
			if resp, body := post("42"); resp.StatusCode != 503 && resp.StatusCode != 429 {
				t.Fatalf("retry: %d %s", resp.StatusCode, body)
			}
			if resp, body := post("43"); resp.StatusCode != 503 || !strings.Contains(body, `"upstream_cooling"`) {
				t.Fatalf("other document while the upstream cools: %d %s", resp.StatusCode, body)
			}
			if f.calls.Load() != calls {
				t.Fatalf("refused retries called the model: %d → %d", calls, f.calls.Load())
			}
			st, err := http.Get(srv.URL + "/documents/42/retry-status")
			if err != nil {
				t.Fatal(err)
			}
			defer st.Body.Close()
			var rs httpmw.RetryStatus
			if err := json.NewDecoder(st.Body).Decode(&rs); err != nil || st.StatusCode != 200 || rs.RetryAfterSeconds < 2 || rs.RetryAfterSeconds > 3 {
				t.Fatalf("retry-status: %d %+v %v", st.StatusCode, rs, err)
			}
		})
	}
}
