package main

import (
	"context"
	"errors"
	"fmt"
	"github.com/retrygate/retrygate/internal/keyspace"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateslog"
)

func statusCommand() *command {
	var route string
	return &command{
		name: "status", args: "JOB", redis: true,
		summary: "show a job's state, time left, attempts, reason, fence and raw keys",
		flags: func(fs *flagSet) {
			fs.StringVar(&route, "route", "", "JOB is the URL parameter of a job httpmw.URLParam made on this chi `PATTERN` "+
				"(status --route '/documents/{id}/evaluate' 42 is job \"/documents/{id}/evaluate 42\")")
		},
		run: func(ctx context.Context, c *cli, args []string) error {
			return runStatus(ctx, c, args, route)
		},
	}
}

// oneJob checks the positional arguments of a JOB command.
func oneJob(args []string) (string, error) {
	switch {
	case len(args) == 0:
		return "", usageErrorf("missing JOB")
	case len(args) > 1:
		return "", usageErrorf("one JOB expected, got %d arguments (quote a job key with spaces)", len(args))
	}
	return args[0], nil
}

// jobError turns an invalid job key into a usage error.
func jobError(err error) error {
	if errors.Is(err, gate.ErrInvalidJob) {
		return usageErrorf("%v", err)
	}
	return err
}

type keyJSON struct {
	Key    string `json:"key"`
	Exists bool   `json:"exists"`
	TTLMs  int64  `json:"ttl_ms"`
}

type similarJSON struct {
	Job   string `json:"job"`
	State string `json:"state"`
}

type upstreamJSON struct {
	Scope        string `json:"scope"`
	State        string `json:"state"`
	Reason       string `json:"reason,omitempty"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	RetryAt      string `json:"retry_at,omitempty"`
}

type statusJSON struct {
	Job          string    `json:"job"`
	State        string    `json:"state"`
	Reason       string    `json:"reason,omitempty"`
	RetryAfterMs int64     `json:"retry_after_ms"`
	RetryAt      string    `json:"retry_at,omitempty"`
	Attempts     int       `json:"attempts"`
	Fence        int64     `json:"fence"`
	TTLMs        int64     `json:"ttl_ms"`
	LogHash      string    `json:"log_hash"`
	Keys         []keyJSON `json:"keys,omitempty"`
	// Similar lists jobs whose key contains the name asked for, when that
	// name itself holds no key.
	Similar  []similarJSON `json:"similar,omitempty"`
	Upstream *upstreamJSON `json:"upstream,omitempty"`
}

func toUpstreamJSON(u gate.UpstreamStatus) *upstreamJSON {
	if u.Scope == "" {
		return nil
	}
	j := &upstreamJSON{Scope: u.Scope, State: u.State.String(), Reason: u.Reason, RetryAfterMs: ms(u.RetryAfter)}
	if u.RetryAfter > 0 {
		j.RetryAt = at(u.RetryAfter)
	}
	return j
}

func toStatusJSON(st gate.Status) statusJSON {
	j := statusJSON{Job: st.Job, State: st.State.String(), Reason: st.Reason, RetryAfterMs: ms(st.RetryAfter),
		Attempts: st.Attempts, Fence: st.Fence, TTLMs: ms(st.TTL), LogHash: gateslog.HashJob(st.Job),
		Upstream: toUpstreamJSON(st.Upstream)}
	if st.RetryAfter > 0 {
		j.RetryAt = at(st.RetryAfter)
	}
	return j
}

func runStatus(ctx context.Context, c *cli, args []string, route string) error {
	job, err := oneJob(args)
	if err != nil {
		return err
	}
	if route != "" {
		if job, err = routeJob(route, job); err != nil {
			return jobError(err)
		}
	}
	g, err := c.gate(c.scope != "")
	if err != nil {
		return err
	}
	st, err := g.Status(ctx, job)
	if err != nil {
		return jobError(err)
	}
	lock, meta := keyspace.Job(c.prefix, job)
	keys, err := rawKeys(ctx, c.rdb, lock, meta)
	if err != nil {
		return err
	}
	j := toStatusJSON(st)
	j.Keys = keys
	var similar []gate.Status
	if !keys[0].Exists && !keys[1].Exists {
		// The name matches nothing: maybe the job has a longer key (an
		// httpmw route, a tenant) that contains it.
		similar = c.similar(ctx, g, job)
		for _, s := range similar {
			j.Similar = append(j.Similar, similarJSON{Job: s.Job, State: s.State.String()})
		}
	}
	if c.json {
		return writeJSON(c.stdout, j)
	}

	tw := table(c.stdout)
	row(tw, "job", printable(st.Job))
	row(tw, "state", st.State)
	if st.Reason != "" {
		row(tw, "reason", st.Reason)
	}
	if st.RetryAfter > 0 {
		row(tw, "retry in", fmt.Sprintf("%s (at %s)", fmtDur(st.RetryAfter), j.RetryAt))
	}
	row(tw, "attempts", st.Attempts)
	row(tw, "fence", st.Fence)
	row(tw, "log hash", j.LogHash)
	if u := st.Upstream; u.Scope != "" {
		up := fmt.Sprintf("%s %s", printable(u.Scope), u.State)
		if u.State != gate.ScopeOpen {
			up += fmt.Sprintf(" (%s) for %s", u.Reason, fmtDur(u.RetryAfter))
		}
		row(tw, "upstream", up)
	}
	row(tw, "meaning", meaning(st))
	if fix := c.clearHint(st); fix != "" {
		row(tw, "clear", fix)
	}
	if len(similar) > 0 {
		row(tw, "similar", fmt.Sprintf("no key for %s, but %d job(s) whose key contains it hold keys:", printable(job), len(similar)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range similar {
		fmt.Fprintf(c.stdout, "  %s  %s  → retrygate%s status %s\n", printable(s.Job), s.State, c.globalHint(), shellQuote(s.Job))
	}
	// Keys go below, unaligned with the fields: their length varies.
	fmt.Fprintln(c.stdout, "keys:")
	for _, k := range keys {
		ttl := "absent"
		if k.Exists {
			ttl = "ttl " + fmtDur(time.Duration(k.TTLMs)*time.Millisecond)
		}
		fmt.Fprintf(c.stdout, "  %s  %s\n", printable(k.Key), ttl)
	}
	return nil
}

// meaning says in words why a call of the job is or is not refused now.
func meaning(st gate.Status) string {
	if u := st.Upstream; u.State == gate.ScopePaused {
		return fmt.Sprintf("every job of upstream %s is refused: paused by a systemic failure (%s) until an operator resets the scope or the pause expires", printable(u.Scope), u.Reason)
	} else if u.State == gate.ScopeCooling {
		return fmt.Sprintf("every job of upstream %s is refused until the provider-wide cooldown (%s) ends", printable(u.Scope), u.Reason)
	}
	switch st.State {
	case gate.Ready:
		return "no lock: the next call runs"
	case gate.Running:
		return "a call holds the lease; duplicates are refused until it settles or the lease expires"
	case gate.CoolingDown:
		return fmt.Sprintf("the last call failed (%s); calls are refused until the cooldown ends", st.Reason)
	case gate.Failed:
		return fmt.Sprintf("failed permanently (%s) or out of attempts; calls are refused until reset or the mark expires", st.Reason)
	case gate.Done:
		return "succeeded; duplicate calls are refused while the done mark lasts"
	}
	return ""
}

// globalHint is the global flags a printed command needs to reach the
// same keys ("" or " --prefix P").
func (c *cli) globalHint() string {
	if c.prefix != keyspace.DefaultPrefix {
		return " --prefix " + shellQuote(c.prefix)
	}
	return ""
}

// clearHint is the command that clears what refuses the job, if any.
func (c *cli) clearHint(st gate.Status) string {
	global := c.globalHint()
	if st.Upstream.State != gate.ScopeOpen {
		return fmt.Sprintf("retrygate%s --scope %s scope reset", global, shellQuote(st.Upstream.Scope))
	}
	switch st.State {
	case gate.CoolingDown, gate.Failed, gate.Done:
		return fmt.Sprintf("retrygate%s reset %s", global, shellQuote(st.Job))
	}
	return ""
}

// rawKeys reads the TTLs of a job's keys (one pipeline: both share a slot).
func rawKeys(ctx context.Context, rdb redis.UniversalClient, keys ...string) ([]keyJSON, error) {
	cmds := make([]*redis.DurationCmd, len(keys))
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.PTTL(ctx, k)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: pttl: %w", gate.ErrUnavailable, err)
	}
	out := make([]keyJSON, len(keys))
	for i, k := range keys {
		// PTTL: -2 (ns in go-redis) no key, -1 no TTL (a gate key always has one).
		switch d := cmds[i].Val(); d {
		case -2:
			out[i] = keyJSON{Key: k}
		case -1:
			out[i] = keyJSON{Key: k, Exists: true}
		default:
			out[i] = keyJSON{Key: k, Exists: true, TTLMs: ms(d)}
		}
	}
	return out, nil
}
