package upstream

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate/internal/store"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// agreement is one row of the table the Go judge and the scripts share:
// an upstream's raw value, its wait's end at now+delta ms, and what a
// call may do. The values are the shapes store/values.go lists and the
// near misses a hand-made SET could leave (an operator's, or a gate of
// another version).
type agreement struct {
	name  string
	value string // "" for no key; {u} is replaced by now+delta
	delta int64
	want  Permit
	// exact: the row sits on the wait's last millisecond. Only a frozen
	// clock (miniredis) can tell it; a real server's moves on.
	exact bool
}

var agreements = []agreement{
	{name: "no key", want: Permitted},
	{name: "cooling", value: "c:rate_limited:1:{u}", delta: 60_000, want: Refused},
	{name: "cooling over", value: "c:rate_limited:1:{u}", delta: -60_000, want: MayProbe},
	{name: "cooling, empty reason, over", value: "c::3:{u}", delta: -60_000, want: MayProbe},
	{name: "paused", value: "p:quota_exhausted:2:{u}", delta: 60_000, want: Refused},
	{name: "paused over", value: "p:quota_exhausted:2:{u}", delta: -60_000, want: MayProbe},
	{name: "operator's pause", value: "p:operator:1:{u}:db move: back at 3", delta: 60_000, want: Refused},
	{name: "operator's pause over", value: "p:operator:1:{u}:db move: back at 3", delta: -60_000, want: MayProbe},
	{name: "operator's pause, empty note, over", value: "p:operator:1:{u}:", delta: -60_000, want: MayProbe},
	{name: "probing", value: "h:rate_limited:1:{u}:tok", delta: 60_000, want: Refused},
	{name: "probing past its lease", value: "h:rate_limited:1:{u}:tok", delta: -60_000, want: Refused},
	{name: "probing without a token", value: "h:rate_limited:1:{u}", delta: -60_000, want: Refused},
	{name: "cooling with a trailing colon", value: "c:rate_limited:1:{u}:", delta: -60_000, want: Refused},
	{name: "cooling with a fifth field", value: "c:rate_limited:1:{u}:junk", delta: -60_000, want: Refused},
	{name: "signed level", value: "c:rate_limited:+1:{u}", delta: -60_000, want: Refused},
	{name: "negative level", value: "c:rate_limited:-1:{u}", delta: -60_000, want: Refused},
	{name: "empty level", value: "c:rate_limited::{u}", delta: -60_000, want: Refused},
	{name: "signed end", value: "c:rate_limited:1:+{u}", delta: -60_000, want: Refused},
	{name: "end with letters", value: "c:rate_limited:1:{u}ms", delta: -60_000, want: Refused},
	{name: "end with a newline", value: "p:quota_exhausted:1:{u}\n", delta: -60_000, want: Refused},
	{name: "end past int64", value: "c:rate_limited:1:99999999999999999999", want: Refused},
	{name: "end of 19 digits", value: "c:rate_limited:1:1000000000000000000", want: Refused},
	{name: "level of 19 digits", value: "c:rate_limited:1000000000000000000:{u}", delta: -60_000, want: Refused},
	{name: "level of 18 digits, over", value: "p:quota_exhausted:100000000000000000:{u}", delta: -60_000, want: MayProbe},
	{name: "no end", value: "c:rate_limited:1", want: Refused},
	{name: "reason with a colon", value: "c:rate:limited:1:{u}", delta: -60_000, want: Refused},
	{name: "another letter", value: "x:rate_limited:1:{u}", delta: -60_000, want: Refused},
	{name: "upper case", value: "C:rate_limited:1:{u}", delta: -60_000, want: Refused},
	{name: "leading space", value: " c:rate_limited:1:{u}", delta: -60_000, want: Refused},
	{name: "one letter", value: "c", want: Refused},
	{name: "a word", value: "cooling", want: Refused},
	{name: "cooling's last millisecond", value: "c:rate_limited:1:{u}", delta: 1, want: Refused, exact: true},
	{name: "cooling ends now", value: "c:rate_limited:1:{u}", delta: 0, want: MayProbe, exact: true},
	{name: "pause ends now", value: "p:operator:1:{u}:note", delta: 0, want: MayProbe, exact: true},
}

// The breaker's judgement of a value is made in Go (package upstream's
// states) and in Lua (upstream_value.lua's upstream_may, which the
// one-node acquire and the probe's claim call, atomically with what they
// write). The acquire no longer guards at run time against the two
// disagreeing, so this table is that guard. Every row goes through:
//   - the Go judge, of the value as the store decodes it;
//   - acquire_budget.lua (Store.Acquire on one node): it takes the job
//     iff the Go judge does not refuse the call;
//   - upstream_claim.lua: ready without a key, the probe claimed iff Go
//     says MayProbe, refused iff Go refuses.
func TestUpstreamScriptsAgree(t *testing.T) {
	ctx := context.Background()
	for _, tg := range redistest.Targets(t) {
		if tg.IsCluster {
			continue // the one-node acquire script does not run there
		}
		t.Run(tg.Name, func(t *testing.T) {
			frozen := tg.FastForward != nil
			if frozen {
				tg.FastForward(0) // TIME stays put until the next Advance
			}
			st := store.New(tg.Client, store.Config{Lease: time.Minute})
			for _, row := range agreements {
				if row.exact && !frozen {
					continue
				}
				t.Run(row.name, func(t *testing.T) {
					tm, err := tg.Client.Time(ctx).Result()
					if err != nil {
						t.Fatal(err)
					}
					now := tm.UnixMilli()
					value := strings.ReplaceAll(row.value, "{u}", strconv.FormatInt(now+row.delta, 10))
					v := verdictsOf(t, tg.Client, st, value, now, false)
					if v.judged != row.want {
						t.Fatalf("Go judges %q at now%+d ms: %v, want %v", value, row.delta, v.judged, row.want)
					}
					if exp := row.want != Refused; v.taken != exp || v.untried == exp {
						t.Errorf("acquire_budget.lua on %q: taken %v (untried %v), want taken %v", value, v.taken, v.untried, exp)
					}
					if v.refusing != v.untried {
						t.Errorf("on %q the Go judge refuses %v but the script refused %v", value, v.refusing, v.untried)
					}
					if v.claimed != claimOf(row.want) {
						t.Errorf("upstream_claim.lua on %q: %+v, want %+v", value, v.claimed, claimOf(row.want))
					}

					// The budget spent: whatever the breaker says, both
					// refuse the call (the claim does not ask the budget).
					v = verdictsOf(t, tg.Client, st, value, now, true)
					if v.taken || !v.untried || !v.refusing || v.claimed != claimOf(row.want) {
						t.Errorf("on %q with the budget spent: taken %v, untried %v, Go refusing %v, claim %+v; want all refusing, the claim as before",
							value, v.taken, v.untried, v.refusing, v.claimed)
					}
				})
			}
		})
	}
}

// verdicts are what each side says of one value.
type verdicts struct {
	judged Permit // the Go judge, of the value as the store decodes it
	// The one-node acquire (acquire_budget.lua): taken, or untried (no
	// upstream may take the call); refusing is the Go judgement of what
	// it read, as Gate.judge makes it.
	taken, untried, refusing bool
	claimed                  Claimed // upstream_claim.lua, on the value as it was
}

// verdictsOf writes value ("" for none) to a new upstream's key and asks
// every side about it at Redis time now (ms). spent: the upstream's
// budget reports no request left for a minute.
func verdictsOf(t testing.TB, rdb redis.UniversalClient, st *store.Store, value string, now int64, spent bool) verdicts {
	t.Helper()
	ctx := context.Background()
	set := NewSet(redistest.UniqueKey(t), []string{"up"}, Policy{FailWindow: time.Minute})
	key := set.Keys()[0]
	put := func() {
		t.Helper()
		if value == "" {
			return
		}
		if err := rdb.Set(ctx, key, value, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
	}
	put()
	if spent {
		tr := st.Trip()
		rec := tr.RecordBudget(ctx, set.all[0].(*guarded).bk, "",
			store.Reading{Requests: store.Quota{Reported: true, Remaining: 0, Limit: 60, ResetIn: time.Minute}}, time.Minute)
		tr.Send(ctx)
		if err := rec.Err(); err != nil {
			t.Fatal(err)
		}
	}
	var v verdicts

	tr := st.Trip()
	read := tr.ReadUpstream(ctx, key)
	tr.Send(ctx)
	rd, err := read.Result()
	if err != nil {
		t.Fatal(err)
	}
	v.judged, _ = set.all[0].judge(rd.Upstream, now)

	token := store.NewToken()
	a := store.Acquire{Key: redistest.UniqueKey(t), Token: token, Upstreams: set.Keys(),
		Admissions: set.Admissions(token, 0, -1, "")}
	var r store.Acquired
	if err := st.Acquire(ctx, &a, &r); err != nil {
		t.Fatal(err)
	}
	r.Close()
	if r.Unasked {
		t.Fatalf("on %q the acquire did not run the one-node script", value)
	}
	v.taken, v.untried = r.Taken, r.Untried
	_, v.refusing = set.Judge(r.Upstreams, a.Admissions, r.Admitted, r.Now).Refusal()

	put()
	tr = st.Trip()
	claim := tr.Claim(ctx, key, store.NewToken())
	tr.Send(ctx)
	c, err := claim.Result()
	if err != nil {
		t.Fatal(err)
	}
	v.claimed = Claimed{Ready: c.Ready, Claimed: c.Claimed}
	return v
}

// Claimed is what a claim answered, without its value.
type Claimed struct{ Ready, Claimed bool }

// claimOf is the claim's answer a permit calls for.
func claimOf(p Permit) Claimed {
	switch p {
	case Permitted:
		return Claimed{Ready: true}
	case MayProbe:
		return Claimed{Claimed: true}
	}
	return Claimed{}
}

// FuzzUpstreamScriptsAgree looks for a value the Go judge and the scripts
// read apart, on miniredis (its clock frozen, so a wait's end is exact).
// The seeds are the table's rows.
func FuzzUpstreamScriptsAgree(f *testing.F) {
	for _, row := range agreements {
		f.Add(row.value, row.delta, false)
		f.Add(row.value, row.delta, true)
	}
	m, rdb := redistest.Miniredis(f)
	redistest.Advance(m, 0)
	st := store.New(rdb, store.Config{Lease: time.Minute})
	tm, err := rdb.Time(context.Background()).Result()
	if err != nil {
		f.Fatal(err)
	}
	now := tm.UnixMilli()
	f.Fuzz(func(t *testing.T, value string, delta int64, spent bool) {
		delta = max(min(delta, 1<<40), -1<<40)
		value = strings.ReplaceAll(value, "{u}", strconv.FormatInt(now+delta, 10))
		v := verdictsOf(t, rdb, st, value, now, spent)
		if v.taken == v.untried || v.taken != (v.judged != Refused && !spent) || v.refusing != v.untried {
			t.Fatalf("on %q the Go judge says %v (refusing %v) but the acquire took the job: %v (untried %v)", value, v.judged, v.refusing, v.taken, v.untried)
		}
		if v.claimed != claimOf(v.judged) {
			t.Fatalf("on %q the Go judge says %v but the claim answered %+v", value, v.judged, v.claimed)
		}
	})
}
