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

// RecordCalls queues calls_record.lua. It adds ds (newest first; none:
// only read) to the durations of the gate's last calls. It keeps keep of
// them. It reads them back, newest first.
func (t *Trip) RecordCalls(ctx context.Context, key string, ds []time.Duration, keep int) Reply[[]time.Duration] {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(max(ms(d), 0), 10))
	}
	cmd := t.eval(ctx, callsRecordScript, []string{key}, b.String(), keep, ms(CallsTTL))
	return Reply[[]time.Duration]{cmd, decodeCalls}
}

// decodeCalls reads the durations calls_record.lua replied.
func decodeCalls(c redis.Cmder) ([]time.Duration, error) {
	v, err := c.(*redis.Cmd).Text()
	if err != nil || v == "" {
		return nil, err
	}
	var ds []time.Duration
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n < 0 {
			return nil, badReply("calls", []any{v})
		}
		ds = append(ds, time.Duration(n)*time.Millisecond)
	}
	return ds, nil
}
