package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
)

// linePage is how many of the line's members one read takes: a line of
// 100,000 callers is read in 100 round trips of about 60 KB, never one
// reply of 6 MB.
const linePage = 1000

// maxLineGroups bounds the groups (class and tenant) the table shows; the
// rest are summed in one row. --json lists them all.
const maxLineGroups = 20

// lineJSON is who waits in an upstream's line.
type lineJSON struct {
	// Waiting counts the callers in line; Processes the processes they
	// wait in.
	Waiting   int64 `json:"waiting"`
	Processes int64 `json:"processes"`
	// Groups are the callers by class and tenant, higher class first,
	// then the group whose first caller is nearest its turn.
	Groups []lineGroupJSON `json:"groups"`
}

// lineGroupJSON is the callers of one class and tenant.
type lineGroupJSON struct {
	Class     int    `json:"class"`
	ClassName string `json:"class_name"`
	Tenant    string `json:"tenant"`
	Waiting   int64  `json:"waiting"`
	// OldestAhead is how many callers are ahead of the group's oldest
	// (its first to arrive); OldestDeadlineMs the time until that caller
	// stops waiting.
	OldestAhead      int64 `json:"oldest_ahead"`
	OldestDeadlineMs int64 `json:"oldest_deadline_ms"`

	oldestSeq int64
}

// errLineNoPerm: the user may not read the line (no +zrange): status
// says so and shows the rest.
var errLineNoPerm = errors.New("the line is not readable as this user")

// lineErr wraps a failed read: NOPERM is errLineNoPerm, any other error
// Redis being unavailable.
func lineErr(op string, err error) error {
	if strings.HasPrefix(err.Error(), "NOPERM") {
		return fmt.Errorf("%w: %s: %w", errLineNoPerm, op, err)
	}
	return fmt.Errorf("%w: %s: %w", gate.ErrUnavailable, op, err)
}

// readLine reads who waits in upstream's line: its members page by page
// (a line that moves between pages may show a caller twice or not at
// all; the counts are of what was read), its processes, and Redis's clock
// for the deadlines. It writes nothing.
func readLine(ctx context.Context, rdb redis.UniversalClient, prefix, upstream string, page int64) (lineJSON, error) {
	line, owners, _, _ := keyspace.Line(prefix, upstream)
	var out lineJSON
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return out, lineErr("time", err)
	}
	if out.Processes, err = rdb.ZCard(ctx, owners).Result(); err != nil {
		return out, lineErr("zcard", err)
	}
	type key struct {
		class  int
		tenant string
	}
	groups := map[key]*lineGroupJSON{}
	var unread int64
	for start := int64(0); ; start += page {
		ms, err := rdb.ZRange(ctx, line, start, start+page-1).Result()
		if err != nil {
			return out, lineErr("zrange", err)
		}
		for i, m := range ms {
			e, ok := keyspace.ParseLineMember(m)
			if !ok {
				unread++ // not the gate's: counted, not shown
				continue
			}
			out.Waiting++
			g := groups[key{e.Class, e.Tenant}]
			if g == nil {
				g = &lineGroupJSON{Class: e.Class, ClassName: gate.Priority(e.Class).String(), Tenant: e.Tenant, oldestSeq: e.Seq + 1}
				groups[key{e.Class, e.Tenant}] = g
			}
			g.Waiting++
			if e.Seq < g.oldestSeq {
				g.oldestSeq, g.OldestAhead = e.Seq, start+int64(i)
				g.OldestDeadlineMs = max(e.Deadline-now.UnixMilli(), 0)
			}
		}
		if int64(len(ms)) < page {
			break
		}
	}
	out.Waiting += unread
	out.Groups = make([]lineGroupJSON, 0, len(groups))
	for _, g := range groups {
		out.Groups = append(out.Groups, *g)
	}
	slices.SortFunc(out.Groups, func(a, b lineGroupJSON) int {
		if c := cmp.Compare(b.Class, a.Class); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.OldestAhead, b.OldestAhead), cmp.Compare(a.Tenant, b.Tenant))
	})
	return out, nil
}

// lineRows shows who waits: how many, in how many processes, and per
// class and tenant how many and how near the oldest is its turn.
func lineRows(tw *tabwriter.Writer, l *lineJSON) {
	switch {
	case l == nil:
		row(tw, "line", "not readable as this user: add +zrange (docs/operating.md, ACL users)")
		return
	case l.Waiting == 0:
		row(tw, "line", "nobody waits")
		return
	}
	procs := "processes"
	if l.Processes == 1 {
		procs = "process"
	}
	row(tw, "line", fmt.Sprintf("%d waiting in %d %s (class, tenant: waiting; the oldest's place and deadline)", l.Waiting, l.Processes, procs))
	var rest, restGroups int64
	for i, g := range l.Groups {
		if i >= maxLineGroups {
			rest += g.Waiting
			restGroups++
			continue
		}
		row(tw, "  "+g.ClassName, fmt.Sprintf("%s: %d waiting; oldest %d ahead, deadline in %s",
			tenantName(g.Tenant), g.Waiting, g.OldestAhead, fmtDur(time.Duration(g.OldestDeadlineMs)*time.Millisecond)))
	}
	if restGroups > 0 {
		row(tw, "  …", fmt.Sprintf("%d waiting in %d more groups (--json lists them)", rest, restGroups))
	}
}

// tenantName is a tenant as a terminal may show it: escaped as every
// name the CLI prints, quoted when empty so that "" is not blank.
func tenantName(t string) string {
	if t == "" {
		return strconv.Quote(t)
	}
	return "tenant " + printable(t)
}
