// Package gateprom exports a gate's events as Prometheus metrics.
//
// An *Observer is both a gate.Observer and a prometheus.Collector:
//
//	obs := gateprom.New(gateprom.Options{})
//	prometheus.MustRegister(obs)
//	g, _ := gate.New(rdb, gate.Options{Observer: obs})
//
// Metrics (namespace "retrygate" by default; every series also carries the
// gate's upstream as the "upstream" label, "" without one):
//
//	retrygate_acquisitions_total{outcome,state}  outcome: acquired | refused | fail_open |
//	                                             shadow_refused (a shadow gate's refusal: the call ran);
//	                                             state: the refusing state (running, cooling_down,
//	                                             failed, done, upstream_cooling), "" otherwise
//	retrygate_coalesced_total                    refusals decided in-process (a duplicate call of a
//	                                             job already running in this process); also counted
//	                                             as acquisitions refused with state running
//	retrygate_settles_total{outcome,reason}      outcome: succeeded | cooled_down | marked_failed | released
//	retrygate_renewals_total{outcome}            outcome: ok | failed
//	retrygate_lease_lost_total                   leases lost while fn ran
//	retrygate_not_owned_total                    settles rejected: the lock was someone else's
//	retrygate_redis_errors_total{op,cause}       op: acquire | settle | renew | undo | upstream (gate.Event.Op);
//	                                             cause: unavailable | refused (gate.ErrRedisRefused)
//	retrygate_upstream_transitions_total{state,reason}  state: cooling | paused
//	retrygate_warnings_total{reason}             gate.EventWarning: maxmemory_policy_evicts | config_unchecked
//	                                             | no_persistence | server_version | multi_master
//	                                             | scripts_not_atomic | scripts_unchecked | no_maxmemory
//	                                             | memory_nearly_full (Gate.Check), settle_unwritten,
//	                                             permanent_wave, wait_polling
//	retrygate_lock_held_seconds{outcome}         histogram: how long calls held the lock, observed at
//	                                             every settle, lease loss and not-owned rejection
//	retrygate_cooldown_seconds{kind}             histogram: cooldowns set; kind: job | upstream
//	retrygate_budget_left{limit}                 gauge: what the upstream's budget had left at the last
//	                                             call it admitted or refused; limit: requests | tokens
//	retrygate_budget_refusals_total              calls refused before they were sent: the budget would
//	                                             have had less than its reserve left
//	retrygate_line_calls_total{class,tenant,outcome}  calls admitted (outcome acquired) or refused, by
//	                                             class (batch | normal | interactive | its number) and
//	                                             tenant (Options.TenantLabel; "" by default)
//	retrygate_line_wait_seconds{class,tenant,outcome}  histogram: time a call waited in its upstream's
//	                                             line before it was admitted or refused, 0 when it did
//	                                             not wait (gate.Event.Waited): p50/p99 per class
//
// Label values are bounded: the job key is never a label, reason codes
// outside classify.Reasons (and Options.Reasons) count as "other",
// operations and warnings are the gate's own fixed sets, classes are at
// most 256, and the tenant is "" unless Options.TenantLabel maps tenants
// to a few labels (at most Options.MaxTenantLabels, then "other"): a
// label per customer is a series per customer. The upstream label is
// the gate's configured Options.Upstream, which the operator chooses.
//
// An Observer is safe for concurrent use and may be shared by several
// gates; create it with New. Without an Observer the gate builds no events
// at all, so metrics cost nothing when not wanted (see BenchmarkDo).
package gateprom
