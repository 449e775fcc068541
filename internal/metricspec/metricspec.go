// Package metricspec is what the metrics observers (gate/gateprom,
// gate/gateotel) share, so their series cannot drift apart: the reason
// codes kept as label values, the names of a settle's outcome, a Redis
// error's cause and operation, and the histograms' bucket bounds.
package metricspec

import (
	"errors"

	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/redisop"
)

// Other replaces a label value outside the known set.
const Other = "other"

// Warnings are the gate's warning reasons (gate.Warn*), the values of
// retrygate_warnings_total's reason label.
var Warnings = []string{
	gate.WarnEvictionPolicy, gate.WarnUnchecked, gate.WarnNoPersistence, gate.WarnSettleUnwritten,
	gate.WarnPermanentWave, gate.WarnWaitPolling,
}

// Reasons are the classify package's reason codes and the gate's warnings:
// the reason label values kept as they are (a label set must be bounded).
// TestReasonsCoverEveryCode reads both packages' sources so the list
// cannot drift.
var Reasons = append([]string{
	classify.ReasonRateLimited, classify.ReasonQuotaExhausted, classify.ReasonOverloaded,
	classify.ReasonContextLength, classify.ReasonContentFiltered, classify.ReasonInvalidRequest,
	classify.ReasonAuth, classify.ReasonModelNotFound, classify.ReasonNotImplemented,
	classify.ReasonUpstream5xx, classify.ReasonUpstreamStatus, classify.ReasonTimeout,
	classify.ReasonNetwork, classify.ReasonTLS, classify.ReasonBadOutput, classify.ReasonCanceled,
	classify.ReasonPanic, classify.ReasonUnknown, classify.ReasonMarkedPermanent,
	classify.ReasonMarkedTransient, classify.ReasonMarkedSystemic, classify.ReasonShouldNotRetry,
	classify.ReasonShouldRetry, classify.ReasonClientSide, classify.ReasonTooLarge,
	classify.ReasonInvalidURL, classify.ReasonBadStream, classify.ReasonAccount,
}, Warnings...)

// HeldBuckets span LLM calls, in seconds: 100 ms to 10 min.
var HeldBuckets = []float64{0.1, 0.25, 0.5, 1, 2, 5, 10, 15, 20, 30, 45, 60, 90, 120, 180, 300, 600}

// CooldownBuckets span cooldowns, in seconds, from a second (a short
// server hint) to a day (classify.MaxHint).
var CooldownBuckets = []float64{1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 21600, 86400}

// SettleOutcome names an EventSettled: not_owned, cooled_down,
// marked_failed, released or succeeded.
func SettleOutcome(e gate.Event) string {
	switch {
	case e.Err != nil:
		return "not_owned"
	case e.State == gate.CoolingDown:
		return "cooled_down"
	case e.State == gate.Failed:
		return "marked_failed"
	case e.State == gate.Ready && e.Reason != "":
		return "released"
	}
	return "succeeded"
}

// Cause tells a Redis that could not serve the call ("unavailable") from
// one that refused it ("refused": a permission or configuration problem).
func Cause(err error) string {
	if errors.Is(err, gate.ErrRedisRefused) {
		return "refused"
	}
	return "unavailable"
}

// Op bounds an EventRedisError's operation to the ones the gate reports.
func Op(s string) string {
	for _, k := range redisop.All {
		if s == k {
			return s
		}
	}
	return Other
}
