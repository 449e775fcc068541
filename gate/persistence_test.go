package gate_test

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// Check warns about a server that persists nothing (a restart would
// forget every mark), naming it and the fix, and not about one with an
// AOF or a save schedule.
func TestCheckPersistence(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		warn bool
	}{
		{"nothing", nil, true},
		{"aof", []string{"--appendonly", "yes"}, false},
		{"rdb", []string{"--save", "3600 1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Server(t, redistest.WithArgs(tc.args...))
			g, obs := checkGate(t, s.Client(t))
			warns, err := g.Check(context.Background())
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			_, got := withoutReason(warns, gate.WarnNoPersistence)
			if !tc.warn {
				if len(got) != 0 {
					t.Fatalf("exp no %s warning, got %v", gate.WarnNoPersistence, got)
				}
				return
			}
			if len(got) != 1 || got[0].Addr != s.Addr() || !strings.Contains(got[0].Message, "appendonly yes") {
				t.Fatalf("exp one %s warning naming %s and the fix, got %v", gate.WarnNoPersistence, s.Addr(), got)
			}
			var evs int
			for _, e := range obs.kinds(gate.EventWarning) {
				if e.Reason == gate.WarnNoPersistence {
					evs++
				}
			}
			if evs != 1 {
				t.Fatalf("%s events: exp 1, got %d", gate.WarnNoPersistence, evs)
			}
		})
	}
}

// Where CONFIG is refused (an ACL without it), Check reads INFO
// persistence; where both are refused it cannot tell, and warns about
// nothing (a WarnUnchecked already says the configuration could not be
// read) rather than failing.
func TestCheckPersistenceRefused(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules []string
	}{
		{"config refused", []string{"-config", "+info"}},
		{"config and info refused", []string{"-config", "-info"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := redistest.Server(t)
			ctx := context.Background()
			rules := append([]string{"ACL", "SETUSER", "gate", "on", ">pw", "~*", "+@all"}, tc.rules...)
			args := make([]any, len(rules))
			for i, r := range rules {
				args[i] = r
			}
			if err := s.Client(t).Do(ctx, args...).Err(); err != nil {
				t.Fatal(err)
			}
			user := redis.NewClient(&redis.Options{Addr: s.Addr(), Username: "gate", Password: "pw", MaxRetries: -1})
			t.Cleanup(func() { _ = user.Close() })
			g, _ := checkGate(t, user)
			warns, err := g.Check(ctx)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if _, got := withoutReason(warns, gate.WarnNoPersistence); len(got) != 0 {
				t.Fatalf("exp no %s warning from a server that cannot be read, got %v", gate.WarnNoPersistence, got)
			}
		})
	}
}
