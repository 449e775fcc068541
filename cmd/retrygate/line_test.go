package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// lineMember is a member as line_join.lua writes it (its layout:
// keyspace.ParseLineMember), start tag 0, so a line orders by class then
// arrival.
func lineMember(class int, seq int64, deadline time.Time, owner, tenant string) string {
	return fmt.Sprintf("%03d%015d%012d:1000:%d:%s:%s", 255-class, 0, seq, deadline.UnixMilli(), owner, tenant)
}

// `upstream status` shows who waits in the upstream's line: how many, in
// how many processes, and per class and tenant how many and how near the
// oldest is its turn; a hostile tenant is escaped as every name, and
// --json gives the same with the tenant as it is.
func TestUpstreamStatusShowsTheLine(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			f := &fixture{prefix: redistest.UniqueKey(t)}
			f.args = append(redisArgs(t, tg), "--prefix", f.prefix)
			const upstream = "openai"
			hostile := "\x1b[31mevil\r\nstate ready"
			if r := f.run(t, "--json", "--upstream", upstream, "upstream", "status"); r.code != exitOK ||
				!strings.Contains(r.stdout, `"line": {`) || !strings.Contains(r.stdout, `"waiting": 0`) {
				t.Fatalf("empty line: exit %d, %s %s", r.code, r.stdout, r.stderr)
			}

			line, owners, _, _ := keyspace.Line(f.prefix, upstream)
			later := time.Now().Add(time.Minute)
			members := []string{
				lineMember(192, 4, later, "p1", "acme"),
				lineMember(192, 9, later, "p2", "acme"),
				lineMember(128, 2, later, "p1", ""),
				lineMember(64, 1, later.Add(time.Hour), "p1", "globex"),
				lineMember(64, 3, later, "p2", "globex"),
				lineMember(64, 5, later, "p2", "globex"),
				lineMember(64, 6, later, "p2", hostile),
			}
			zs := make([]redis.Z, len(members))
			for i, m := range members {
				zs[i] = redis.Z{Member: m}
			}
			if err := tg.Client.ZAdd(ctx, line, zs...).Err(); err != nil {
				t.Fatal(err)
			}
			end := float64(time.Now().Add(time.Minute).UnixMilli())
			if err := tg.Client.ZAdd(ctx, owners, redis.Z{Score: end, Member: "p1"}, redis.Z{Score: end, Member: "p2"}).Err(); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{line, owners} {
				tg.Client.PExpire(ctx, k, time.Minute)
			}

			r := f.run(t, "--upstream", upstream, "upstream", "status")
			if r.code != exitOK {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			assertTerminalSafe(t, "upstream status", r.stdout)
			for _, exp := range []string{
				"7 waiting in 2 processes",
				"interactive  tenant acme: 2 waiting; oldest 0 ahead, deadline in ",
				`normal       "": 1 waiting; oldest 2 ahead`,
				"batch        tenant globex: 3 waiting; oldest 3 ahead, deadline in 1h1m",
				"batch        tenant " + printable(hostile) + ": 1 waiting; oldest 6 ahead",
			} {
				if !strings.Contains(r.stdout, exp) {
					t.Errorf("no %q in:\n%s", exp, r.stdout)
				}
			}

			r = f.run(t, "--json", "--upstream", upstream, "upstream", "status")
			var got upstreamStatusJSON
			if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
				t.Fatalf("%v: %s", err, r.stdout)
			}
			if got.Line == nil || got.Upstream != upstream || got.Line.Waiting != 7 || got.Line.Processes != 2 || len(got.Line.Groups) != 4 {
				t.Fatalf("json: %+v", got)
			}
			want := []struct {
				class          int
				tenant         string
				waiting, ahead int64
			}{{192, "acme", 2, 0}, {128, "", 1, 2}, {64, "globex", 3, 3}, {64, hostile, 1, 6}}
			for i, w := range want {
				g := got.Line.Groups[i]
				if g.Class != w.class || g.Tenant != w.tenant || g.Waiting != w.waiting || g.OldestAhead != w.ahead {
					t.Errorf("group %d: %+v, want %+v", i, g, w)
				}
			}
			// Read two at a time, as a long line is read linePage at a
			// time: the same groups and places.
			paged, err := readLine(ctx, tg.Client, f.prefix, upstream, 2)
			if err != nil {
				t.Fatal(err)
			}
			for i := range paged.Groups {
				paged.Groups[i].OldestDeadlineMs, paged.Groups[i].oldestSeq = got.Line.Groups[i].OldestDeadlineMs, 0
			}
			if exp, got := fmt.Sprintf("%+v", *got.Line), fmt.Sprintf("%+v", paged); exp != got {
				t.Errorf("read 2 at a time:\n%s\nexp\n%s", got, exp)
			}
			if d := got.Line.Groups[2].OldestDeadlineMs; d < int64(time.Hour/time.Millisecond)+50_000 {
				t.Errorf("globex's oldest deadline in %d ms, want over an hour", d)
			}
		})
	}
}

// The line as the gate writes it: a caller waiting for its turn (its
// upstream's budget spent, OpenAI's headers,
// https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers)
// shows with its class and tenant, and leaves the table when its wait
// ends.
func TestUpstreamStatusShowsACallerWaiting(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f := &fixture{prefix: redistest.UniqueKey(t)}
			f.args = append(redisArgs(t, tg), "--prefix", f.prefix)
			g := gatetest.New(t, tg.Client, gate.Options{Prefix: f.prefix, Upstream: "openai"})
			// 3 of 60 a minute left: two calls in flight spend them,
			// beside the reserve of one.
			gatetest.Report(t, g, "report", gatetest.OpenAIRequests(3, 60, "57s"))
			gatetest.Hold(t, g, "held-1", "held-2")
			done := make(chan error, 1)
			go func() {
				wctx := gate.WithTenant(gate.WithPriority(ctx, gate.PriorityBatch), "globex", 1)
				_, err := g.AcquireWait(wctx, "waiting", time.Minute)
				done <- err
			}()
			var r result
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				r = f.run(t, "--upstream", "openai", "upstream", "status")
				if strings.Contains(r.stdout, "1 waiting in 1 process ") || time.Now().After(deadline) {
					break
				}
			}
			if !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), "batch tenant globex: 1 waiting; oldest 0 ahead, deadline in ") {
				t.Fatalf("a caller in line: %s", r.stdout)
			}
			// The job's own status says it waits, and where.
			r = f.run(t, "--upstream", "openai", "status", "waiting")
			if flat := strings.Join(strings.Fields(r.stdout), " "); !strings.Contains(flat, "in line 0 ahead, its turn in about ") ||
				!strings.Contains(flat, "its call waits in the upstream's line") || strings.Contains(flat, "retry in") {
				t.Fatalf("status of the job in line: %s", r.stdout)
			}
			r = f.run(t, "--json", "--upstream", "openai", "status", "waiting")
			var sj statusJSON
			if err := json.Unmarshal([]byte(r.stdout), &sj); err != nil || !sj.InLine || sj.Ahead != 0 || sj.RetryAfterMs <= 0 {
				t.Fatalf("status --json of the job in line: %v %s", err, r.stdout)
			}
			cancel()
			<-done
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				r = f.run(t, "--upstream", "openai", "upstream", "status")
				if strings.Contains(strings.Join(strings.Fields(r.stdout), " "), "line nobody waits") {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("the caller left, the line still shows: %s", r.stdout)
				}
			}
		})
	}
}
