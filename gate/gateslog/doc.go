// Package gateslog logs a gate's events with log/slog: one structured line
// per event.
//
//	g, _ := gate.New(rdb, gate.Options{Observer: gateslog.New(slog.Default(), gateslog.Options{})})
//
// Each line's message is "retrygate " + the event kind (acquired, refused,
// cooled_down, lease_lost, ...) and its attributes are those of the event
// that apply: event, job (or job_hash with Options.HashJobs), upstream, state,
// attempt, fence, class, reason, held, cooldown, local, op,
// budget_requests_left, budget_tokens_left, budget_spent (what the
// upstream's budget had left at an acquire or refusal, and whether it
// refused), err. Zero fields are left out.
//
// Levels: refusals and renewals are Debug (they are the normal, frequent
// path); acquisitions and settles are Info; lease_lost, not_owned,
// redis_error, renew_failed, fail_open, upstream_cooling and config_warning are
// Warn; upstream_paused is Error, because only an operator can end it
// (Warn when an operator set it: Gate.PauseUpstream).
// Options.Level shifts all of them.
//
// Nothing is formatted for a level the handler does not enable. An
// *Observer is safe for concurrent use; create it with New.
package gateslog
