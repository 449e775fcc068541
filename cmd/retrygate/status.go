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
	"github.com/retrygate/retrygate/httpmw"
)

func statusCommand() *command {
	var route string
	return &command{
		name: "status", args: "JOB", redis: true, prefix: true, upstream: true,
		summary: "show a job's state, time left, attempts, reason, fence and raw keys",
		flags:   func(fs *flagSet) { routeFlag(fs, &route) },
		run: func(ctx context.Context, c *cli, args []string) error {
			return runStatus(ctx, c, args, route)
		},
	}
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
	Job       string `json:"job"`
	JobQuoted string `json:"job_quoted,omitempty"`
	State     string `json:"state"`
}

// upstreamSearchJSON is what status found under the prefix without
// --upstream (the status's "upstream_search").
type upstreamSearchJSON struct {
	// Upstreams counts the upstream keys found, ready ones included.
	Upstreams int `json:"upstreams"`
	// Refusing are the upstreams cooling down or paused: every job of a
	// gate with that Options.Upstream is refused.
	Refusing []upstreamJSON `json:"refusing"`
	// Complete is false when the bounded search stopped early (Error says
	// why, if it failed).
	Complete bool   `json:"complete"`
	Error    string `json:"error,omitempty"`
}

type upstreamJSON struct {
	Upstream string `json:"upstream"`
	State    string `json:"state"`
	Reason   string `json:"reason,omitempty"`
	// Note is the operator's reason for a pause they set (upstream pause).
	Note         string      `json:"note,omitempty"`
	RetryAfterMs int64       `json:"retry_after_ms"`
	RetryAt      string      `json:"retry_at,omitempty"`
	Budget       *budgetJSON `json:"budget,omitempty"`
}

// budgetJSON is an upstream's budget, each limit omitted when no response
// reported it.
type budgetJSON struct {
	Requests *limitJSON `json:"requests,omitempty"`
	Tokens   *limitJSON `json:"tokens,omitempty"`
	InFlight int64      `json:"in_flight"`
	// Unreported: the provider sends no rate-limit headers; LearnedRPM
	// is the rate learned from its answers (0: none known).
	Unreported bool  `json:"unreported,omitempty"`
	LearnedRPM int64 `json:"learned_rpm,omitempty"`
}

type limitJSON struct {
	Left    int64  `json:"left"` // -1: unknown
	Limit   int64  `json:"limit,omitempty"`
	ResetMs int64  `json:"reset_ms"` // -1: not said
	ResetAt string `json:"reset_at,omitempty"`
}

func toBudgetJSON(b gate.UpstreamBudget) *budgetJSON {
	if !b.Requests.Reported && !b.Tokens.Reported && !b.Unreported {
		return nil
	}
	limit := func(l gate.BudgetLimit) *limitJSON {
		if !l.Reported {
			return nil
		}
		j := &limitJSON{Left: l.Left, Limit: l.Limit, ResetMs: -1}
		if l.Reset >= 0 {
			j.ResetMs, j.ResetAt = ms(l.Reset), at(l.Reset)
		}
		return j
	}
	return &budgetJSON{Requests: limit(b.Requests), Tokens: limit(b.Tokens), InFlight: b.InFlight, Unreported: b.Unreported, LearnedRPM: b.LearnedRPM}
}

type statusJSON struct {
	Job string `json:"job"`
	// JobQuoted is the job as the tables print it, when that differs (a
	// name with control characters, quotes or bytes that are not UTF-8,
	// which JSON cannot carry): the form to pass back to status or reset.
	JobQuoted    string `json:"job_quoted,omitempty"`
	State        string `json:"state"`
	Reason       string `json:"reason,omitempty"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	RetryAt      string `json:"retry_at,omitempty"`
	Attempts     int    `json:"attempts"`
	// InLine is set while the job's call waits in its upstream's line
	// (with --upstream); Ahead counts the callers before it, and
	// RetryAfterMs is the expected wait for its turn.
	InLine  bool      `json:"in_line,omitempty"`
	Ahead   int       `json:"ahead,omitempty"`
	Fence   int64     `json:"fence"`
	TTLMs   int64     `json:"ttl_ms"`
	LogHash string    `json:"log_hash"`
	Keys    []keyJSON `json:"keys,omitempty"`
	// Similar lists jobs whose key contains the name asked for, when that
	// name itself holds no key.
	Similar  []similarJSON `json:"similar,omitempty"`
	Upstream *upstreamJSON `json:"upstream,omitempty"`
	// UpstreamSearch is set without --upstream: the upstreams under the
	// prefix.
	UpstreamSearch *upstreamSearchJSON `json:"upstream_search,omitempty"`
	// NoKeysUnderPrefix: not one key lives under --prefix (a typo?).
	NoKeysUnderPrefix bool `json:"no_keys_under_prefix,omitempty"`
}

func toUpstreamJSON(u gate.UpstreamStatus) *upstreamJSON {
	if u.Upstream == "" {
		return nil
	}
	j := &upstreamJSON{Upstream: u.Upstream, State: u.State.String(), Reason: u.Reason, Note: u.Note, RetryAfterMs: ms(u.RetryAfter),
		Budget: toBudgetJSON(u.Budget)}
	if u.RetryAfter > 0 {
		j.RetryAt = at(u.RetryAfter)
	}
	return j
}

func toStatusJSON(st gate.Status) statusJSON {
	j := statusJSON{Job: st.Job, JobQuoted: quoted(st.Job), State: st.State.String(), Reason: st.Reason, RetryAfterMs: ms(st.RetryAfter),
		Attempts: st.Attempts, Fence: st.Fence, TTLMs: ms(st.TTL), LogHash: gateslog.HashJob(st.Job),
		Upstream: toUpstreamJSON(st.Upstream)}
	if st.RetryAfter > 0 {
		j.RetryAt = at(st.RetryAfter)
	}
	if httpmw.RetryStatusOf(st, nil).InLine {
		j.InLine, j.Ahead = true, st.Ahead
	}
	return j
}

func runStatus(ctx context.Context, c *cli, args []string, route string) error {
	job, err := jobArg(args, route)
	if err != nil {
		return err
	}
	g, err := c.gate(c.upstream != "")
	if err != nil {
		return err
	}
	st, err := g.Status(ctx, job)
	if err != nil {
		return jobError(err)
	}
	keys, err := rawKeys(ctx, c.rdb, keyspace.Job(c.prefix, job))
	if err != nil {
		return err
	}
	j := toStatusJSON(st)
	j.Keys = keys
	var similar []gate.Status
	noKeys := !keys[0].Exists
	if noKeys {
		// The name matches nothing: maybe the job has a longer key (an
		// httpmw route, a tenant) that contains it.
		similar = c.similar(ctx, g, job)
		for _, s := range similar {
			j.Similar = append(j.Similar, similarJSON{Job: s.Job, JobQuoted: quoted(s.Job), State: s.State.String()})
		}
	}
	var found *upstreamSearch
	if c.upstream == "" {
		// Which upstream the job's gate uses is not in Redis: report
		// every upstream that refuses jobs now.
		s := c.findUpstreams(ctx)
		found = &s
		j.UpstreamSearch = &upstreamSearchJSON{Upstreams: s.names, Refusing: []upstreamJSON{}, Complete: s.complete}
		for _, u := range s.refusing {
			j.UpstreamSearch.Refusing = append(j.UpstreamSearch.Refusing, *toUpstreamJSON(u))
		}
		if s.err != nil {
			j.UpstreamSearch.Error = c.describe(s.err)
		}
	}
	if noKeys && len(similar) == 0 && st.Upstream.State == gate.Ready && (found == nil || found.names == 0) {
		has, sure := c.prefixKeys(ctx)
		j.NoKeysUnderPrefix = sure && !has
	}
	if c.json {
		return writeJSON(c.stdout, j)
	}

	tw := table(c.stdout)
	row(tw, "job", printable(st.Job))
	row(tw, "state", st.State)
	if st.Reason != "" {
		row(tw, "reason", printable(st.Reason))
	}
	switch {
	case j.InLine:
		row(tw, "in line", fmt.Sprintf("%d ahead, its turn in about %s (at %s)", st.Ahead, fmtDur(st.RetryAfter), j.RetryAt))
	case st.RetryAfter > 0:
		row(tw, "retry in", fmt.Sprintf("%s (at %s)", fmtDur(st.RetryAfter), j.RetryAt))
	}
	row(tw, "attempts", st.Attempts)
	row(tw, "fence", st.Fence)
	row(tw, "log hash", j.LogHash)
	ups := []gate.UpstreamStatus{st.Upstream}
	if found != nil {
		ups = found.refusing
	}
	for _, u := range ups {
		if u.Upstream == "" {
			continue
		}
		up := fmt.Sprintf("%s %s", printable(u.Upstream), u.State)
		if u.State != gate.Ready {
			up += fmt.Sprintf(" (%s) for %s", upstreamWhy(u), fmtDur(u.RetryAfter))
		}
		row(tw, "upstream", up)
	}
	row(tw, "meaning", c.meaning(st, found, j.NoKeysUnderPrefix))
	for _, fix := range c.clearHints(st) {
		row(tw, "clear", fix)
	}
	if len(similar) > 0 {
		row(tw, "similar", fmt.Sprintf("no key for %s, but %d job(s) whose key contains it hold keys:", printable(job), len(similar)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range similar {
		fmt.Fprintf(c.stdout, "  %s  %s  → retrygate%s status %s\n", printable(s.Job), s.State, c.globalHint(), jobQuote(s.Job))
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
// found is the search for upstreams made without --upstream (nil with it);
// noKeys says the prefix holds no key at all.
func (c *cli) meaning(st gate.Status, found *upstreamSearch, noKeys bool) string {
	if noKeys {
		return fmt.Sprintf("no key under prefix %s: is --prefix right? (the gate's Options.Prefix; default %q)",
			printable(c.prefix), keyspace.DefaultPrefix)
	}
	if u := st.Upstream; u.State == gate.Paused && u.Reason == gate.ReasonOperator {
		return fmt.Sprintf("every job of upstream %s is refused: an operator paused it (%s) until the pause ends or an operator resumes it", printable(u.Upstream), printable(u.Note))
	} else if u.State == gate.Paused {
		return fmt.Sprintf("every job of upstream %s is refused: paused by a systemic failure (%s) until an operator resets the upstream or the pause expires", printable(u.Upstream), printable(u.Reason))
	} else if u.State == gate.CoolingDown {
		return fmt.Sprintf("every job of upstream %s is refused until the provider-wide cooldown (%s) ends", printable(u.Upstream), printable(u.Reason))
	}
	own := jobMeaning(st)
	if j := toStatusJSON(st); j.InLine {
		own = "its call waits in the upstream's line for the budget: it runs at its turn (retrygate" + c.globalHint() +
			" --upstream " + argQuote(st.Upstream.Upstream) + " upstream status shows who waits)"
	}
	if found == nil {
		return own
	}
	const which = "which upstream the job's gate uses is not in Redis: pass --upstream U to check one"
	switch {
	case len(found.refusing) > 0 && st.State == gate.Ready:
		return "no lock on the job, but " + joinRefusals(found.refusing) + " (" + which + ")"
	case len(found.refusing) > 0:
		return own + "; also " + joinRefusals(found.refusing) + " (" + which + ")"
	case !found.complete && st.State == gate.Ready:
		why := "the bounded search did not reach every key"
		if found.err != nil {
			why = c.describe(found.err)
		}
		return "no lock on the job; whether an upstream refuses it is unknown: the search for upstreams under the prefix stopped (" +
			why + "); pass --upstream U to check the job's gate's"
	}
	return own
}

// upstreamWhy is why u refuses calls, for a row: its reason code, and an
// operator's words after an operator's pause.
func upstreamWhy(u gate.UpstreamStatus) string {
	if u.Reason == gate.ReasonOperator && u.Note != "" {
		return printable(u.Reason) + ": " + printable(u.Note)
	}
	return printable(u.Reason)
}

// jobMeaning says what the job's own state does to its next call.
func jobMeaning(st gate.Status) string {
	switch st.State {
	case gate.Ready:
		return "no lock: the next call runs"
	case gate.Running:
		return "a call holds the lease; duplicates are refused until it settles or the lease expires"
	case gate.CoolingDown:
		return fmt.Sprintf("the last call failed (%s); calls are refused until the cooldown ends", printable(st.Reason))
	case gate.Failed:
		return fmt.Sprintf("failed permanently (%s) or out of attempts; calls are refused until reset or the mark expires", printable(st.Reason))
	case gate.Done:
		return "succeeded; duplicate calls are refused while the done mark lasts"
	}
	return ""
}

// globalHint is the global flags a printed command needs to reach the
// same keys ("" or " --prefix P").
func (c *cli) globalHint() string {
	if c.prefix != keyspace.DefaultPrefix {
		return " --prefix " + argQuote(c.prefix)
	}
	return ""
}

// clearHint is the command that clears what refuses the job, if any.
func (c *cli) clearHint(st gate.Status) string {
	hints := c.clearHints(st)
	if len(hints) == 0 {
		return ""
	}
	return hints[0]
}

// clearHints are the commands that clear what refuses the job: the
// refusing upstream's reset (or resume, after an operator's pause), or the
// job's own. Only the gate's own upstream (--upstream) gets a command: an
// upstream found by searching the prefix may not be the job's at all.
func (c *cli) clearHints(st gate.Status) []string {
	if u := st.Upstream; u.Upstream != "" && u.State != gate.Ready {
		return []string{c.upstreamHint(u)}
	}
	switch st.State {
	case gate.CoolingDown, gate.Failed, gate.Done:
		return []string{fmt.Sprintf("retrygate%s reset %s", c.globalHint(), jobQuote(st.Job))}
	}
	return nil
}

// upstreamHint is the command that ends what refuses calls of u: resume
// after an operator's pause, reset otherwise.
func (c *cli) upstreamHint(u gate.UpstreamStatus) string {
	verb := "reset"
	if u.State == gate.Paused && u.Reason == gate.ReasonOperator {
		verb = "resume"
	}
	return fmt.Sprintf("retrygate%s --upstream %s upstream %s", c.globalHint(), argQuote(u.Upstream), verb)
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
