package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
)

// scriptCost measures where a success's Redis time goes (docs/benchmarks.md,
// "Where a success's Redis time goes"): n Gate.Do calls one after another
// with the default options, in the steady state of a provider, on the
// server at addr. It prints each script's server time (SLOWLOG, threshold
// 0: first quartile and median per script) and the commands run per
// success (INFO commandstats, which counts the commands scripts run).
func scriptCost(ctx context.Context, addr string, n int, w io.Writer) error {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	for _, p := range []struct {
		name   string
		header http.Header
	}{
		{"no rate-limit headers, never a 429 (the bench's success row)", nil},
		{"OpenAI headers, plenty left", openAIPlenty()},
	} {
		g, err := gate.New(rdb, gate.Options{Prefix: "cost-" + strconv.Itoa(len(p.header)), Backoff: gate.Backoff{Jitter: -1}})
		if err != nil {
			return err
		}
		job := 0
		do := func() error {
			job++
			return g.Do(ctx, "job-"+strconv.Itoa(job), func(_ context.Context, l *gate.Lease) error {
				if p.header != nil {
					b, ok := classify.ParseBudget(p.header, time.Now())
					if !ok {
						return fmt.Errorf("no budget in %v", p.header)
					}
					l.ObserveBudget(b)
				}
				return nil
			})
		}
		for range 200 { // the steady state: past the first calls' judgement
			if err := do(); err != nil {
				return err
			}
		}
		if err := monitorOne(ctx, addr, do, w); err != nil {
			return err
		}
		if err := rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
			return err
		}
		// Redis 7 logs each command a script runs as well as the script:
		// a success runs some 34 in all, and the log is read whole.
		maxLen := 128 * n
		_ = rdb.ConfigSet(ctx, "slowlog-max-len", strconv.Itoa(maxLen)).Err()
		_ = rdb.SlowLogReset(ctx).Err()
		_ = rdb.ConfigResetStat(ctx).Err()
		for range n {
			if err := do(); err != nil {
				return err
			}
		}
		stats, err := rdb.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		log, err := rdb.SlowLogGet(ctx, -1).Result()
		if err != nil {
			return err
		}
		_ = rdb.ConfigSet(ctx, "slowlog-log-slower-than", "10000").Err()
		if len(log) >= maxLen {
			return fmt.Errorf("scriptcost: the slow log held %d entries, its whole length: the first successes' scripts may have been dropped", len(log))
		}
		fmt.Fprintf(w, "\n%s, %d successes\n", p.name, n)
		byScript := map[string][]time.Duration{}
		for _, e := range log {
			if len(e.Args) < 4 || !strings.EqualFold(e.Args[0], "evalsha") {
				continue
			}
			byScript[scriptName(e.Args)] = append(byScript[scriptName(e.Args)], e.Duration)
		}
		names := make([]string, 0, len(byScript))
		for s := range byScript {
			names = append(names, s)
		}
		sort.Strings(names)
		for _, s := range names {
			d := byScript[s]
			sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
			mid := d[len(d)/4 : 3*len(d)/4]
			var sum time.Duration
			for _, x := range mid {
				sum += x
			}
			fmt.Fprintf(w, "  %-40s runs/success %.2f  q1 %5.1f µs  median %5.1f µs  mean of the middle half %5.2f µs\n", s, float64(len(d))/float64(n),
				float64(d[len(d)/4])/1e3, float64(d[len(d)/2])/1e3, float64(sum)/float64(len(mid))/1e3)
		}
		fmt.Fprintln(w, "  commands per success (inside scripts and out), µs per call:")
		for _, line := range strings.Split(stats, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(name, "cmdstat_") {
				continue
			}
			f := map[string]float64{}
			for _, kv := range strings.Split(rest, ",") {
				k, v, _ := strings.Cut(kv, "=")
				f[k], _ = strconv.ParseFloat(v, 64)
			}
			if name == "cmdstat_config" || name == "cmdstat_slowlog" || name == "cmdstat_info" {
				continue
			}
			fmt.Fprintf(w, "    %-22s %5.2f  %5.2f µs  (%.1f µs per success)\n", strings.TrimPrefix(name, "cmdstat_"),
				f["calls"]/float64(n), f["usec_per_call"], f["usec"]/float64(n))
		}
	}
	return nil
}

// scriptName names a script by its keys: EVALSHA sha numkeys keys...
func scriptName(args []string) string {
	nk, _ := strconv.Atoi(args[2])
	if nk == 0 || len(args) < 3+nk {
		return "evalsha, no keys"
	}
	first := args[3]
	switch {
	case strings.HasSuffix(first, ":durations") || strings.HasSuffix(first, ":calls") && nk == 1:
		return "calls record (calls_record.lua)"
	case strings.HasSuffix(first, ":line"):
		return "the line's give (line_give.lua)"
	case nk > 3 && !strings.Contains(first, ":upstream:"):
		return "acquire (acquire_budget.lua)"
	case nk == 3 && strings.HasSuffix(args[4], ":budget"):
		return "budget record (budget_record.lua)"
	case nk == 1:
		return "job settle (job_settle.lua)"
	}
	return "other, " + strconv.Itoa(nk) + " keys, " + first
}

// openAIPlenty is a response's rate-limit headers as OpenAI documents
// them (https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers:
// x-ratelimit-limit-requests, -remaining-requests, -reset-requests and
// the same for tokens, resets such as "1s" and "6m0s"), with plenty left
// of both limits; the counts are the bench's.
func openAIPlenty() http.Header {
	h := http.Header{}
	h.Set("x-ratelimit-limit-requests", "10000")
	h.Set("x-ratelimit-remaining-requests", "9999")
	h.Set("x-ratelimit-reset-requests", "6ms")
	h.Set("x-ratelimit-limit-tokens", "2000000")
	h.Set("x-ratelimit-remaining-tokens", "1999000")
	h.Set("x-ratelimit-reset-tokens", "30ms")
	return h
}

// monitorOne prints the commands one success sends and its scripts run,
// in order (redis-cli's MONITOR, when redis-cli is on PATH).
func monitorOne(ctx context.Context, addr string, do func() error, w io.Writer) error {
	host, port, _ := net.SplitHostPort(addr)
	var out strings.Builder
	cmd := exec.CommandContext(ctx, "redis-cli", "-h", host, "-p", port, "monitor")
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		return do()
	}
	time.Sleep(100 * time.Millisecond) // (a probe, not a test: MONITOR has no ack)
	err := do()
	time.Sleep(100 * time.Millisecond)
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	fmt.Fprintln(w, "  one success, as MONITOR saw it:")
	for _, l := range strings.Split(out.String(), "\n") {
		if i := strings.Index(l, "] "); i >= 0 {
			l = l[i+2:]
		}
		if strings.HasPrefix(l, "\"evalsha\"") && len(l) > 52 {
			l = "EVALSHA " + l[52:]
		}
		if len(l) > 150 {
			l = l[:150] + "..."
		}
		if l != "" && l != "OK" {
			fmt.Fprintln(w, "    "+l)
		}
	}
	return err
}
