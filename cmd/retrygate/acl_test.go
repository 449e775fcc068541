package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/classify"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

var err5xx = errors.New("upstream answered 502")

func aclPrefix(t *testing.T) string {
	return "acl" + strings.NewReplacer(":", "-", "/", "-").Replace(redistest.UniqueKey(t))
}

// TestACLMinimalRules runs a gate and the CLI as a Redis user with exactly
// the rules docs/operating.md documents (redistest.GateACL), plus each
// feature's extra rules, and checks each extra is needed.
func TestACLMinimalRules(t *testing.T) {
	ctx := context.Background()
	// redisErr keeps the first Redis error a gate reported: an upstream's
	// write refused by an ACL leaves the job's own write in place and
	// says so in an event.
	var (
		mu       sync.Mutex
		redisErr error
	)
	observe := observerFunc(func(e gate.Event) {
		mu.Lock()
		defer mu.Unlock()
		if e.Kind == gate.EventRedisError && redisErr == nil {
			redisErr = e.Err
		}
	})
	opts := func(prefix string, upstream bool) gate.Options {
		o := gate.Options{Prefix: prefix, Cooldown: time.Hour, Observer: observe, Classify: func(err error) classify.Verdict {
			if errors.Is(err, err5xx) {
				return classify.Verdict{Class: classify.ClassTransient, Reason: classify.ReasonUpstream5xx}
			}
			return testClassify(err)
		},
			Backoff: gate.Backoff{Jitter: -1}}
		o.UpstreamPolicy.Off = !upstream // the minimal rules: no upstream
		if upstream {
			o.Upstream = "openai:prod"
			o.UpstreamPolicy = gate.UpstreamPolicy{Cooldown: time.Hour, PauseTTL: time.Hour}
		}
		return o
	}
	// cycle runs every gate operation the rules must allow, on jobs of
	// its own.
	n := 0
	cycle := func(t *testing.T, g *gate.Gate) (err error) {
		t.Helper()
		mu.Lock()
		redisErr = nil
		mu.Unlock()
		defer func() {
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				err = redisErr
			}
		}()
		n++
		job := func(name string) string { return fmt.Sprintf("%s-%d", name, n) }
		if err := g.Do(ctx, job("ok"), func(context.Context, *gate.Lease) error { return nil }); err != nil {
			return err
		}
		var ce *gate.CallError
		for _, fail := range []error{errTimeout, errInvalid, err5xx} {
			err := g.Do(ctx, job(fail.Error()), func(context.Context, *gate.Lease) error { return fail })
			if !errors.As(err, &ce) {
				return err
			}
			if ce.SettleErr != nil {
				return ce.SettleErr
			}
		}
		if err := g.Do(ctx, job(errTimeout.Error()), func(context.Context, *gate.Lease) error { return nil }); !errors.Is(err, gate.ErrCoolingDown) {
			return err
		}
		l, err := g.Acquire(ctx, job("released"))
		if err != nil {
			return err
		}
		if err := l.Release(ctx); err != nil {
			return err
		}
		if _, err := g.Status(ctx, job(errTimeout.Error())); err != nil {
			return err
		}
		return g.Reset(ctx, job(errTimeout.Error()))
	}

	t.Run("gate and CLI", func(t *testing.T) {
		prefix := aclPrefix(t)
		s := redistest.ACLServer(t, prefix, slices.Concat(redistest.ACLList, redistest.ACLCheck), redistest.WithArgs("--appendonly", "yes"))
		g, err := gate.New(s.Client(t), opts(prefix, false))
		if err != nil {
			t.Fatal(err)
		}
		if err := cycle(t, g); err != nil {
			t.Fatalf("gate as the minimal ACL user: %v", err)
		}
		url := "redis://" + s.User + ":" + s.Password + "@" + s.Addr()
		coolJob(t, g, "doc-1")
		for _, args := range [][]string{{"status", "doc-1"}, {"list"}, {"check"}, {"reset", "doc-1"}} {
			r := runCLI(t, nil, append([]string{"--redis", url, "--prefix", prefix}, args...)...)
			mustOK(t, r)
		}
	})
	t.Run("without the extras", func(t *testing.T) {
		prefix := aclPrefix(t)
		s := redistest.ACLServer(t, prefix, nil)
		url := "redis://" + s.User + ":" + s.Password + "@" + s.Addr()
		r := runCLI(t, nil, "--redis", url, "--prefix", prefix, "list")
		if r.code != exitRuntime || !strings.Contains(r.stderr, "NOPERM") || !strings.Contains(r.stderr, "ACL users") {
			t.Fatalf("list without +scan: exp exit 1 with NOPERM and a hint, got %d %q", r.code, r.stderr)
		}
		// status's searches for similar jobs and for upstreams need SCAN too,
		// but are advice: status works without it, and says what it could
		// not find out instead of "the next call runs".
		r = runCLI(t, nil, "--redis", url, "--prefix", prefix, "status", "never-seen")
		mustOK(t, r)
		if !strings.Contains(r.stdout, "whether an upstream refuses it is unknown") || !strings.Contains(r.stdout, "NOPERM") ||
			strings.Contains(r.stdout, "next call runs") || strings.Contains(r.stdout, "no key under prefix") {
			t.Errorf("status without +scan:\n%s", r.stdout)
		}
		// check without +config|get cannot read the policy: it says so.
		r = runCLI(t, nil, "--redis", url, "--prefix", prefix, "check")
		if r.code != exitNotMet || !strings.Contains(r.stdout, gate.WarnUnchecked) {
			t.Fatalf("check without +config|get: exp exit 3 and %s, got %d %q %q", gate.WarnUnchecked, r.code, r.stdout, r.stderr)
		}
		// Nor can it read the persistence settings (nor INFO): a note, not
		// a warning it cannot back.
		if !strings.Contains(r.stdout, "note: cannot read the persistence settings") || strings.Contains(r.stdout, "no_persistence") {
			t.Fatalf("check without +config|get or +info: exp a note on persistence, got %q", r.stdout)
		}
		// With +info, INFO persistence tells whether the AOF is on.
		s = redistest.ACLServer(t, prefix, []string{"+info"})
		url = "redis://" + s.User + ":" + s.Password + "@" + s.Addr()
		r = runCLI(t, nil, "--redis", url, "--prefix", prefix, "check")
		if !strings.Contains(r.stdout, "note: cannot read the RDB save schedule") || !strings.Contains(r.stdout, "the AOF is off") {
			t.Fatalf("check with +info only, AOF off: exp a note, got %q", r.stdout)
		}
		s = redistest.ACLServer(t, prefix, []string{"+info"}, redistest.WithArgs("--appendonly", "yes"))
		url = "redis://" + s.User + ":" + s.Password + "@" + s.Addr()
		r = runCLI(t, nil, "--redis", url, "--prefix", prefix, "check")
		if strings.Contains(r.stdout, "note:") || strings.Contains(r.stdout, "no_persistence") {
			t.Fatalf("check with +info only, AOF on: exp no persistence note, got %q", r.stdout)
		}
	})
	t.Run("upstream", func(t *testing.T) {
		prefix := aclPrefix(t)
		bare := redistest.ACLServer(t, prefix, nil)
		g, err := gate.New(bare.Client(t), opts(prefix, true))
		if err != nil {
			t.Fatal(err)
		}
		// Inside a script a missing permission is not NOPERM but an ERR
		// reply; the gate still tells it from an outage. The job's own
		// write stands; the upstream's 5xx count is refused, in an event.
		if err := cycle(t, g); !errors.Is(err, gate.ErrRedisRefused) || !strings.Contains(err.Error(), "can't run this command") {
			t.Fatalf("a upstreamd gate without ACLUpstream: exp ErrRedisRefused (the script can't run ZADD), got %v", err)
		}
		s := redistest.ACLServer(t, prefix, redistest.ACLUpstream)
		g, err = gate.New(s.Client(t), opts(prefix, true))
		if err != nil {
			t.Fatal(err)
		}
		if err := cycle(t, g); err != nil {
			t.Fatalf("a upstreamd gate with ACLUpstream: %v", err)
		}
		_ = g.Do(ctx, "quota", func(context.Context, *gate.Lease) error { return errQuota })
		url := "redis://" + s.User + ":" + s.Password + "@" + s.Addr()
		r := runCLI(t, nil, "--redis", url, "--prefix", prefix, "--upstream", "openai:prod", "upstream", "reset")
		mustOK(t, r)
		// Its line needs +zrange: without it status shows the rest and
		// says what to add.
		r = runCLI(t, nil, "--redis", url, "--prefix", prefix, "--upstream", "openai:prod", "upstream", "status")
		mustOK(t, r)
		// (The rows' names are padded to the longest: the budget's
		// "learned rate" where the provider sends no rate-limit headers.)
		if !regexp.MustCompile(`(?m)^line +not readable as this user: add \+zrange`).MatchString(r.stdout) {
			t.Errorf("upstream status without +zrange: %q", r.stdout)
		}
		s = redistest.ACLServer(t, prefix, slices.Concat(redistest.ACLUpstream, redistest.ACLLineStatus))
		url = "redis://" + s.User + ":" + s.Password + "@" + s.Addr()
		r = runCLI(t, nil, "--redis", url, "--prefix", prefix, "--upstream", "openai:prod", "upstream", "status")
		mustOK(t, r)
		if !regexp.MustCompile(`(?m)^line +nobody waits`).MatchString(r.stdout) {
			t.Errorf("upstream status with +zrange: %q", r.stdout)
		}
	})
	t.Run("eval after a restart", func(t *testing.T) {
		prefix := aclPrefix(t)
		// +eval taken back: the user may only run scripts already cached.
		s := redistest.ACLServer(t, prefix, []string{"-eval"})
		g, err := gate.New(s.Client(t), opts(prefix, false))
		if err != nil {
			t.Fatal(err)
		}
		if err := cycle(t, g); !errors.Is(err, gate.ErrRedisRefused) || !strings.Contains(err.Error(), "NOPERM") {
			t.Fatalf("without +eval and an empty script cache: exp ErrRedisRefused (NOPERM), got %v", err)
		}
		// An admin's gate loads the scripts; now EVALSHA is enough.
		admin, err := gate.New(s.AdminClient(t), opts(prefix, false))
		if err != nil {
			t.Fatal(err)
		}
		if err := cycle(t, admin); err != nil {
			t.Fatal(err)
		}
		if err := cycle(t, g); err != nil {
			t.Fatalf("without +eval, scripts cached: %v", err)
		}
		// A restart empties the cache: NOPERM again until something EVALs.
		s.Restart(t)
		if err := waitPing(s.AdminClient(t)); err != nil {
			t.Fatal(err)
		}
		if err := cycle(t, g); !errors.Is(err, gate.ErrRedisRefused) || !strings.Contains(err.Error(), "NOPERM") {
			t.Fatalf("without +eval after a restart: exp ErrRedisRefused (NOPERM), got %v", err)
		}
	})
}

func waitPing(c *redis.Client) error {
	deadline := time.Now().Add(30 * time.Second) // polled: a loaded machine only makes it later
	for {
		err := c.Ping(context.Background()).Err()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// observerFunc adapts a function to gate.Observer.
type observerFunc func(gate.Event)

func (f observerFunc) Observe(_ context.Context, e gate.Event) { f(e) }
