package redistest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func replyCode(err error) string {
	var re redis.Error
	if !errors.As(err, &re) {
		return ""
	}
	code, _, _ := strings.Cut(re.Error(), " ")
	return code
}

// TestMigration moves a slot step by step and checks what clients see at
// each step: ASK for a key already moved, TRYAGAIN for a two-key script
// whose keys are split, MOVED once the slot is handed over.
func TestMigration(t *testing.T) {
	c := Cluster(t, 3, 0)
	ctx := context.Background()
	cc := c.Client(t)
	p := Prefix(t)
	a, b := p+"a", p+"b" // one slot
	for _, k := range []string{a, b} {
		if err := cc.Set(ctx, k, k, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	owner := c.SlotOwner(t, a)

	m := c.StartMigration(t, a)
	if m.From.Addr != owner || m.To.Addr == owner || m.To.Role != "master" {
		t.Fatalf("migration %s -> %s, exp from %s to another master", m.From.Addr, m.To.Addr, owner)
	}
	src := redis.NewClient(&redis.Options{Addr: m.From.Addr, MaxRetries: -1})
	defer src.Close()
	script := "return {redis.call('GET', KEYS[1]), redis.call('GET', KEYS[2])}"

	// Nothing moved yet: the source serves both keys.
	if err := src.Eval(ctx, script, []string{a, b}).Err(); err != nil {
		t.Fatalf("two-key script before any key moved: %v", err)
	}
	if exp, got := 1, m.MoveKeys(t, 1); exp != got {
		t.Fatalf("MoveKeys(1): exp %d, got %d", exp, got)
	}
	if err := src.Eval(ctx, script, []string{a, b}).Err(); replyCode(err) != "TRYAGAIN" {
		t.Fatalf("two-key script with its keys split: exp TRYAGAIN, got %v", err)
	}
	moved, kept := a, b
	if n, _ := src.Exists(ctx, a).Result(); n == 1 {
		moved, kept = b, a
	}
	if err := src.Get(ctx, moved).Err(); replyCode(err) != "ASK" {
		t.Fatalf("GET of the moved key on the source: exp ASK, got %v", err)
	}
	// The cluster client follows ASK and still reads both.
	for _, k := range []string{moved, kept} {
		if got, err := cc.Get(ctx, k).Result(); err != nil || got != k {
			t.Fatalf("GET %s mid-migration through the cluster client: %q, %v", k, got, err)
		}
	}

	m.Finish(t)
	if got := c.SlotOwner(t, a); got != m.To.Addr {
		t.Fatalf("owner after Finish: exp %s, got %s", m.To.Addr, got)
	}
	for _, n := range c.Nodes(t) {
		if got, err := c.slotOwner(n.Addr, m.Slot); err != nil || got != m.To.ID {
			t.Fatalf("node %s sees slot %d on %s (%v), exp %s", n.Addr, m.Slot, got, err, m.To.ID)
		}
	}
	if err := src.Get(ctx, kept).Err(); replyCode(err) != "MOVED" {
		t.Fatalf("GET on the old owner after Finish: exp MOVED, got %v", err)
	}
	for _, k := range []string{a, b} {
		if got, err := cc.Get(ctx, k).Result(); err != nil || got != k {
			t.Fatalf("GET %s after the migration: %q, %v", k, got, err)
		}
	}

	// MigrateSlot moves it back in one call, pausing between steps.
	from, to := c.MigrateSlot(t, a, 10*time.Millisecond)
	if from != m.To.Addr || c.SlotOwner(t, a) != to || to == from {
		t.Fatalf("MigrateSlot: %s -> %s, owner now %s", from, to, c.SlotOwner(t, a))
	}
	if got, err := cc.Get(ctx, b).Result(); err != nil || got != b {
		t.Fatalf("GET %s after MigrateSlot: %q, %v", b, got, err)
	}

	// A migration a test leaves unfinished is finished in its cleanup.
	var left *Migration
	t.Run("unfinished", func(t *testing.T) { left = c.StartMigration(t, a) })
	if left == nil {
		t.Fatal("unfinished: no migration started")
	}
	c.WaitOK(t)
	if got := c.SlotOwner(t, a); got != left.To.Addr {
		t.Fatalf("owner after the cleanup: exp %s, got %s", left.To.Addr, got)
	}
	txt, err := command(left.From.Addr, adminTimeout, "CLUSTER", "NODES")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(txt, "[") {
		t.Fatalf("a migration is still pending after the cleanup:\n%s", txt)
	}
}
