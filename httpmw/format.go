package httpmw

import (
	"strconv"
	"time"
)

// defaultRetryIn is the default Options.RetryIn: "Retry available now." for
// d ≤ 0, else "Retry available in " + FormatWait(d) + ".".
func defaultRetryIn(d time.Duration) string {
	if d <= 0 {
		return "Retry available now."
	}
	return "Retry available in " + FormatWait(d) + "."
}

// FormatWait renders a positive wait for people, always rounding up so a
// retry at the stated time is never refused for being early:
//
//	under 1 min          whole seconds          "45 s"
//	1 min to 10 min      minutes and seconds    "4 min 12 s", "4 min"
//	10 min to 1 h        whole minutes          "12 min"
//	1 h to 24 h          hours and minutes      "2 h 5 min", "3 h"
//	24 h and more        days and hours         "1 d 6 h", "2 d"
//
// Each bound is inclusive below, after rounding up: 59.2 s is "1 min",
// 9 min 59.5 s is "10 min". d ≤ 0 is "0 s".
func FormatWait(d time.Duration) string {
	if d <= 0 {
		return "0 s"
	}
	s := ceilDiv(d, time.Second)
	switch {
	case s < 60:
		return strconv.FormatInt(s, 10) + " s"
	case s < 10*60:
		return pair(s/60, "min", s%60, "s")
	}
	m := ceilDiv(d, time.Minute)
	switch {
	case m < 60:
		return strconv.FormatInt(m, 10) + " min"
	case m < 24*60:
		return pair(m/60, "h", m%60, "min")
	}
	h := ceilDiv(d, time.Hour)
	return pair(h/24, "d", h%24, "h")
}

func pair(a int64, ua string, b int64, ub string) string {
	out := strconv.FormatInt(a, 10) + " " + ua
	if b > 0 {
		out += " " + strconv.FormatInt(b, 10) + " " + ub
	}
	return out
}

func ceilDiv(d, unit time.Duration) int64 {
	n := int64(d / unit)
	if d%unit != 0 {
		n++
	}
	return n
}

// retrySeconds is the Retry-After value of a wait: whole seconds rounded
// up, at least 1.
func retrySeconds(d time.Duration) int64 {
	return max(ceilDiv(d, time.Second), 1)
}
