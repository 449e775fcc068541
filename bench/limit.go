package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/limitstorm"
	"github.com/retrygate/retrygate/internal/testkit/llmfake"
)

// limitParams shape the storms at a provider's rate limit (issues 31
// and 37): limitProcs Gates share one upstream, each in its own worker
// process, jobs arrive at Offer × RPM for arrivals, one storm per seed.
type limitParams struct {
	rpm      int64
	offer    float64
	arrivals time.Duration
	drain    time.Duration // after the arrivals, a job may still complete
	seeds    []uint64
}

// limitProcs is how many Gates share the upstream in a storm, each in a
// worker process of its own (limitstorm.Config.Gates and Procs).
const limitProcs = 4

// limitGates are the gates measured at the limit, side by side in one
// run: the reactive breaker (the provider's budget ignored) and the
// admission from the provider's budget (issue 31), with admits set.
var limitGates = []struct {
	name   string
	opts   gate.Options
	admits bool // the targets apply
}{
	// The breaker alone cools for a 429's hint: OpenAI's
	// x-ratelimit-reset-requests, a minute at the limit, so it is capped
	// here to keep the storm alive.
	{name: "reactive, Lease and MaxCooldown 2s", opts: gate.Options{Lease: 2 * time.Second, Cooldown: time.Second,
		UpstreamPolicy: gate.UpstreamPolicy{IgnoreBudget: true},
		Backoff:        gate.Backoff{Max: 2 * time.Second, Jitter: -1}}},
	{name: "reactive, defaults", opts: gate.Options{UpstreamPolicy: gate.UpstreamPolicy{IgnoreBudget: true}}},
	// The upstream admits calls by the budget the provider reports on
	// every response, with the defaults.
	{name: "admission, defaults", opts: gate.Options{}, admits: true},
}

// limitProviders are the providers imitated: requests bind, or OpenAI's
// tokens (110 a request where a call counts 127 on average: offered
// 2.9 × the token limit); and issue 37's case, where a call is 4 % of
// the token limit and the calls do not say their tokens: 12,000 tokens
// and 30 requests a 2 s window, prompts of 300 to 500 tokens (a call
// counts 470 on average: offered 2.9 × the token limit), met by the cost
// the upstream learns; and a provider that reports nothing (issue 37.4),
// whose limit holds, halves or doubles midway through the arrivals, with
// issue 37's targets for it.
var limitProviders = []struct {
	name    string
	dialect llmfake.Dialect
	tpm     int64 // ÷ RPM; 0: tokens never bind
	// window, rpm, tokens and prompt, when set, are the storm's own
	// (limitstorm.Config's Window, RPM, TPM and Prompt) instead.
	window      time.Duration
	rpm, tokens int64
	prompt      [2]int
	midway      float64 // the requests limit from midway on, × RPM; 0: unchanged
	// maxRefused and minGoodput are the targets of a gate that admits
	// (0: issue 31's, limitMaxRefused and limitMinGoodput).
	maxRefused, minGoodput float64
}{
	{name: "OpenAI", dialect: llmfake.OpenAI},
	{name: "Anthropic", dialect: llmfake.Anthropic},
	{name: "OpenAI, tokens bind", dialect: llmfake.OpenAI, tpm: 110},
	{name: "OpenAI, 12k tokens a window, costs learned", dialect: llmfake.OpenAI, window: 2 * time.Second, rpm: 30, tokens: 12000, prompt: [2]int{300, 500}},
	{name: "no headers", dialect: llmfake.NoHeaders, maxRefused: 0.02},
	{name: "no headers, halves midway", dialect: llmfake.NoHeaders, midway: 0.5, maxRefused: 0.03, minGoodput: 0.85},
	{name: "no headers, doubles midway", dialect: llmfake.NoHeaders, midway: 2, maxRefused: 0.03, minGoodput: 0.85},
}

// tokensBindRow is limitProviders' row whose tokens bind at the storms'
// own RPM (the report names its token limit).
const tokensBindRow = 2

// limitRow is one gate against one provider: a storm per seed.
type limitRow struct {
	gate, provider         string
	admits                 bool
	maxRefused, minGoodput float64
	results                []limitstorm.Result
}

func runLimitStorms(ctx context.Context, addr string, p limitParams, log io.Writer) ([]*limitRow, error) {
	var rows []*limitRow
	for _, d := range limitProviders {
		for _, g := range limitGates {
			row := &limitRow{gate: g.name, provider: d.name, admits: g.admits, maxRefused: d.maxRefused, minGoodput: d.minGoodput}
			if row.maxRefused == 0 {
				row.maxRefused = limitMaxRefused
			}
			if row.minGoodput == 0 {
				row.minGoodput = limitMinGoodput
			}
			rows = append(rows, row)
		}
	}
	// Seed by seed, every row: the machine's load drifts over the run
	// alike for all of them.
	for si, seed := range p.seeds {
		i := 0
		for _, d := range limitProviders {
			for _, g := range limitGates {
				opts := g.opts
				opts.Prefix = fmt.Sprintf("limit:%d:%d", si, i)
				c := limitstorm.Config{
					Dialect: d.dialect, RPM: p.rpm, TPM: d.tpm * p.rpm, MidwayRPM: int64(d.midway * float64(p.rpm)), Offer: p.offer, Arrivals: p.arrivals, Drain: p.drain, Seed: seed, Gates: limitProcs, Procs: limitProcs,
					Redis: limitstorm.Redis{Addrs: []string{addr}}, Gate: opts,
				}
				if d.window > 0 {
					c.Window, c.RPM, c.TPM, c.Prompt = d.window, d.rpm, d.tokens, d.prompt
				}
				r, err := limitstorm.Run(ctx, c)
				if err != nil {
					return nil, fmt.Errorf("limit storm %s, %s: %w", g.name, d.name, err)
				}
				rows[i].results = append(rows[i].results, r)
				i++
				fmt.Fprintf(log, "limit seed %d  %-9s %-36s %s\n", seed, d.name, g.name, r)
			}
		}
	}
	return rows, nil
}

// Issues 31 and 37's targets for a gate that admits calls from the
// budget or the rate it learned.
const (
	limitMaxRefused = 0.01 // 429s ≤ 1 % of upstream calls
	limitMinGoodput = 0.9  // goodput ≥ 0.9 × the provider's limit
	limitMaxTrips   = 20   // Redis round trips a finished job (issue 37.7)
)

// limitTargets are the issues' targets, on the median over seeds, for
// the rows of gates that admit.
func (r *results) limitTargets() []target {
	var ts []target
	for _, x := range r.limit {
		if !x.admits {
			continue
		}
		share := medianOf(x.results, limitstorm.Result.RefusedShare)
		good := medianOf(x.results, limitstorm.Result.Goodput)
		trips := medianOf(x.results, limitstorm.Result.TripsPerJob)
		ts = append(ts,
			target{fmt.Sprintf("%s, %s: 429s ≤ %.0f %% of upstream calls", x.gate, x.provider, 100*x.maxRefused), fmt.Sprintf("%.1f %%", 100*share), share <= x.maxRefused},
			target{fmt.Sprintf("%s, %s: goodput ≥ %.2g× the limit in force", x.gate, x.provider, x.minGoodput), fmt.Sprintf("%.2f×", good), good >= x.minGoodput},
			target{fmt.Sprintf("%s, %s: ≤ %d Redis round trips a finished job", x.gate, x.provider, limitMaxTrips), fmt.Sprintf("%.1f", trips), trips <= limitMaxTrips})
	}
	return ts
}

func (r *results) limitMarkdown(b *strings.Builder) {
	p := r.set.limit
	fmt.Fprintf(b, "\n## At the provider's rate limit (issues 31 and 37)\n\n"+
		"Four Gates, each in a worker process of its own (%d processes) with its own go-redis client, share this Redis and the default upstream: "+
		"the Quickstart's wiring, `gate.Options` without `Upstream`, no call saying its tokens (`WithTokens`). Each job calls go-openai through `classify/goopenai.Transport` "+
		"against `internal/testkit/llmfake`, a provider enforcing %d requests a minute as a token bucket, emptied when the storm starts "+
		"(and, where tokens bind, %d tokens a minute: a call counts its prompt at 4 characters a token and its max_tokens), "+
		"with OpenAI's or Anthropic's rate-limit headers on every answer and its 429; "+
		"or none at all and a 429 that states no wait (Vertex AI's), whose limit may halve or double midway through the arrivals; one provider is issue 37's case: 12,000 tokens and 30 requests a 2 s window, prompts of 300 to 500 tokens, no call saying its tokens. "+
		"Jobs arrive at %.1f× the limit for %v (a Poisson process, seeded); each refused job retries when `gate.RetryAfter` says, "+
		"and one told to wait past %v after the arrivals is lost. "+
		"429s: the provider's own count, of every call it answered; goodput: jobs completed (or their tokens, where tokens bind) ÷ the calls (tokens) the limit allowed from the start "+
		"to the last completion (to the end, when a job was lost); a burst: 429s at most 50 ms apart; run again: a job whose call ended with its lease gone (the process stalled past it). "+
		"Seeds %s (with more than one, medians and the range in brackets). Round trips: the Gates' Redis round trips ÷ the jobs completed. "+
		"The issues' targets (429s ≤ 1 %%, goodput ≥ 0.9×; without headers ≤ 2 %%, and ≤ 3 %% with goodput ≥ 0.85× of the limit in force where it changes; at most 20 round trips a finished job) apply to a gate that admits calls from the provider's budget or the rate it learned; "+
		"the reactive gate learns of the limit from a 429 and cools for its hint.\n\n",
		limitProcs, p.rpm, limitProviders[tokensBindRow].tpm*p.rpm, p.offer, p.arrivals, p.drain, strings.Trim(strings.Join(strings.Fields(fmt.Sprint(p.seeds)), ", "), "[]"))
	b.WriteString("| gate | provider | 429s of upstream calls | goodput × limit | round trips a finished job | largest 429 burst | jobs | lost (worst) | failed (worst) | run again (worst) |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, x := range r.limit {
		share := func(s limitstorm.Result) float64 { return 100 * s.RefusedShare() }
		fmt.Fprintf(b, "| %s | %s | %s %% | %s | %s | %.0f | %.0f | %d | %d | %d |\n", x.gate, x.provider,
			spread(x.results, share, "%.1f"), spread(x.results, limitstorm.Result.Goodput, "%.2f"), spread(x.results, limitstorm.Result.TripsPerJob, "%.1f"),
			medianOf(x.results, func(s limitstorm.Result) float64 { return float64(s.LargestBurst) }),
			medianOf(x.results, func(s limitstorm.Result) float64 { return float64(s.Jobs) }),
			worst(x.results, func(s limitstorm.Result) int { return s.Lost }),
			worst(x.results, func(s limitstorm.Result) int { return s.Failed }),
			worst(x.results, func(s limitstorm.Result) int { return s.Stale }))
	}
}

// spread is the median of f over xs, with the range when there is one.
func spread[T any](xs []T, f func(T) float64, format string) string {
	m := fmt.Sprintf(format, medianOf(xs, f))
	if len(xs) < 2 {
		return m
	}
	lo, hi := f(xs[0]), f(xs[0])
	for _, x := range xs[1:] {
		lo, hi = min(lo, f(x)), max(hi, f(x))
	}
	return fmt.Sprintf("%s ("+format+"–"+format+")", m, lo, hi)
}

func worst[T any](xs []T, f func(T) int) int {
	w := 0
	for _, x := range xs {
		w = max(w, f(x))
	}
	return w
}
