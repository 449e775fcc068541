package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Migration is one hash slot moving from one master of a ClusterSrv to
// another the way redis-cli --cluster reshard moves it, one step at a
// time, so a test can act between the steps:
//
//  1. StartMigration: CLUSTER SETSLOT <slot> IMPORTING on the target, then
//     MIGRATING on the source. The source still serves the keys it holds;
//     a command for a key it no longer holds gets -ASK (to the target); a
//     multi-key command or script whose keys are split gets -TRYAGAIN.
//  2. MoveKeys: MIGRATE some of the slot's keys to the target.
//  3. Finish: MIGRATE the rest, CLUSTER SETSLOT <slot> NODE <target> on
//     the target, the source and every other master, and wait until every
//     node agrees and the cluster is healthy. Clients then get -MOVED.
//
// A migration left unfinished is finished in t.Cleanup, so the cluster is
// consistent again. Run migrations on a cluster of the test's own
// (Cluster), not the one Targets shares between tests.
type Migration struct {
	c        *ClusterSrv
	Slot     int
	From, To Node // the source and target masters
	from, to *redis.Client
	done     bool
}

// StartMigration begins moving the slot of key from the master that owns
// it to another master, and returns before any key moves.
func (c *ClusterSrv) StartMigration(t testing.TB, key string) *Migration {
	t.Helper()
	var any string
	for _, s := range c.nodes {
		if s.Pid() != 0 {
			any = s.Addr()
			break
		}
	}
	slotTxt, err := command(any, adminTimeout, "CLUSTER", "KEYSLOT", key)
	if err != nil {
		t.Fatalf("redistest: CLUSTER KEYSLOT: %v", err)
	}
	slot, err := strconv.Atoi(slotTxt)
	if err != nil {
		t.Fatalf("redistest: CLUSTER KEYSLOT: %q", slotTxt)
	}
	owner, err := c.slotOwner(any, slot)
	if err != nil {
		t.Fatal(err)
	}
	m := &Migration{c: c, Slot: slot}
	for _, n := range c.Nodes(t) {
		switch {
		case n.ID == owner:
			m.From = n
		case n.Role == "master" && m.To.ID == "" && !n.Failed:
			m.To = n
		}
	}
	if m.From.ID == "" || m.To.ID == "" {
		t.Fatalf("redistest: StartMigration: slot %d: no source (owner %s) or no other master", slot, owner)
	}
	m.from = redis.NewClient(&redis.Options{Addr: m.From.Addr, MaxRetries: -1})
	m.to = redis.NewClient(&redis.Options{Addr: m.To.Addr, MaxRetries: -1})
	t.Cleanup(func() {
		if !m.done {
			m.Finish(t)
		}
		_ = m.from.Close()
		_ = m.to.Close()
	})
	ctx := context.Background()
	if err := m.to.Do(ctx, "CLUSTER", "SETSLOT", slot, "IMPORTING", m.From.ID).Err(); err != nil {
		t.Fatalf("redistest: SETSLOT %d IMPORTING on %s: %v", slot, m.To.Addr, err)
	}
	if err := m.from.Do(ctx, "CLUSTER", "SETSLOT", slot, "MIGRATING", m.To.ID).Err(); err != nil {
		t.Fatalf("redistest: SETSLOT %d MIGRATING on %s: %v", slot, m.From.Addr, err)
	}
	return m
}

// MoveKeys migrates up to n of the slot's keys still on the source to the
// target and returns how many it moved.
func (m *Migration) MoveKeys(t testing.TB, n int) int {
	t.Helper()
	ctx := context.Background()
	keys, err := m.from.ClusterGetKeysInSlot(ctx, m.Slot, n).Result()
	if err != nil {
		t.Fatalf("redistest: CLUSTER GETKEYSINSLOT %d on %s: %v", m.Slot, m.From.Addr, err)
	}
	if len(keys) == 0 {
		return 0
	}
	args := []any{"MIGRATE", "127.0.0.1", m.To.Port, "", 0, 5000, "KEYS"}
	for _, k := range keys {
		args = append(args, k)
	}
	if err := m.from.Do(ctx, args...).Err(); err != nil {
		t.Fatalf("redistest: MIGRATE %d keys of slot %d to %s: %v", len(keys), m.Slot, m.To.Addr, err)
	}
	return len(keys)
}

// Finish moves the remaining keys, hands the slot to the target on every
// master, and waits until every running node sees the target as its owner
// and the cluster is healthy (see WaitOK).
func (m *Migration) Finish(t testing.TB) {
	t.Helper()
	for m.MoveKeys(t, 100) > 0 {
	}
	ctx := context.Background()
	// The target first: it then owns the slot whatever happens next.
	order := []string{m.To.Addr, m.From.Addr}
	for _, n := range m.c.Nodes(t) {
		if n.Role == "master" && n.Addr != m.To.Addr && n.Addr != m.From.Addr && m.c.Server(n.Addr).Pid() != 0 {
			order = append(order, n.Addr)
		}
	}
	for _, addr := range order {
		c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		err := c.Do(ctx, "CLUSTER", "SETSLOT", m.Slot, "NODE", m.To.ID).Err()
		_ = c.Close()
		if err != nil {
			t.Fatalf("redistest: SETSLOT %d NODE %s on %s: %v", m.Slot, m.To.ID, addr, err)
		}
	}
	m.done = true
	deadline := time.Now().Add(clusterTimeout)
	for {
		err := m.agreed()
		if err == nil {
			err = m.c.waitOK(time.Until(deadline))
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: slot %d not settled on %s within %v: %v", m.Slot, m.To.Addr, clusterTimeout, err)
		}
		time.Sleep(clusterPollInterval)
	}
}

// agreed returns nil once every running node names the target as the
// slot's owner, with no migration pending.
func (m *Migration) agreed() error {
	for _, s := range m.c.nodes {
		if s.Pid() == 0 {
			continue
		}
		owner, err := m.c.slotOwner(s.Addr(), m.Slot)
		if err != nil {
			return err
		}
		if owner != m.To.ID {
			return fmt.Errorf("node %s sees slot %d on %s, not %s", s.Addr(), m.Slot, owner, m.To.ID)
		}
	}
	return nil
}

// MigrateSlot moves the slot of key to another master one key at a time,
// sleeping pause between steps so work running meanwhile meets the slot
// mid-migration, and returns the source and target addresses.
func (c *ClusterSrv) MigrateSlot(t testing.TB, key string, pause time.Duration) (from, to string) {
	t.Helper()
	m := c.StartMigration(t, key)
	time.Sleep(pause)
	for m.MoveKeys(t, 1) > 0 {
		time.Sleep(pause)
	}
	m.Finish(t)
	return m.From.Addr, m.To.Addr
}

// SlotOwner returns the address of the master that serves key's slot, as
// the first running node sees it.
func (c *ClusterSrv) SlotOwner(t testing.TB, key string) string {
	t.Helper()
	for _, s := range c.nodes {
		if s.Pid() == 0 {
			continue
		}
		slotTxt, err := command(s.Addr(), adminTimeout, "CLUSTER", "KEYSLOT", key)
		if err != nil {
			t.Fatal(err)
		}
		slot, _ := strconv.Atoi(slotTxt)
		id, err := c.slotOwner(s.Addr(), slot)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range c.Nodes(t) {
			if n.ID == id {
				return n.Addr
			}
		}
		t.Fatalf("redistest: slot %d owned by unknown node %s", slot, id)
	}
	t.Fatal("redistest: no cluster node is running")
	return ""
}

// slotOwner asks the node at addr which node ID serves slot; pending
// migrations ([slot->-id], [slot-<-id]) do not count.
func (c *ClusterSrv) slotOwner(addr string, slot int) (string, error) {
	txt, err := command(addr, adminTimeout, "CLUSTER", "NODES")
	if err != nil {
		return "", fmt.Errorf("redistest: CLUSTER NODES on %s: %w", addr, err)
	}
	for _, line := range strings.Split(strings.TrimSpace(txt), "\n") {
		f := strings.Fields(line)
		if len(f) < 9 {
			continue
		}
		for _, r := range f[8:] {
			if strings.HasPrefix(r, "[") {
				continue
			}
			lo, hi, isRange := strings.Cut(r, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.Atoi(lo)
			b, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && a <= slot && slot <= b {
				return f[0], nil
			}
		}
	}
	return "", fmt.Errorf("redistest: node %s: no owner for slot %d", addr, slot)
}
