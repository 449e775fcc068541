package redistest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestClusterServesAllMasters(t *testing.T) {
	start := time.Now()
	c := Cluster(t, 3, 0)
	t.Logf("3 masters, 0 replicas ready in %v", time.Since(start))
	ctx := context.Background()
	cc := c.Client(t)

	masters := map[string]bool{}
	for _, n := range c.Nodes(t) {
		if n.Role != "master" || n.ID == "" {
			t.Fatalf("node %+v: exp a master with an ID", n)
		}
		if n.Port == 0 || n.Port+clusterBusOffset > 65535 {
			t.Fatalf("node %+v: exp a port whose bus port %d is valid", n, n.Port+clusterBusOffset)
		}
		masters[n.Addr] = false
	}
	if exp, got := 3, len(masters); exp != got {
		t.Fatalf("masters: exp %d, got %d", exp, got)
	}
	// Write keys until every master owns one, and read them back.
	prefix := UniqueKey(t)
	for i := 0; i < 1000 && !all(masters); i++ {
		key := fmt.Sprintf("%s:%d", prefix, i)
		if err := cc.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		addr := m.Options().Addr
		if _, ok := masters[addr]; !ok {
			t.Fatalf("key %s on %s, not a known master", key, addr)
		}
		masters[addr] = true
		if exp, got := fmt.Sprint(i), m.Get(ctx, key).Val(); exp != got {
			t.Fatalf("GET %s directly on its master: exp %q, got %q", key, exp, got)
		}
	}
	if !all(masters) {
		t.Fatalf("not every master got a key: %v", masters)
	}
}

func all(m map[string]bool) bool {
	for _, v := range m {
		if !v {
			return false
		}
	}
	return true
}

func TestClusterFailover(t *testing.T) {
	start := time.Now()
	c := Cluster(t, 3, 1)
	t.Logf("3 masters, 1 replica each ready in %v", time.Since(start))
	ctx := context.Background()
	cc := c.Client(t)

	var masters []string
	replicaOf := map[string]string{} // master ID -> replica addr
	idOf := map[string]string{}
	for _, n := range c.Nodes(t) {
		idOf[n.Addr] = n.ID
		switch n.Role {
		case "master":
			masters = append(masters, n.Addr)
		case "replica":
			replicaOf[n.MasterID] = n.Addr
		}
	}
	if len(masters) != 3 || len(replicaOf) != 3 {
		t.Fatalf("exp 3 masters with a replica each, got masters %v, replicas %v", masters, replicaOf)
	}

	for i, takeover := range []bool{false, true} {
		old := masters[i]
		start := time.Now()
		got := c.Failover(t, old, takeover)
		t.Logf("failover (takeover=%v) in %v", takeover, time.Since(start))
		if exp := replicaOf[idOf[old]]; exp != got {
			t.Fatalf("new master: exp %s, got %s", exp, got)
		}
		roles := map[string]string{}
		for _, n := range c.Nodes(t) {
			roles[n.Addr] = n.Role
		}
		if roles[got] != "master" || roles[old] != "replica" {
			t.Fatalf("after failover: exp %s master and %s replica, got %v", got, old, roles)
		}
	}

	// The client follows the new topology for keys in every slot range.
	prefix := UniqueKey(t)
	for i := range 50 {
		key := fmt.Sprintf("%s:%d", prefix, i)
		if err := cc.Set(ctx, key, "v", 0).Err(); err != nil {
			t.Fatalf("SET %s after failover: %v", key, err)
		}
	}
}

func TestClusterRestartNode(t *testing.T) {
	c := Cluster(t, 3, 0)
	ctx := context.Background()
	cc := c.Client(t)
	key := Prefix(t) + "k"
	if err := cc.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	m, err := cc.MasterForKey(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	s := c.Server(m.Options().Addr)
	s.Kill()
	if _, err := command(s.Addr(), time.Second, "PING"); err == nil {
		t.Fatal("PING on a killed node succeeded")
	}
	start := time.Now()
	s.Restart(t)
	c.WaitOK(t)
	t.Logf("node restarted and cluster ok in %v", time.Since(start))
	if err := cc.Get(ctx, key).Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after restart: exp redis.Nil (restarted empty), got %v", err)
	}
}
