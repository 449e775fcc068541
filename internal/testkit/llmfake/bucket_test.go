package llmfake

import (
	"testing"
	"time"
)

// A per-minute token bucket: the expectations are the arithmetic of a
// bucket of limit units refilling at limit per minute, never the code's.
func TestBucket(t *testing.T) {
	t0 := time.Date(2026, 4, 21, 14, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }

	b := bucket{limit: 60}
	if b.remaining(t0) != 60 || b.fullIn(t0) != 0 {
		t.Fatalf("a new bucket is full: remaining %d, full in %v", b.remaining(t0), b.fullIn(t0))
	}
	b.take(t0, 1)
	// OpenAI's documented example reads the same: limit 60, remaining 59,
	// reset 1s (https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers).
	if b.remaining(t0) != 59 || b.fullIn(t0) != time.Second {
		t.Fatalf("after one of 60/min: remaining %d, full in %v; want 59 and 1s", b.remaining(t0), b.fullIn(t0))
	}
	half := at(500 * time.Millisecond)
	if b.remaining(half) != 59 || b.fullIn(half) != 500*time.Millisecond || b.wait(half, 60) != 500*time.Millisecond || b.wait(half, 59) != 0 {
		t.Fatalf("half a second later: remaining %d, full in %v, wait(60) %v", b.remaining(half), b.fullIn(half), b.wait(half, 60))
	}
	if b.remaining(at(time.Hour)) != 60 {
		t.Fatalf("a bucket never holds more than its limit: %d", b.remaining(at(time.Hour)))
	}

	hour := at(time.Hour)
	b.take(hour, 60)
	if b.remaining(hour) != 0 || b.wait(hour, 1) != time.Second || b.wait(hour, 30) != 30*time.Second || b.fullIn(hour) != time.Minute {
		t.Fatalf("empty: wait(1) %v, wait(30) %v, full %v", b.wait(hour, 1), b.wait(hour, 30), b.fullIn(hour))
	}
	if b.remaining(hour.Add(30*time.Second)) != 30 {
		t.Fatalf("half a minute after empty: %d, want 30", b.remaining(hour.Add(30*time.Second)))
	}

	// 3 a minute: one refills in 20 s, the "Please try again in 20s." of
	// OpenAI's RPM message at Limit 3; exact to the nanosecond.
	small := bucket{limit: 3}
	small.take(t0, 3)
	if small.wait(t0, 1) != 20*time.Second || small.wait(at(20*time.Second-time.Nanosecond), 1) != time.Nanosecond || small.wait(at(20*time.Second), 1) != 0 {
		t.Fatalf("3/min empty: wait(1) %v", small.wait(t0, 1))
	}
	// 7 a minute does not divide a minute: a unit's refill is rounded up when
	// taken and down when waited for, so a wait is never early.
	odd := bucket{limit: 7}
	odd.take(t0, 7)
	if w := odd.wait(t0, 1); w < time.Minute/7 || w > time.Minute/7+2 {
		t.Fatalf("7/min empty: wait(1) %v, want %v rounded up", w, time.Minute/7)
	}

	none := bucket{}
	none.take(t0, 1<<40)
	if none.wait(t0, 1<<40) != 0 {
		t.Fatal("a zero limit is no limit")
	}
	huge := bucket{limit: 10}
	if w := huge.wait(t0, 1<<62); w <= time.Minute {
		t.Fatalf("more than the limit holds never fits within a minute: %v", w)
	}
}

// A bucket with a window other than a minute refills its limit in that
// window: 12,000 tokens in 2 s, 6,000 a second.
func TestBucketWindow(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	b := bucket{limit: 12000, window: 2 * time.Second}
	b.take(now, 12000)
	if got := b.remaining(now.Add(time.Second)); got != 6000 {
		t.Fatalf("a second after it emptied: %d left, want 6000", got)
	}
	// 470 tokens at 6,000 a second: 78,333,333⅓ ns, rounded up (never early).
	if got, want := b.wait(now, 470), 78_333_334*time.Nanosecond; got != want {
		t.Fatalf("wait for 470 tokens: %v, want %v", got, want)
	}
	if got := b.fullIn(now); got != 2*time.Second {
		t.Fatalf("whole again in %v, want 2s", got)
	}
}
