package store

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// CallsTTL is how long a gate's calls key outlives its last write.
const CallsTTL = 24 * time.Hour

// maxCallMs is the longest duration a calls key holds, in ms: 9 digits,
// 11.5 days.
const maxCallMs = 999_999_999

// RecordCalls queues calls_record.lua. It adds ds (newest first; none:
// only read) to the durations of the gate's last calls. It keeps keep of
// them. It reads them back, newest first.
func (t *Trip) RecordCalls(ctx context.Context, key string, ds []time.Duration, keep int) Reply[[]time.Duration] {
	var b strings.Builder
	for i, d := range ds[:min(len(ds), keep)] {
		if i > 0 {
			b.WriteByte(',')
		}
		// 9 digits wide, so that the script keeps the newest by length.
		n := strconv.FormatInt(min(max(ms(d), 0), maxCallMs), 10)
		b.WriteString(strings.Repeat("0", 9-len(n)))
		b.WriteString(n)
	}
	cmd := t.eval(ctx, callsRecordScript, []string{key}, b.String(), keep, ms(CallsTTL))
	return Reply[[]time.Duration]{cmd, decodeCalls}
}

// decodeCalls reads the durations calls_record.lua replied. A field that
// is not a duration (a foreign value the script kept, cut by length) is
// skipped: it leaves the key as new durations push it out.
func decodeCalls(c redis.Cmder) ([]time.Duration, error) {
	v, err := c.(*redis.Cmd).Text()
	if err != nil || v == "" {
		return nil, err
	}
	var ds []time.Duration
	for f := range strings.SplitSeq(v, ",") {
		if n, err := strconv.ParseInt(f, 10, 64); err == nil && n >= 0 {
			ds = append(ds, time.Duration(n)*time.Millisecond)
		}
	}
	return ds, nil
}
