package httpmw

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/retrygate/retrygate/gate"
)

// acquire takes the request's job lease. A request with Prefer: wait=N
// (RFC 7240) waits, if its job is running, at most N seconds capped by
// Options.MaxWait (gate.AcquireWait: one call, so a run that ends before
// the wait begins is still the run waited for), and its response carries
// Preference-Applied: the preference was applied, whether or not the job
// was running. Without the preference the gate's own Options.Wait
// applies, as for any caller of gate.Acquire.
func (c *config) acquire(ctx context.Context, w http.ResponseWriter, r *http.Request, job string) (*gate.Lease, error) {
	wait := c.preferredWait(r)
	if wait <= 0 {
		return c.g.Acquire(ctx, job)
	}
	w.Header().Set("Preference-Applied", "wait="+strconv.FormatInt(ceilDiv(wait, time.Second), 10))
	return c.g.AcquireWait(ctx, job, wait)
}

// maxPreferSeconds bounds the digits read from a wait preference; any
// longer value is capped by MaxWait anyway.
const maxPreferSeconds = 1 << 31

// maxPreferBytes bounds the Prefer fields read, all together: a longer
// header is ignored, so a client cannot make the middleware scan a
// megabyte of commas (the wait preference is a few bytes; RFC 7240's
// other preferences are short too).
const maxPreferBytes = 1 << 10

// preferredWait returns the request's wait preference capped by MaxWait;
// 0 when there is none, it is not valid, MaxWait is negative, or the
// Prefer fields together exceed maxPreferBytes. RFC 7240: preferences are
// comma-separated, possibly over several Prefer fields, names are
// case-insensitive, and only a preference's first occurrence counts, so
// the scan stops at the first wait. wait's value is delta-seconds;
// anything else is ignored. It allocates nothing.
func (c *config) preferredWait(r *http.Request) time.Duration {
	if c.maxWait <= 0 {
		return 0
	}
	fields := r.Header.Values("Prefer")
	size := 0
	for _, f := range fields {
		size += len(f)
	}
	if size > maxPreferBytes {
		return 0
	}
	for _, field := range fields {
		for rest, more := field, true; more; {
			var pref string
			pref, rest, more = cutOutsideQuotes(rest, ',')
			pref, _, _ = strings.Cut(pref, ";") // parameters do not apply to wait
			name, value, _ := strings.Cut(pref, "=")
			if !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			value = strings.TrimSpace(value)
			if len(value) >= 2 && value[0] == '"' && value[len(value)-1] == '"' {
				value = value[1 : len(value)-1]
			}
			if value == "" || strings.Trim(value, "0123456789") != "" {
				return 0 // the first wait counts, even when it is not valid
			}
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n > maxPreferSeconds { // digits only: too large
				n = maxPreferSeconds
			}
			return min(time.Duration(n)*time.Second, c.maxWait)
		}
	}
	return 0
}

// cutOutsideQuotes cuts s at the first sep that is not inside a
// quoted-string (a quoted value may hold a comma): before, after, and
// whether sep was found.
func cutOutsideQuotes(s string, sep byte) (before, after string, found bool) {
	quoted, escaped := false, false
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; {
		case escaped:
			escaped = false
		case quoted && ch == '\\':
			escaped = true
		case ch == '"':
			quoted = !quoted
		case ch == sep && !quoted:
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
