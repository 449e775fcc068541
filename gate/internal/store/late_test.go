package store

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// A success written late (its first settle never reached Redis) is
// written on a key that expired meanwhile, and still never over a newer
// value; an ordinary success finds the gone key not owned.
func TestLateSuccess(t *testing.T) {
	s, _, rdb := newStore(t)
	ctx := context.Background()
	done := Settlement{Kind: Done, TTL: time.Hour}
	settle := func(key string, token Token, fence int64, w Settlement) Settled {
		t.Helper()
		tr := s.Trip()
		r := tr.Settle(ctx, key, token, fence, w)
		tr.Send(ctx)
		st, err := r.Result()
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	a, r := acquire(t, s, "gone")
	rdb.Del(ctx, "gone")
	if st := settle("gone", a.Token, r.Fence, done); st.Owned {
		t.Fatalf("a success on a gone key: %+v, want not owned", st)
	}
	late := done
	late.Late = true
	if st := settle("gone", a.Token, r.Fence, late); !st.Owned {
		t.Fatalf("a late success on a gone key: %+v, want written", st)
	}
	if v := rdb.Get(ctx, "gone").Val(); !strings.HasPrefix(v, "d:") {
		t.Fatalf("after the late success the key holds %q, want a done mark", v)
	}

	a, r = acquire(t, s, "newer")
	rdb.Del(ctx, "newer")
	acquire(t, s, "newer") // another run took the job meanwhile
	if st := settle("newer", a.Token, r.Fence, late); st.Owned || st.Found.Kind != Running {
		t.Fatalf("a late success over a newer run: %+v, want not owned, the run found", st)
	}
}

// A renewal records the runner's estimate beside the fence, and an
// acquire refused by the value reads it.
func TestRenewRecordsTheEstimate(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	a, r := acquire(t, s, "k")
	tr := s.Trip()
	renew := tr.Renew(ctx, "k", a.Token, r.Fence, 0, 8*time.Second)
	tr.Send(ctx)
	if ok, err := renew.Result(); err != nil || !ok {
		t.Fatalf("renew: %v %v", ok, err)
	}
	_, r2 := acquire(t, s, "k")
	if r2.Taken || r2.Job.Estimate != 8*time.Second || r2.Job.Fence != r.Fence {
		t.Fatalf("refused acquire: %+v, want the runner's 8 s estimate and its fence", r2.Job)
	}
}

// RecordCalls keeps the newest durations first, at most keep, with a TTL;
// with none to add it only reads. On every engine: the script cuts the
// stored value by its length.
func TestRecordCalls(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s := New(tg.Client, Config{Lease: time.Minute, Timeout: time.Second})
			key := redistest.UniqueKey(t) + ":calls"
			record := func(keep int, ds ...time.Duration) []time.Duration {
				t.Helper()
				tr := s.Trip()
				r := tr.RecordCalls(ctx, key, ds, keep)
				tr.Send(ctx)
				got, err := r.Result()
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			if got := record(3); got != nil {
				t.Fatalf("a read of no key: %v, want none", got)
			}
			if tg.Client.Exists(ctx, key).Val() != 0 {
				t.Fatal("a read wrote the key")
			}
			record(3, time.Second, 2*time.Second)
			got := record(3, 4*time.Second, 3*time.Second)
			if exp := []time.Duration{4 * time.Second, 3 * time.Second, time.Second}; !slices.Equal(got, exp) {
				t.Fatalf("durations %v, want %v: the newest first, at most 3", got, exp)
			}
			if ttl := tg.Client.PTTL(ctx, key).Val(); ttl <= 0 || ttl > CallsTTL {
				t.Fatalf("PTTL %v, want at most %v", ttl, CallsTTL)
			}
			// More at once than are kept: the newest of them.
			got = record(2, 7*time.Second, 6*time.Second, 5*time.Second)
			if exp := []time.Duration{7 * time.Second, 6 * time.Second}; !slices.Equal(got, exp) {
				t.Fatalf("three durations kept two at a time: %v, want %v", got, exp)
			}
			// A call shorter than a millisecond is kept, as 0 ms: a call
			// the estimate counts.
			got = record(3, 400*time.Microsecond)
			if exp := []time.Duration{0, 7 * time.Second, 6 * time.Second}; !slices.Equal(got, exp) {
				t.Fatalf("after a call of 400 µs: %v, want %v", got, exp)
			}
			// A call longer than 9 digits of ms is kept as the longest.
			got = record(3, 1000*time.Hour)
			if exp := []time.Duration{999_999_999 * time.Millisecond, 0, 7 * time.Second}; !slices.Equal(got, exp) {
				t.Fatalf("after a call of 1000 h: %v, want %v", got, exp)
			}
		})
	}
}

// A calls key holding something else than durations (another writer's,
// a torn value) is never read as durations it does not hold: a value of
// another length is replaced, and in one of the same length what is not a
// duration is skipped.
func TestRecordCallsReadsNoForeignValue(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s := New(tg.Client, Config{Lease: time.Minute, Timeout: time.Second})
			for _, tc := range []struct {
				foreign string
				want    []time.Duration
			}{
				{"not durations", []time.Duration{time.Second}},
				{"1", []time.Duration{time.Second}},
				{"000000100,000000x00", []time.Duration{time.Second, 100 * time.Millisecond}},
				{",00000100", []time.Duration{time.Second, 100 * time.Millisecond}},
				{"-00000100", []time.Duration{time.Second}},
				{"dura,tion", []time.Duration{time.Second}},
			} {
				key := redistest.UniqueKey(t) + ":calls"
				if err := tg.Client.Set(ctx, key, tc.foreign, time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
				tr := s.Trip()
				r := tr.RecordCalls(ctx, key, []time.Duration{time.Second}, 64)
				tr.Send(ctx)
				if got, err := r.Result(); err != nil || !slices.Equal(got, tc.want) {
					t.Fatalf("after %q: %v, %v; want %v", tc.foreign, got, err, tc.want)
				}
			}
		})
	}
}

// A renewal with no estimate records none: an acquire refused by the
// value reads no estimate, not a 1 ms one.
func TestRenewWithoutEstimateRecordsNone(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	a, r := acquire(t, s, "k")
	tr := s.Trip()
	renew := tr.Renew(ctx, "k", a.Token, r.Fence, 0, 0)
	tr.Send(ctx)
	if ok, err := renew.Result(); err != nil || !ok {
		t.Fatalf("renew: %v %v", ok, err)
	}
	_, r2 := acquire(t, s, "k")
	if r2.Taken || r2.Job.Estimate != 0 || r2.Job.Fence != r.Fence {
		t.Fatalf("refused acquire: %+v, want no estimate and the runner's fence", r2.Job)
	}
}

// When Redis refuses writes (OOM) an acquire of a running job is still
// answered, refused by the running value, without an error: that refusal
// needs no write. An acquire of a free job gets the refusal.
func TestAcquireOnAFullServer(t *testing.T) {
	srv := redistest.FullServer(t)
	rdb := srv.Client(t)
	s := New(rdb, Config{Lease: time.Minute, WaitTimeout: 100 * time.Millisecond, Timeout: time.Second})
	ctx := context.Background()
	key := redistest.UniqueKey(t)
	_, r := acquire(t, s, key+":running")
	if !r.Taken {
		t.Fatal("not taken before the server was full")
	}
	srv.Fill(t)
	var r2 Acquired
	err := s.Acquire(ctx, &Acquire{Key: key + ":running", Token: NewToken()}, &r2)
	r2.Close()
	if err != nil || r2.Taken || r2.Job.Kind != Running {
		t.Fatalf("acquire of a running job on a full server: %+v, %v; want refused by the running value, no error", r2, err)
	}
	var r3 Acquired
	err = s.Acquire(ctx, &Acquire{Key: key + ":free", Token: NewToken()}, &r3)
	r3.Close()
	if !redistest.IsOOM(err) {
		t.Fatalf("acquire of a free job on a full server: %v, want the OOM refusal", err)
	}
}

// A failure whose key is gone is not written by its settle: it goes on
// to SettleGone, which writes it unless the key holds a value again, the
// done key holds a newer run's success (MarkDone: "<token>:<fence>") or
// a reset since (ForgetDone), or it comes after its stale instant, past
// which the done key no longer remembers. An older success there does
// not stop it.
func TestSettleGone(t *testing.T) {
	s, m, rdb := newStore(t)
	ctx := context.Background()
	cooling := Settlement{Kind: Cooling, TTL: time.Hour, Attempts: 1}
	send := func(f func(tr *Trip) Reply[Settled]) Settled { t.Helper(); return sendSettle(t, s, f) }
	markDone := func(done string, fence int64) {
		t.Helper()
		tr := s.Trip()
		tr.MarkDone(ctx, done, NewToken(), fence)
		tr.Send(ctx)
	}
	for _, tc := range []struct {
		name    string
		done    int64 // a success's fence in the done key, relative to the run's; 0: none
		taken   bool  // another run took the job since
		reset   bool  // an operator reset the job since
		stale   time.Duration
		written bool
	}{
		{"nothing since", 0, false, false, time.Hour, true},
		{"an older success", -1, false, false, time.Hour, true},
		{"a newer success", +1, false, false, time.Hour, false},
		{"taken again", 0, true, false, time.Hour, false},
		{"a reset since", 0, false, true, time.Hour, false},
		{"an older success, and stale", -1, false, false, -time.Millisecond, false},
		{"nothing since, but stale", 0, false, false, -time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, done := tc.name+":job", tc.name+":done"
			a, r := acquire(t, s, key)
			rdb.Del(ctx, key) // the lease ended
			if tc.done != 0 {
				markDone(done, r.Fence+tc.done)
			}
			if tc.taken {
				acquire(t, s, key)
			}
			if tc.reset {
				redistest.Advance(m, time.Millisecond) // the reset comes after the run's acquire
				tr := s.Trip()
				tr.ForgetDone(ctx, done)
				tr.Send(ctx)
			}
			// Relative to the run's fence, Redis's TIME at its acquire.
			stale := time.UnixMicro(r.Fence).Add(tc.stale)
			if st := send(func(tr *Trip) Reply[Settled] { return tr.Settle(ctx, key, a.Token, r.Fence, cooling) }); st.Owned || st.Gone == tc.taken {
				t.Fatalf("settle: %+v, want not written, gone %v", st, !tc.taken)
			}
			st := send(func(tr *Trip) Reply[Settled] { return tr.SettleGone(ctx, key, done, a.Token, r.Fence, stale, cooling) })
			v := rdb.Get(ctx, key).Val()
			if st.Owned != tc.written || strings.HasPrefix(v, "c:") != tc.written {
				t.Fatalf("SettleGone: %+v, key %q; want written %v", st, v, tc.written)
			}
			if tc.taken && st.Found.Kind != Running {
				t.Fatalf("SettleGone over a newer run: found %+v, want it", st.Found)
			}
		})
	}
}

// A success outdates an older run's failure (TestSettleGone's "nothing
// since"), written after the succeeding run's lease ended too: the job is
// done, not cooling from a run older than the one that did it. A newer
// run's failure stays, and so does the older failure where this run
// failed too: only a success is newer than everything older.
func TestSuccessOutdatesAnOlderRunsLateFailure(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		t.Run(tg.Name, func(t *testing.T) {
			ctx := context.Background()
			s := New(tg.Client, Config{Lease: time.Minute, Timeout: time.Second})
			p := redistest.UniqueKey(t)
			send := func(f func(tr *Trip) Reply[Settled]) Settled { t.Helper(); return sendSettle(t, s, f) }
			done := Settlement{Kind: Done, TTL: time.Hour}
			for _, tc := range []struct {
				name string
				mark Settlement // what the older run wrote
				// newer: a third run took the job after this one and wrote mark.
				newer   bool
				outcome Settlement // this run's
				written bool
			}{
				{"a success over an older cooling", Settlement{Kind: Cooling, TTL: time.Hour, Attempts: 1}, false, done, true},
				{"a success over an older failed mark", Settlement{Kind: Failed, TTL: time.Hour, Attempts: 1, Reason: "prompt_too_long"}, false, done, true},
				{"a success over a newer cooling", Settlement{Kind: Cooling, TTL: time.Hour, Attempts: 1}, true, done, false},
				{"a failure over an older cooling", Settlement{Kind: Cooling, TTL: time.Hour, Attempts: 1}, false, Settlement{Kind: Cooling, TTL: time.Hour, Attempts: 2}, false},
			} {
				t.Run(tc.name, func(t *testing.T) {
					key := p + ":" + tc.name + ":{job}"
					old, oldR := acquire(t, s, key)
					tg.Client.Del(ctx, key) // the older run's lease ended
					run, runR := acquire(t, s, key)
					tg.Client.Del(ctx, key) // this run's lease ended too
					writer, writerR := old, oldR
					if tc.newer {
						writer, writerR = acquire(t, s, key)
						if writerR.Fence <= runR.Fence {
							t.Fatalf("fences %d then %d, want rising", runR.Fence, writerR.Fence)
						}
						if st := send(func(tr *Trip) Reply[Settled] { return tr.Settle(ctx, key, writer.Token, writerR.Fence, tc.mark) }); !st.Owned {
							t.Fatalf("the newer run's failure: %+v, want written", st)
						}
					} else {
						if runR.Fence <= oldR.Fence {
							t.Fatalf("fences %d then %d, want rising", oldR.Fence, runR.Fence)
						}
						stale := time.UnixMicro(oldR.Fence).Add(time.Hour)
						if st := send(func(tr *Trip) Reply[Settled] {
							return tr.SettleGone(ctx, key, key+":done", old.Token, oldR.Fence, stale, tc.mark)
						}); !st.Owned {
							t.Fatalf("the older run's late failure: %+v, want written (nothing newer decided)", st)
						}
					}
					st := send(func(tr *Trip) Reply[Settled] { return tr.Settle(ctx, key, run.Token, runR.Fence, tc.outcome) })
					v, err := tg.Client.Get(ctx, key).Result()
					if err != nil {
						t.Fatal(err)
					}
					got := parseJob(v)
					if st.Owned != tc.written {
						t.Fatalf("settle: %+v (key %q), want written %v", st, v, tc.written)
					}
					if tc.written && (got.Kind != Done || got.Fence != runR.Fence) {
						t.Fatalf("key %q after the success, want done by fence %d", v, runR.Fence)
					}
					if !tc.written && (got.Kind == Done || got.Fence != writerR.Fence || st.Found.Fence != writerR.Fence) {
						t.Fatalf("key %q (found %+v), want the mark of fence %d kept", v, st.Found, writerR.Fence)
					}
				})
			}
		})
	}
}

// sendSettle sends the one settle f queues on a trip of its own and
// returns its reply.
func sendSettle(t *testing.T, s *Store, f func(tr *Trip) Reply[Settled]) Settled {
	t.Helper()
	tr := s.Trip()
	r := f(&tr)
	tr.Send(context.Background())
	st, err := r.Result()
	if err != nil {
		t.Fatal(err)
	}
	return st
}
