package httpmw_test

import (
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/httpmw"
)

func TestFormatWait(t *testing.T) {
	for _, c := range []struct {
		d   time.Duration
		exp string
	}{
		{-time.Second, "0 s"},
		{0, "0 s"},
		{time.Nanosecond, "1 s"},
		{200 * time.Millisecond, "1 s"},
		{time.Second, "1 s"},
		{45 * time.Second, "45 s"},
		{44*time.Second + time.Millisecond, "45 s"},
		{59 * time.Second, "59 s"},
		{59*time.Second + 200*time.Millisecond, "1 min"},
		{time.Minute, "1 min"},
		{time.Minute + time.Second, "1 min 1 s"},
		{4*time.Minute + 12*time.Second, "4 min 12 s"},
		{4*time.Minute + 11*time.Second + time.Millisecond, "4 min 12 s"},
		{4 * time.Minute, "4 min"},
		{9*time.Minute + 59*time.Second, "9 min 59 s"},
		{9*time.Minute + 59*time.Second + 500*time.Millisecond, "10 min"},
		{10*time.Minute + time.Second, "11 min"},
		{12 * time.Minute, "12 min"},
		{59*time.Minute + time.Second, "1 h"},
		{time.Hour, "1 h"},
		{2*time.Hour + 5*time.Minute, "2 h 5 min"},
		{2*time.Hour + 4*time.Minute + time.Second, "2 h 5 min"},
		{23*time.Hour + 59*time.Minute, "23 h 59 min"},
		{23*time.Hour + 59*time.Minute + time.Second, "1 d"},
		{30 * time.Hour, "1 d 6 h"},
		{48 * time.Hour, "2 d"},
	} {
		if got := httpmw.FormatWait(c.d); c.exp != got {
			t.Errorf("FormatWait(%v): exp %q, got %q", c.d, c.exp, got)
		}
	}
}

// The default RetryIn, seen through RetryStatusOf with a nil retryIn (the
// middleware and StatusHandler use the same default).
func TestDefaultRetryIn(t *testing.T) {
	for d, exp := range map[time.Duration]string{
		0:                              "Retry available now.",
		45 * time.Second:               "Retry available in 45 s.",
		4*time.Minute + 12*time.Second: "Retry available in 4 min 12 s.",
		2*time.Hour + 5*time.Minute:    "Retry available in 2 h 5 min.",
		-5 * time.Second:               "Retry available now.",
	} {
		st := gate.Status{State: gate.CoolingDown, RetryAfter: d}
		if got := httpmw.RetryStatusOf(st, nil).Message; exp != got {
			t.Errorf("DefaultRetryIn(%v): exp %q, got %q", d, exp, got)
		}
	}
}
