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
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// policyClient is a *redis.Client whose CONFIG GET maxmemory-policy answers
// policy (miniredis has no CONFIG), and whose CLIENT INFO reports laddr,
// the server's side of the connection, as Redis 6.2+ does. addr, when set,
// replaces the configured address (Sentinel's failover client configures
// the placeholder "FailoverClient").
type policyClient struct {
	*redis.Client
	policy map[string]string
	addr   string
	laddr  string
}

func (c *policyClient) ConfigGet(ctx context.Context, _ string) *redis.MapStringStringCmd {
	m := map[string]string{"appendonly": "yes"} // persisting: only the policy is tested here
	for k, v := range c.policy {
		m[k] = v
	}
	return redis.NewMapStringStringResult(m, nil)
}

func (c *policyClient) Options() *redis.Options {
	o := *c.Client.Options()
	if c.addr != "" {
		o.Addr = c.addr
	}
	return &o
}

func (c *policyClient) ClientInfo(ctx context.Context) *redis.ClientInfoCmd {
	cmd := redis.NewClientInfoCmd(ctx)
	cmd.SetVal(&redis.ClientInfo{LAddr: c.laddr})
	return cmd
}

// configOnly has CONFIG GET but no Options: a client Check cannot name.
type configOnly struct {
	gate.Client
	policy string
}

func (c configOnly) ConfigGet(ctx context.Context, _ string) *redis.MapStringStringCmd {
	return redis.NewMapStringStringResult(map[string]string{"maxmemory-policy": c.policy}, nil)
}

// masters runs ForEachMaster over fixed clients, as a cluster client does
// over its masters.
type masters struct {
	gate.Client
	nodes []*redis.Client
}

func (m masters) ForEachMaster(ctx context.Context, fn func(context.Context, *redis.Client) error) error {
	for _, c := range m.nodes {
		if err := fn(ctx, c); err != nil {
			return err
		}
	}
	return nil
}

// The warning names the server it concerns, in Addr and in its message:
// the configured address, or for Sentinel's failover client (whose
// configured Addr is a placeholder) the address the server reports.
func TestCheckNamesTheServer(t *testing.T) {
	_, c := redistest.Miniredis(t)
	evicting := map[string]string{"maxmemory-policy": "allkeys-lru"}
	for _, tc := range []struct {
		name   string
		client *policyClient
		exp    string
	}{
		// CLIENT INFO's laddr may differ from the configured address
		// ("localhost:6379" dials 127.0.0.1:6379): the configured one is
		// what the operator knows.
		{"configured", &policyClient{Client: c, policy: evicting, addr: "localhost:6379", laddr: "127.0.0.1:6379"}, "localhost:6379"},
		{"failover client", &policyClient{Client: c, policy: evicting, addr: "FailoverClient", laddr: "10.0.0.7:6379"}, "10.0.0.7:6379"},
		{"failover client, no laddr", &policyClient{Client: c, policy: evicting, addr: "FailoverClient"}, "FailoverClient"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, _ := checkGate(t, tc.client)
			warns, err := g.Check(context.Background())
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if len(warns) != 1 || warns[0].Reason != gate.WarnEvictionPolicy {
				t.Fatalf("exp one %s warning, got %v", gate.WarnEvictionPolicy, warns)
			}
			w := warns[0]
			if exp, got := tc.exp, w.Addr; exp != got {
				t.Errorf("Addr: exp %q, got %q", exp, got)
			}
			if exp := "allkeys-lru on " + tc.exp + ":"; !strings.Contains(w.Message, exp) {
				t.Errorf("message %q should contain %q", w.Message, exp)
			}
		})
	}
}

// Which policies evict the gate's keys (every one has a TTL), read from a
// server that answers CONFIG GET, and what a server that does not report
// the parameter gets.
func TestCheckPolicies(t *testing.T) {
	_, c := redistest.Miniredis(t)
	for _, tc := range []struct {
		policy map[string]string
		exp    string // warning reason, "" = none
	}{
		{map[string]string{"maxmemory-policy": "noeviction"}, ""},
		{map[string]string{"maxmemory-policy": "allkeys-lfu"}, gate.WarnEvictionPolicy},
		{map[string]string{"maxmemory-policy": "volatile-lru"}, gate.WarnEvictionPolicy},
		{map[string]string{"maxmemory-policy": "ALLKEYS-RANDOM"}, gate.WarnEvictionPolicy},
		{map[string]string{}, gate.WarnUnchecked},
	} {
		t.Run(tc.policy["maxmemory-policy"], func(t *testing.T) {
			g, obs := checkGate(t, &policyClient{Client: c, policy: tc.policy})
			warns, err := g.Check(context.Background())
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			var got []string
			for _, w := range warns {
				got = append(got, w.Reason)
				if !strings.Contains(w.Message, "noeviction") {
					t.Errorf("message %q should name the fix", w.Message)
				}
			}
			if exp, got := tc.exp, strings.Join(got, ","); exp != got {
				t.Fatalf("warnings: exp %q, got %q", exp, got)
			}
			if exp, got := len(warns), len(obs.kinds(gate.EventWarning)); exp != got {
				t.Errorf("warning events: exp %d, got %d", exp, got)
			}
		})
	}
}

// A client with CONFIG GET but no address is checked; its warning names
// no server.
func TestCheckClientWithoutAddress(t *testing.T) {
	_, c := redistest.Miniredis(t)
	g, _ := checkGate(t, configOnly{Client: c, policy: "volatile-ttl"})
	warns, err := g.Check(context.Background())
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if len(warns) != 1 || warns[0].Reason != gate.WarnEvictionPolicy {
		t.Fatalf("exp one %s warning, got %v", gate.WarnEvictionPolicy, warns)
	}
	if exp, got := "", warns[0].Addr; exp != got {
		t.Errorf("Addr: exp %q, got %q", exp, got)
	}
	if strings.Contains(warns[0].Message, " on ") {
		t.Errorf("message %q names a server it does not know", warns[0].Message)
	}
}

// Every master is checked, and the warnings come sorted by address.
func TestCheckEveryMasterSorted(t *testing.T) {
	m1, c1 := redistest.Miniredis(t)
	m2, c2 := redistest.Miniredis(t)
	g, _ := checkGate(t, masters{Client: c1, nodes: []*redis.Client{c1, c2}})
	warns, err := g.Check(context.Background())
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	exp := []string{m1.Addr(), m2.Addr()}
	if exp[1] < exp[0] {
		exp[0], exp[1] = exp[1], exp[0]
	}
	var got []string
	for _, w := range warns {
		if w.Reason != gate.WarnUnchecked { // miniredis has no CONFIG
			t.Errorf("Reason: exp %q, got %q", gate.WarnUnchecked, w.Reason)
		}
		got = append(got, w.Addr)
	}
	if strings.Join(exp, ",") != strings.Join(got, ",") {
		t.Fatalf("warning addresses: exp %v, got %v", exp, got)
	}
}

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
			// A save schedule, so that only the policy is warned about.
			opts := []redistest.Option{redistest.WithArgs("--save", "3600 1")}
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
				if w.Engine != "Redis" || !strings.HasPrefix(w.Version, "7.") {
					t.Errorf("Engine, Version: exp Redis 7.x, got %q %q", w.Engine, w.Version)
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
		// The test cluster persists nothing: every master says so.
		warns, unpersisted := withoutReason(warns, gate.WarnNoPersistence)
		if exp, got := 3, len(unpersisted); exp != got {
			t.Fatalf("no_persistence warnings: exp %d (one per master), got %v", exp, unpersisted)
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
		warns, _ = withoutReason(warns, gate.WarnNoPersistence)
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
	// CONFIG renamed: INFO still says the policy (noeviction here).
	t.Run("renamed", func(t *testing.T) {
		s := redistest.Server(t, redistest.WithArgs("--rename-command", "CONFIG", ""))
		g, _ := checkGate(t, s.Client(t))
		warns, err := g.Check(context.Background())
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		if len(warns) != 0 {
			t.Fatalf("exp no warning (INFO says noeviction), got %v", warns)
		}
	})
	// (redistest polls a real server's INFO as it starts: a fake refuses it.)
	t.Run("refused, INFO too", func(t *testing.T) {
		s := redistest.FakeServer(t, func(cmd []string) any {
			if cmd[0] == "CONFIG" || cmd[0] == "INFO" {
				return redistest.UnknownCommand(cmd)
			}
			return redistest.FakeValkey8.Answer(cmd)
		})
		g, _ := checkGate(t, s.Client(t))
		warns, err := g.Check(context.Background())
		if err != nil {
			t.Fatalf("Check: %v", err)
		}
		var msgs []string
		for _, w := range warns {
			if w.Reason != gate.WarnUnchecked {
				t.Errorf("exp only %s warnings, got %v", gate.WarnUnchecked, w)
			}
			msgs = append(msgs, w.Message)
		}
		if all := strings.Join(msgs, "\n"); len(warns) != 2 || !strings.Contains(all, "maxmemory-policy") || !strings.Contains(all, "cannot read INFO") {
			t.Fatalf("exp a policy and an INFO %s warning, got %v", gate.WarnUnchecked, warns)
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

// withoutReason splits warns into those of another reason and those of
// reason.
func withoutReason(warns []gate.Warning, reason string) (others, of []gate.Warning) {
	for _, w := range warns {
		if w.Reason == reason {
			of = append(of, w)
		} else {
			others = append(others, w)
		}
	}
	return others, of
}
