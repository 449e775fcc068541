package gate_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/redistest"
)

// eventLog records the events a gate emits.
type eventLog struct {
	mu     sync.Mutex
	events []gate.Event
}

func (l *eventLog) Observe(_ context.Context, e gate.Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) kinds(k gate.EventKind) []gate.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []gate.Event
	for _, e := range l.events {
		if e.Kind == k {
			out = append(out, e)
		}
	}
	return out
}

func checkGate(t *testing.T, rdb gate.Client) (*gate.Gate, *eventLog) {
	t.Helper()
	obs := &eventLog{}
	g, err := gate.New(rdb, gate.Options{Prefix: redistest.UniqueKey(t), Observer: obs})
	if err != nil {
		t.Fatalf("gate.New: %v", err)
	}
	return g, obs
}

func TestCheckEvictionPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy string
		exp    []string // warning reasons
	}{
		{"", nil}, // the server's default: noeviction
		{"noeviction", nil},
		{"allkeys-lru", []string{gate.WarnEvictionPolicy}},
		{"volatile-ttl", []string{gate.WarnEvictionPolicy}},
	} {
		name := tc.policy
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			var opts []redistest.Option
			if tc.policy != "" {
				opts = append(opts, redistest.WithArgs("--maxmemory-policy", tc.policy))
			}
			s := redistest.Server(t, opts...)
			g, obs := checkGate(t, s.Client(t))
			warns, err := g.Check(context.Background())
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			var got []string
			for _, w := range warns {
				got = append(got, w.Reason)
				if exp, got := tc.policy, w.Policy; exp != got {
					t.Errorf("Policy: exp %q, got %q", exp, got)
				}
				if exp, got := s.Addr(), w.Addr; exp != got {
					t.Errorf("Addr: exp %q, got %q", exp, got)
				}
				if !strings.Contains(w.Message, tc.policy) || !strings.Contains(w.Message, "noeviction") {
					t.Errorf("message %q should name the policy and the fix", w.Message)
				}
			}
			if exp := strings.Join(tc.exp, ","); exp != strings.Join(got, ",") {
				t.Fatalf("warnings: exp %q, got %q", exp, got)
			}
			evs := obs.kinds(gate.EventWarning)
			if exp, got := len(tc.exp), len(evs); exp != got {
				t.Fatalf("config_warning events: exp %d, got %d", exp, got)
			}
			for _, e := range evs {
				if exp, got := gate.WarnEvictionPolicy, e.Reason; exp != got {
					t.Errorf("event Reason: exp %q, got %q", exp, got)
				}
				if e.Err == nil {
					t.Error("event Err should carry the message")
				}
			}
		})
	}
}

func TestCheckClusterChecksEveryMaster(t *testing.T) {
	for _, tg := range redistest.Targets(t) {
		if !tg.IsCluster {
			continue
		}
		cc := tg.Client.(*redis.ClusterClient)
		ctx := context.Background()
		g, _ := checkGate(t, cc)
		warns, err := g.Check(ctx)
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		if len(warns) != 0 {
			t.Fatalf("noeviction cluster: exp no warnings, got %v", warns)
		}

		// One master that evicts is enough to warn, and the warning names it.
		var once sync.Once
		var evicting string
		if err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			once.Do(func() { evicting = c.Options().Addr })
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		target := redis.NewClient(&redis.Options{Addr: evicting})
		t.Cleanup(func() { _ = target.Close() })
		if err := target.ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = target.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err() })

		warns, err = g.Check(ctx)
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		if exp, got := 1, len(warns); exp != got {
			t.Fatalf("warnings: exp %d, got %d: %v", exp, got, warns)
		}
		if exp, got := evicting, warns[0].Addr; exp != got {
			t.Errorf("Addr: exp %q, got %q", exp, got)
		}
		if exp, got := "volatile-lru", warns[0].Policy; exp != got {
			t.Errorf("Policy: exp %q, got %q", exp, got)
		}
	}
}

// Managed Redis often disables or renames CONFIG; miniredis lacks it too.
// That must be a warning, never a start-up failure.
func TestCheckToleratesConfigDisabled(t *testing.T) {
	t.Run("miniredis", func(t *testing.T) {
		_, c := redistest.Miniredis(t)
		g, obs := checkGate(t, c)
		warns, err := g.Check(context.Background())
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		if len(warns) != 1 || warns[0].Reason != gate.WarnUnchecked {
			t.Fatalf("exp one %s warning, got %v", gate.WarnUnchecked, warns)
		}
		if exp, got := 1, len(obs.kinds(gate.EventWarning)); exp != got {
			t.Fatalf("config_warning events: exp %d, got %d", exp, got)
		}
	})
	t.Run("renamed", func(t *testing.T) {
		s := redistest.Server(t, redistest.WithArgs("--rename-command", "CONFIG", ""))
		g, _ := checkGate(t, s.Client(t))
		warns, err := g.Check(context.Background())
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		if len(warns) != 1 || warns[0].Reason != gate.WarnUnchecked {
			t.Fatalf("exp one %s warning, got %v", gate.WarnUnchecked, warns)
		}
	})
}

func TestCheckUnreachable(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = c.Close() })
	g, _ := checkGate(t, c)
	_, err := g.Check(context.Background())
	if !errors.Is(err, gate.ErrUnavailable) {
		t.Fatalf("exp ErrUnavailable, got %v", err)
	}
}

// A Scripter Check cannot inspect is reported, not guessed.
func TestCheckUnknownClient(t *testing.T) {
	_, c := redistest.Miniredis(t)
	g, _ := checkGate(t, scripterOnly{c})
	warns, err := g.Check(context.Background())
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if len(warns) != 1 || warns[0].Reason != gate.WarnUnchecked {
		t.Fatalf("exp one %s warning, got %v", gate.WarnUnchecked, warns)
	}
}

type scripterOnly struct{ gate.Client }
