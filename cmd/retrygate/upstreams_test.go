package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

var errRateLimit = errors.New("429 rate limit")

// upstreamClassify adds a provider-wide rate limit with an hour's hint to
// testClassify.
func upstreamClassify(err error) classify.Verdict {
	if errors.Is(err, errRateLimit) {
		return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonRateLimited, ProviderWide: true, RetryAfter: time.Hour}
	}
	return testClassify(err)
}

// TestStatusFindsRefusingUpstreams: without --upstream, status of a job that no
// key refuses used to say "no lock: the next call runs" while its gate's
// upstream was paused. It now finds the upstreams under the prefix (on every
// master of a cluster), says which refuse jobs and what to run, and says
// plainly that it cannot know which upstream the job's gate uses.
func TestStatusFindsRefusingUpstreams(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			prefix := redistest.UniqueKey(t)
			ctx := context.Background()
			upstreamd := func(upstream string) *gate.Gate {
				g, err := gate.New(tg.Client, gate.Options{Prefix: prefix, Upstream: upstream, Cooldown: time.Hour, Classify: upstreamClassify, UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Hour, PauseTTL: time.Hour},
					Backoff: gate.Backoff{Max: time.Hour, Jitter: -1}})
				if err != nil {
					t.Fatal(err)
				}
				return g
			}
			paused, cooling, open := upstreamd("openai:prod"), upstreamd("anthropic:eu"), upstreamd("groq:prod")
			_ = paused.Do(ctx, "doc-9", func(context.Context, *gate.Lease) error { return errQuota })
			_ = cooling.Do(ctx, "doc-8", func(context.Context, *gate.Lease) error { return errRateLimit })
			_ = open.Do(ctx, "doc-7", func(context.Context, *gate.Lease) error { return err5xx }) // a failure window, no cooldown
			if tg.IsCluster {
				assertKeysSpread(t, tg.Client.(*redis.ClusterClient), upstreamKey(prefix, "openai:prod"), upstreamKey(prefix, "anthropic:eu"))
			}
			args := append(redisArgs(t, tg), "--prefix", prefix)

			r := runCLI(t, nil, append(args, "status", "doc-0")...)
			mustOK(t, r)
			golden(t, "status_upstream_found", prefix, r.stdout)
			if strings.Contains(r.stdout, "the next call runs") {
				t.Errorf("status says the next call runs while two upstreams refuse jobs:\n%s", r.stdout)
			}

			// A job cooling on its own says both; only its own reset is a
			// command (the upstreams found may not be its gate's).
			r = runCLI(t, nil, append(args, "status", "doc-8")...)
			mustOK(t, r)
			for _, exp := range []string{"the last call failed (rate_limited)", "; also upstream anthropic:eu is cooling down",
				"reset doc-8"} {
				if !strings.Contains(r.stdout, exp) {
					t.Errorf("status doc-8: exp %q in\n%s", exp, r.stdout)
				}
			}
			if strings.Contains(r.stdout, "upstream reset") {
				t.Errorf("status doc-8 without --upstream suggests an upstream reset:\n%s", r.stdout)
			}

			st := statusOf(t, runCLI(t, nil, append(args, "--json", "status", "doc-0")...))
			s := st.UpstreamSearch
			if s == nil || !s.Complete || s.Error != "" || s.Upstreams < 2 || len(s.Refusing) != 2 ||
				s.Refusing[0].Upstream != "anthropic:eu" || s.Refusing[0].State != "cooling_down" ||
				s.Refusing[1].Upstream != "openai:prod" || s.Refusing[1].State != "paused" || s.Refusing[1].Reason != "quota_exhausted" {
				t.Fatalf("--json upstream_search: %+v", s)
			}

			// With --upstream, the job's own gate's upstream, and no search.
			st = statusOf(t, runCLI(t, nil, append(args, "--json", "--upstream", "groq:prod", "status", "doc-0")...))
			if st.UpstreamSearch != nil || st.Upstream == nil || st.Upstream.State != "ready" {
				t.Fatalf("--upstream groq:prod: %+v", st)
			}

			// Once the upstreams recover, the job runs again, and status says so.
			for _, g := range []*gate.Gate{paused, cooling} {
				if err := g.ResetUpstreams(ctx); err != nil {
					t.Fatal(err)
				}
			}
			r = runCLI(t, nil, append(args, "status", "doc-0")...)
			mustOK(t, r)
			if !strings.Contains(r.stdout, "meaning   no lock: the next call runs") || strings.Contains(r.stdout, "upstream") {
				t.Errorf("status after the upstreams recovered:\n%s", r.stdout)
			}
		})
	}
}

// TestStatusSaysPrefixHoldsNoKeys: a --prefix with no key at all (a typo,
// the wrong database) used to get "no lock: the next call runs".
func TestStatusSaysPrefixHoldsNoKeys(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			f := newFixture(t, tg)
			typo := f.prefix + "-typo"
			args := append(redisArgs(t, tg), "--prefix", typo)
			r := runCLI(t, nil, append(args, "status", "doc-1")...)
			mustOK(t, r)
			if exp := "no key under prefix " + typo + ": is --prefix right?"; !strings.Contains(r.stdout, exp) || strings.Contains(r.stdout, "next call runs") {
				t.Errorf("status under an empty prefix: exp %q in\n%s", exp, r.stdout)
			}
			if st := statusOf(t, runCLI(t, nil, append(args, "--json", "status", "doc-1")...)); !st.NoKeysUnderPrefix {
				t.Errorf("--json: no_keys_under_prefix false under an empty prefix")
			}
			r = runCLI(t, nil, append(args, "list")...)
			if r.code != exitOK || !strings.Contains(r.stderr, "no key under prefix "+typo+": is --prefix right?") {
				t.Errorf("list under an empty prefix: exit %d, stderr %q", r.code, r.stderr)
			}
			if r := f.run(t, "list", "--state", "done"); r.stderr != "" {
				t.Errorf("an empty list under a used prefix: stderr %q", r.stderr)
			}
			// The fixture's prefix holds keys: an unknown job there is ready.
			st := statusOf(t, f.run(t, "--json", "status", "never-seen"))
			if st.NoKeysUnderPrefix || st.State != "ready" {
				t.Errorf("status of an unknown job under a used prefix: %+v", st)
			}
			// A prefix holding only an upstream key is not empty either.
			g, err := gate.New(tg.Client, gate.Options{Prefix: typo, Upstream: "s", Classify: testClassify})
			if err != nil {
				t.Fatal(err)
			}
			_ = g.Do(context.Background(), "doc-1", func(context.Context, *gate.Lease) error { return errQuota })
			if err := g.Reset(context.Background(), "doc-1"); err != nil {
				t.Fatal(err)
			}
			r = runCLI(t, nil, append(args, "status", "doc-2")...)
			mustOK(t, r)
			if strings.Contains(r.stdout, "no key under prefix") || !strings.Contains(r.stdout, "upstream s is paused") {
				t.Errorf("a prefix with a paused upstream:\n%s", r.stdout)
			}
		})
	}
}

func upstreamKey(prefix, upstream string) string {
	k, _ := keyspace.Upstream(prefix, upstream)
	return k
}

// assertKeysSpread checks the keys live on more than one master, so a
// search that finds them all covered every master.
func assertKeysSpread(t *testing.T, cc *redis.ClusterClient, keys ...string) {
	t.Helper()
	masters := map[string]bool{}
	for _, k := range keys {
		node, err := cc.MasterForKey(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		masters[node.Options().Addr] = true
	}
	if len(masters) < 2 {
		t.Fatalf("keys %q all live on one master; the test needs at least 2", keys)
	}
}

func TestStatusUpstreamSearchJSONShape(t *testing.T) {
	// upstream_search.refusing is [] (not null) when nothing refuses.
	_, client := redistest.Miniredis(t)
	r := runCLI(t, nil, "--redis", "redis://"+client.Options().Addr, "--json", "status", "x")
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(r.stdout), &raw); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw["upstream_search"]), `"refusing": []`) {
		t.Fatalf("upstream_search: %s", raw["upstream_search"])
	}
}

// TestStatusSkipsAnUpstreamKeyNoGateWrote: one upstream key under the
// prefix whose name no gate could have (longer than gate.New takes,
// written by hand) must not hide the paused upstream beside it, though
// the upstreams are read through one gate.
func TestStatusSkipsAnUpstreamKeyNoGateWrote(t *testing.T) {
	_, client := redistest.Miniredis(t)
	prefix := redistest.UniqueKey(t)
	ctx := context.Background()
	g, err := gate.New(client, gate.Options{Prefix: prefix, Upstream: "openai:prod", Classify: testClassify,
		UpstreamPolicy: gate.UpstreamPolicy{Cooldown: time.Hour, PauseTTL: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	_ = g.Do(ctx, "doc-9", func(context.Context, *gate.Lease) error { return errQuota })
	if err := client.Set(ctx, upstreamKey(prefix, strings.Repeat("x", 300)), "by hand", 0).Err(); err != nil {
		t.Fatal(err)
	}
	st := statusOf(t, runCLI(t, nil, "--redis", "redis://"+client.Options().Addr, "--prefix", prefix, "--json", "status", "doc-0"))
	s := st.UpstreamSearch
	if s == nil || s.Upstreams != 2 || len(s.Refusing) != 1 || s.Refusing[0].Upstream != "openai:prod" || s.Refusing[0].State != "paused" {
		t.Fatalf("--json upstream_search: %+v", s)
	}
}
