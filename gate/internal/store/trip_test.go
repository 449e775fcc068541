package store

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A trip's scripts read what the trip's earlier commands wrote, whatever
// Redis lost. These two read a key: in a trip after the trip's SET, they
// must find what the SET wrote, not what another client wrote since.
var (
	tripGetScript  = newScript("return redis.call('GET', KEYS[1])")
	tripPTTLScript = newScript("return redis.call('PTTL', KEYS[1])")
)

// orderedTrip sends SET key "trip", then a script that reads key, in one
// trip, and returns what the script read.
func orderedTrip(ctx context.Context, s *Store, key string) (string, error) {
	t := s.Trip()
	t.add(redis.NewStatusCmd(ctx, "set", key, "trip", "px", 60000))
	read := t.eval(ctx, tripGetScript, []string{key})
	t.Send(ctx)
	return read.Text()
}

// writeAfterTrip arms another client's SET key "other" for right after
// rec's client's next pipeline: between a trip's pipeline and a script
// it sends again.
func writeAfterTrip(t *testing.T, rec *redistest.Commands, c redis.Cmdable, key string) {
	t.Helper()
	rec.AfterNextPipeline(func() {
		if err := c.Set(context.Background(), key, "other", time.Minute).Err(); err != nil {
			t.Error(err)
		}
	})
}

// recorder records the commands the store sends to tg: on a cluster
// through each master's client, where a job's acquire goes straight and
// the cluster client's pipelines go too.
func recorder(t *testing.T, tg redistest.Target) *redistest.Commands {
	t.Helper()
	rec := &redistest.Commands{}
	cc, ok := tg.Client.(*redis.ClusterClient)
	if !ok {
		tg.Client.AddHook(rec)
		return rec
	}
	if err := cc.ForEachMaster(context.Background(), func(_ context.Context, m *redis.Client) error {
		m.AddHook(rec)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return rec
}

type hookable interface {
	redis.Cmdable
	AddHook(redis.Hook)
}

// flushScripts empties every server's script cache (go-redis sends
// SCRIPT FLUSH to every master of a cluster).
func flushScripts(t *testing.T, c redis.Cmdable) {
	t.Helper()
	if err := c.ScriptFlush(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
}

// A fresh server (or one that lost its scripts before this store met it)
// runs a trip's script in the trip's order: the store sends its source,
// so another client's write after the trip's pipeline is not seen.
// Before, the EVALSHA met NOSCRIPT and the script was sent again after
// the pipeline: it read "other".
func TestTripRunsInOrderOnAServerWithoutItsScripts(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			flushScripts(t, tg.Client)
			rec := recorder(t, tg)
			s := New(tg.Client, Config{})
			key := redistest.Prefix(t) + "k"
			writeAfterTrip(t, rec, tg.Client, key)
			got, err := orderedTrip(ctx, s, key)
			if err != nil || got != "trip" {
				t.Fatalf("the trip's script read %q (%v), want %q: what the trip's SET wrote", got, err, "trip")
			}
			if exp, got := []string{"[set eval]", "set"}, rec.Take(); !slices.Equal(got, exp) {
				t.Fatalf("round trips %v, want %v: the script's source in the trip, then the other client's write", got, exp)
			}
		})
	}
}

// Once a server ran a script, the store sends its SHA (the steady state:
// no source on the wire). When any script meets NOSCRIPT (here a SCRIPT
// FLUSH), the store forgets them all: the next trip of another script
// sends its source again, in order.
func TestTripRunsInOrderAfterTheServerLostItsScripts(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			rec := recorder(t, tg)
			s := New(tg.Client, Config{})
			key := redistest.Prefix(t) + "k"
			pttl := func() {
				t.Helper()
				tr := s.Trip()
				r := tr.eval(ctx, tripPTTLScript, []string{key})
				tr.Send(ctx)
				if err := r.Err(); err != nil {
					t.Fatal(err)
				}
			}
			// Learn both scripts.
			if _, err := orderedTrip(ctx, s, key); err != nil {
				t.Fatal(err)
			}
			pttl()
			rec.Take()
			if got, err := orderedTrip(ctx, s, key); err != nil || got != "trip" {
				t.Fatalf("steady trip read %q (%v)", got, err)
			}
			pttl()
			if exp, got := []string{"[set evalsha]", "evalsha"}, rec.Take(); !slices.Equal(got, exp) {
				t.Fatalf("steady state sent %v, want %v: scripts by their SHA", got, exp)
			}
			flushScripts(t, tg.Client)
			rec.Take()
			pttl() // meets NOSCRIPT, sends its source again
			if exp, got := []string{"evalsha", "eval"}, rec.Take(); !slices.Equal(got, exp) {
				t.Fatalf("after SCRIPT FLUSH sent %v, want %v", got, exp)
			}
			writeAfterTrip(t, rec, tg.Client, key)
			if got, err := orderedTrip(ctx, s, key); err != nil || got != "trip" {
				t.Fatalf("after the loss the trip's script read %q (%v), want %q: what the trip's SET wrote", got, err, "trip")
			}
			if exp, got := []string{"[set eval]", "set"}, rec.Take(); !slices.Equal(got, exp) {
				t.Fatalf("after the loss sent %v, want %v", got, exp)
			}
		})
	}
}

// On a cluster each master loads its own scripts: one master's run says
// nothing of another's. The script learnt on the first master is sent as
// source to the second, in order. twoMasters (two miniredis) stands for a
// cluster; the real one runs where RETRYGATE_TARGETS has it.
func TestTripKnowsScriptsPerMaster(t *testing.T) {
	type twoKeys struct {
		c    hookable
		rdb  Client
		a, b string
	}
	setups := map[string]func(t *testing.T) (twoKeys, bool){
		"two-miniredis": func(t *testing.T) (twoKeys, bool) {
			tm := newTwoMasters(t, "up")
			p := redistest.UniqueKey(t)
			flushScripts(t, tm.job)
			flushScripts(t, tm.up)
			return twoKeys{c: tm.Ring, rdb: tm, a: p + ":{job}", b: p + ":{up}"}, true
		},
		"cluster": func(t *testing.T) (twoKeys, bool) {
			for _, tg := range redistest.Targets(t) {
				if !tg.IsCluster {
					continue
				}
				cc := tg.Client.(*redis.ClusterClient)
				ctx := context.Background()
				p := redistest.UniqueKey(t)
				a := p + ":{a}"
				ma, err := cc.MasterForKey(ctx, a)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < 100; i++ {
					b := p + ":{b" + strconv.Itoa(i) + "}"
					mb, err := cc.MasterForKey(ctx, b)
					if err != nil {
						t.Fatal(err)
					}
					if mb.Options().Addr != ma.Options().Addr {
						flushScripts(t, cc)
						return twoKeys{c: cc, rdb: cc, a: a, b: b}, true
					}
				}
				t.Fatal("no key on a second master in 100 tags")
			}
			return twoKeys{}, false
		},
	}
	for _, name := range []string{"two-miniredis", "cluster"} {
		t.Run(name, func(t *testing.T) {
			k, ok := setups[name](t)
			if !ok {
				t.Skip("no cluster among the targets")
			}
			ctx := context.Background()
			rec := &redistest.Commands{}
			k.c.AddHook(rec)
			s := New(k.rdb, Config{})
			if got, err := orderedTrip(ctx, s, k.a); err != nil || got != "trip" {
				t.Fatalf("first master: read %q (%v)", got, err)
			}
			rec.Take()
			writeAfterTrip(t, rec, k.c, k.b)
			if got, err := orderedTrip(ctx, s, k.b); err != nil || got != "trip" {
				t.Fatalf("second master: the trip's script read %q (%v), want %q: what the trip's SET wrote", got, err, "trip")
			}
			if exp, got := []string{"[set eval]", "set"}, rec.Take(); !slices.Equal(got, exp) {
				t.Fatalf("second master: sent %v, want %v: the source to a master that never ran it", got, exp)
			}
			if got, err := orderedTrip(ctx, s, k.a); err != nil || got != "trip" {
				t.Fatalf("first master again: read %q (%v)", got, err)
			}
			if exp, got := []string{"[set evalsha]"}, rec.Take(); !slices.Equal(got, exp) {
				t.Fatalf("first master again: sent %v, want %v", got, exp)
			}
		})
	}
}

// What a trip learnt under the scripts known before a NOSCRIPT may date
// from before the loss (an EVAL answered just before a SCRIPT FLUSH): it
// is not kept, and the next trip sends the source.
func TestScriptsLearntBeforeALossAreForgotten(t *testing.T) {
	var k knownScripts
	before := k.Load()
	k.learn(before, "", tripGetScript)
	if !k.Load().has("", tripGetScript) {
		t.Fatal("a script run is not known loaded")
	}
	k.lost(before)
	after := k.Load()
	k.lost(before) // a second trip that met the same loss
	if after.has("", tripGetScript) || k.Load() != after {
		t.Fatal("a NOSCRIPT did not forget the scripts once")
	}
	k.learn(before, "", tripPTTLScript) // answered before the loss, read after
	if k.Load().has("", tripPTTLScript) {
		t.Fatal("a script learnt before the loss is known loaded after it")
	}
	k.learn(after, "n1", tripPTTLScript)
	if h := k.Load(); !h.has("n1", tripPTTLScript) || h.has("n2", tripPTTLScript) {
		t.Fatal("a script is known per server")
	}
}

// An acquire on a server that lacks the fence's script: another client
// that reads the job between the trip's pipeline and a script sent again
// finds it taken with its fence, as the acquire left it. Before, the
// fence script (EVALSHA, NOSCRIPT) ran after that read: the job was seen
// running without a fence ("r:<token>").
func TestAcquireIsFencedInItsTrip(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			flushScripts(t, tg.Client)
			rec := recorder(t, tg)
			s := New(tg.Client, Config{Lease: time.Minute})
			key := redistest.Prefix(t) + "job"
			var seen string
			rec.AfterNextPipeline(func() { seen, _ = tg.Client.Get(ctx, key).Result() })
			var r Acquired
			if err := s.Acquire(ctx, &Acquire{Key: key, Token: NewToken()}, &r); err != nil || !r.Taken {
				t.Fatalf("acquire: taken %v (%v), want taken", r.Taken, err)
			}
			r.Close()
			left, err := tg.Client.Get(ctx, key).Result()
			if err != nil {
				t.Fatal(err)
			}
			if seen != left {
				t.Fatalf("read between the trip's commands: %q, want the value the acquire left, %q", seen, left)
			}
		})
	}
}

// aclStore is a store on srv's restricted user, and the commands it sends.
func aclStore(t *testing.T, srv *redistest.ACLSrv) (*Store, *redistest.Commands) {
	c := srv.Client(t)
	rec := &redistest.Commands{}
	c.AddHook(rec)
	return New(c, Config{}), rec
}

// A user that may run only the scripts an admin loaded (an ACL with
// +evalsha and -eval; docs/operating.md, "ACL users") has its scripts run
// by their hash. The first EVAL, refused (NOPERM), is sent again as
// EVALSHA after the rest of its trip; every later script goes by hash in
// its trip's order, so another client's write after the pipeline is not
// what the script reads. After SCRIPT FLUSH (what a restart or a
// failover does to the cache) the store cannot load them: the script is
// refused until the admin loads them again, then runs by hash, in order.
func TestTripSendsHashesToAUserRefusedEVAL(t *testing.T) {
	ctx := context.Background()
	srv := redistest.ACLServer(t, "acl", []string{"-eval"})
	admin := srv.AdminClient(t)
	load := func() {
		t.Helper()
		for _, sc := range []*script{tripGetScript, tripPTTLScript} {
			if err := admin.ScriptLoad(ctx, sc.src).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	load()
	s, rec := aclStore(t, srv)
	key := "acl:" + redistest.UniqueKey(t)

	if got, err := orderedTrip(ctx, s, key); err != nil || got != "trip" {
		t.Fatalf("first trip: the script read %q (%v), want %q", got, err, "trip")
	}
	if exp, got := []string{"[set eval]", "evalsha"}, rec.Take(); !slices.Equal(got, exp) {
		t.Fatalf("first trip sent %v, want %v: the refused EVAL sent again by its hash", got, exp)
	}

	writeAfterTrip(t, rec, admin, key)
	if got, err := orderedTrip(ctx, s, key); err != nil || got != "trip" {
		t.Fatalf("a later trip: the script read %q (%v), want %q: what the trip's SET wrote, not the write after its pipeline", got, err, "trip")
	}
	tr := s.Trip() // a script this store has not sent yet
	pttl := tr.eval(ctx, tripPTTLScript, []string{key})
	tr.Send(ctx)
	if n, err := pttl.Int64(); err != nil || n <= 0 {
		t.Fatalf("a script not sent before: PTTL %d (%v), want the key's TTL", n, err)
	}
	if exp, got := []string{"[set evalsha]", "evalsha"}, rec.Take(); !slices.Equal(got, exp) {
		t.Fatalf("later trips sent %v, want %v: scripts by hash alone", got, exp)
	}

	if err := admin.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := orderedTrip(ctx, s, key); !redis.HasErrorPrefix(err, "NOPERM") {
		t.Fatalf("after SCRIPT FLUSH: %v, want NOPERM: the user may not load a script", err)
	}
	if exp, got := []string{"[set evalsha]", "eval"}, rec.Take(); !slices.Equal(got, exp) {
		t.Fatalf("after SCRIPT FLUSH sent %v, want %v", got, exp)
	}
	load()
	writeAfterTrip(t, rec, admin, key)
	if got, err := orderedTrip(ctx, s, key); err != nil || got != "trip" {
		t.Fatalf("loaded again by the admin: the script read %q (%v), want %q, in order", got, err, "trip")
	}
	if exp, got := []string{"[set evalsha]"}, rec.Take(); !slices.Equal(got, exp) {
		t.Fatalf("loaded again by the admin, sent %v, want %v: by hash, not its source", got, exp)
	}
}

// Only a refused EVAL makes the store send hashes alone: a user refused a
// key (NOPERM on a key outside its pattern) may still load scripts, so a
// later trip on its own keys sends the source, in order.
func TestTripKeepsSourcesForAUserRefusedAKey(t *testing.T) {
	ctx := context.Background()
	srv := redistest.ACLServer(t, "acl", nil)
	s, rec := aclStore(t, srv)
	if _, err := orderedTrip(ctx, s, "other:"+redistest.UniqueKey(t)); !redis.HasErrorPrefix(err, "NOPERM") {
		t.Fatalf("a key outside the user's pattern: %v, want NOPERM", err)
	}
	rec.Take()
	key := "acl:" + redistest.UniqueKey(t)
	writeAfterTrip(t, rec, srv.AdminClient(t), key)
	if got, err := orderedTrip(ctx, s, key); err != nil || got != "trip" {
		t.Fatalf("its own key: the script read %q (%v), want %q, in order", got, err, "trip")
	}
	if exp, got := []string{"[set eval]"}, rec.Take(); !slices.Equal(got, exp) {
		t.Fatalf("its own key: sent %v, want %v: the source, in its trip", got, exp)
	}
}

// Every script of a trip that meets NOSCRIPT is sent again, not only the
// last: a trip of two scripts the store knew, after SCRIPT FLUSH, gets
// both answers. One takes more arguments than keys, the other more keys
// than arguments (acquire_budget.lua has 10 arguments and 4 keys for one
// upstream; budget_record.lua's keys and arguments differ too).
func TestTripResendsEveryLostScript(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s := New(tg.Client, Config{})
			key := "{" + redistest.UniqueKey(t) + "}:k" // one slot for every key
			keys := []string{key, key + "1", key + "2", key + "3", key + "4"}
			both := func() (string, int64, error, error) {
				tr := s.Trip()
				tr.add(redis.NewStatusCmd(ctx, "set", key, "trip", "px", 60000))
				get := tr.eval(ctx, tripGetScript, keys[:1], "a", "b", "c", "d", "e")
				pttl := tr.eval(ctx, tripPTTLScript, keys)
				tr.Send(ctx)
				v, gerr := get.Text()
				n, perr := pttl.Int64()
				return v, n, gerr, perr
			}
			if _, _, gerr, perr := both(); gerr != nil || perr != nil { // learnt
				t.Fatal(gerr, perr)
			}
			flushScripts(t, tg.Client)
			if v, n, gerr, perr := both(); gerr != nil || perr != nil || v != "trip" || n <= 0 {
				t.Fatalf("after SCRIPT FLUSH: GET script %q (%v), PTTL script %d (%v); want both answered", v, gerr, n, perr)
			}
		})
	}
}

// A reply's Err is the error its command met, as Result's; a reply of
// nothing queued has none.
func TestReplyErr(t *testing.T) {
	var none Reply[int64]
	if err := none.Err(); err != nil {
		t.Fatalf("a reply of nothing queued: %v, want no error", err)
	}
	s, _, rdb := newStore(t)
	ctx := context.Background()
	k := budgetKeys("up")
	if err := rdb.Set(ctx, k.Budget, "not a hash", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	tr := s.Trip()
	rec := tr.RecordBudget(ctx, k, "", Reading{Requests: Quota{Reported: true, Remaining: 5, Limit: 60, ResetIn: time.Minute}}, time.Minute)
	tr.Send(ctx)
	_, rerr := rec.Result()
	if err := rec.Err(); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") || err != rerr {
		t.Fatalf("a record on a key of another type: Err %v, Result's %v; want the WRONGTYPE from both", err, rerr)
	}
}
