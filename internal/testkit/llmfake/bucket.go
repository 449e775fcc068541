package llmfake

import (
	"math"
	"math/bits"
	"time"
)

// bucket is one per-minute limit as a token bucket: it holds up to limit
// units and refills continuously at limit per minute, so a bucket emptied at
// t is whole again at t+1m and holds half at t+30s. Anthropic: "your
// capacity is continuously replenished up to your maximum limit, rather than
// being reset at fixed intervals"
// (https://docs.anthropic.com/en/api/rate-limits); Cerebras says the same
// (https://inference-docs.cerebras.ai/support/rate-limits); OpenAI's reset
// headers say when it "resets to its initial state"
// (https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers).
//
// It keeps the instant it is whole again rather than a level, so the
// arithmetic is exact in nanoseconds: a unit is minute/limit of refill. A
// zero limit is no limit: the bucket always has room.
type bucket struct {
	limit int64
	whole time.Time // when the bucket is full again; in the past when full
	// window is how long the bucket takes to refill from empty (0: a
	// minute, the providers' per-minute limits).
	window time.Duration
}

// period is the bucket's window.
func (b bucket) period() time.Duration {
	if b.window > 0 {
		return b.window
	}
	return time.Minute
}

// fullIn is how long from now until the bucket is whole again.
func (b bucket) fullIn(now time.Time) time.Duration {
	return max(b.whole.Sub(now), 0)
}

// remaining is the whole units the bucket holds now.
func (b bucket) remaining(now time.Time) int64 {
	if b.limit == 0 {
		return 0
	}
	return units(b.period()-b.fullIn(now), b.limit, b.period())
}

// wait is how long from now until the bucket holds n units: 0 when it does.
// The time n units take to refill is rounded down, so the wait is never
// early.
func (b bucket) wait(now time.Time, n int64) time.Duration {
	if b.limit == 0 {
		return 0
	}
	return max(b.fullIn(now)-refill(b.limit-n, b.limit, false, b.period()), 0)
}

// take removes n units; the caller checked that they fit. Their refill time
// is rounded up, so the bucket never holds more than it should.
func (b *bucket) take(now time.Time, n int64) {
	if b.limit == 0 {
		return
	}
	if b.whole.Before(now) {
		b.whole = now
	}
	b.whole = b.whole.Add(refill(n, b.limit, true, b.period()))
}

// maxRefill bounds a refill time, so a unit count far above the limit does
// not overflow a Duration.
const maxRefill = time.Duration(math.MaxInt64 / 4)

// refill is how long n units of a limit per minute take to refill: n
// minutes / limit, rounded up or down to the nanosecond. Negative n is a
// negative time.
func refill(n, limit int64, up bool, window time.Duration) time.Duration {
	neg := n < 0
	if neg {
		n, up = -n, !up
	}
	hi, lo := bits.Mul64(uint64(n), uint64(window))
	if hi >= uint64(limit) {
		return sign(maxRefill, neg)
	}
	q, r := bits.Div64(hi, lo, uint64(limit))
	if up && r != 0 {
		q++
	}
	return sign(time.Duration(min(q, uint64(maxRefill))), neg)
}

func sign(d time.Duration, neg bool) time.Duration {
	if neg {
		return -d
	}
	return d
}

// units is how many whole units of a limit per minute refill in d.
func units(d time.Duration, limit int64, window time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(d), uint64(limit))
	q, _ := bits.Div64(hi, lo, uint64(window)) // d ≤ window: no overflow
	return int64(q)
}
