package gateslog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"

	"github.com/retrygate/retrygate/gate"
)

// Options configures New. The zero value logs job keys as they are.
type Options struct {
	// HashJobs logs job_hash, the first 16 hex digits of the job key's
	// SHA-256 (see HashJob), instead of the key, for job keys that carry
	// user data. `retrygate status` prints the same hash.
	HashJobs bool
	// Level is added to every event's level: slog.LevelInfo (4) moves
	// refusals from Debug to Info. Default: 0.
	Level slog.Level
}

// Observer writes gate events to a slog.Logger.
type Observer struct {
	log  *slog.Logger
	opts Options
}

var _ gate.Observer = (*Observer)(nil)

// New returns an Observer that logs to logger (slog.Default() when nil).
func New(logger *slog.Logger, opts Options) *Observer {
	if logger == nil {
		logger = slog.Default()
	}
	return &Observer{log: logger, opts: opts}
}

// HashJob returns the short SHA-256 prefix Options.HashJobs logs for job,
// so an operator can find a job's lines without the key appearing in logs.
func HashJob(job string) string {
	sum := sha256.Sum256([]byte(job))
	return hex.EncodeToString(sum[:8])
}

// Level returns the level an event is logged at, before Options.Level:
// debug for refusals and renewals, warn for what an operator should look
// at (a lost lease, a settle not owned, a failed renewal, Redis errors,
// fail-open, an upstream cooling, warnings, an operator's pause), error for
// an upstream a failure paused, info for the rest.
func Level(e gate.Event) slog.Level {
	switch e.Kind {
	case gate.EventRefused, gate.EventRenewed, gate.EventSettled:
		if e.Err != nil {
			return slog.LevelWarn
		}
		if e.Kind == gate.EventSettled {
			return slog.LevelInfo
		}
		return slog.LevelDebug
	case gate.EventLeaseLost, gate.EventRedisError, gate.EventFailOpen, gate.EventUpstreamCooling, gate.EventWarning:
		return slog.LevelWarn
	case gate.EventUpstreamPaused:
		if e.Reason == gate.ReasonOperator {
			return slog.LevelWarn // an operator paused it: meant, not a failure
		}
		return slog.LevelError
	}
	return slog.LevelInfo
}

// Observe logs e.
func (o *Observer) Observe(ctx context.Context, e gate.Event) {
	level := Level(e) + o.opts.Level
	if !o.log.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs, slog.String("event", e.Kind.String()))
	if e.Job != "" {
		if o.opts.HashJobs {
			attrs = append(attrs, slog.String("job_hash", HashJob(e.Job)))
		} else {
			attrs = append(attrs, slog.String("job", e.Job))
		}
	}
	if e.Upstream != "" {
		attrs = append(attrs, slog.String("upstream", e.Upstream))
	}
	if e.Shadow {
		attrs = append(attrs, slog.Bool("shadow", true))
	}
	if e.Kind != gate.EventRedisError && e.Kind != gate.EventWarning && e.Kind != gate.EventFailOpen {
		attrs = append(attrs, slog.String("state", e.State.String()))
	}
	if e.Attempt != 0 {
		attrs = append(attrs, slog.Int("attempt", e.Attempt))
	}
	if e.Fence != 0 {
		attrs = append(attrs, slog.Int64("fence", e.Fence))
	}
	switch e.Kind {
	case gate.EventUpstreamCooling, gate.EventUpstreamPaused:
		attrs = append(attrs, slog.String("class", e.Class.String()))
	case gate.EventSettled:
		if e.Reason != "" && e.Err == nil {
			attrs = append(attrs, slog.String("class", e.Class.String()))
		}
	}
	if e.Kind == gate.EventAcquired || e.Kind == gate.EventRefused {
		// The call's place in line: its class when not the default, its
		// tenant, and the time it waited for its turn.
		if e.Priority != gate.PriorityNormal {
			attrs = append(attrs, slog.String("priority", e.Priority.String()))
		}
		if e.Tenant != "" {
			attrs = append(attrs, slog.String("tenant", e.Tenant))
		}
		if e.Waited > 0 {
			attrs = append(attrs, slog.Duration("waited", e.Waited))
		}
	}
	if e.Reason != "" {
		attrs = append(attrs, slog.String("reason", e.Reason))
	}
	if e.Held != 0 {
		attrs = append(attrs, slog.Duration("held", e.Held))
	}
	if e.Cooldown != 0 {
		attrs = append(attrs, slog.Duration("cooldown", e.Cooldown))
	}
	if e.Local {
		attrs = append(attrs, slog.Bool("local", true))
	}
	if e.Op != "" {
		attrs = append(attrs, slog.String("op", e.Op))
	}
	if b := e.Budget; b.Requests.Reported || b.Tokens.Reported {
		if b.Requests.Reported {
			attrs = append(attrs, slog.Int64("budget_requests_left", b.Requests.Left))
		}
		if b.Tokens.Reported {
			attrs = append(attrs, slog.Int64("budget_tokens_left", b.Tokens.Left))
		}
		if b.Spent {
			attrs = append(attrs, slog.Bool("budget_spent", true))
		}
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("err", e.Err.Error()))
	}
	o.log.LogAttrs(ctx, level, "retrygate "+e.Kind.String(), attrs...)
}
