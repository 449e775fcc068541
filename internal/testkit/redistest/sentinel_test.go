package redistest

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestSentinelFailover(t *testing.T) {
	start := time.Now()
	s := Sentinel(t)
	t.Logf("master, replica and 3 sentinels ready in %v", time.Since(start))
	ctx := context.Background()
	c := s.Client(t)

	old := s.MasterAddr(t)
	if exp := s.DataAddrs()[0]; old != exp {
		t.Fatalf("master before failover: exp %s, got %s", exp, old)
	}
	key := UniqueKey(t)
	if err := c.Set(ctx, key, "before", 0).Err(); err != nil {
		t.Fatalf("SET through the failover client: %v", err)
	}
	// The replica has it before the failover, so the new master will too.
	if err := c.Wait(ctx, 1, 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}

	start = time.Now()
	got := s.Failover(t)
	t.Logf("SENTINEL FAILOVER done in %v", time.Since(start))
	if exp := s.DataAddrs()[1]; got != exp {
		t.Fatalf("master after failover: exp the replica %s, got %s", exp, got)
	}
	info, err := command(got, adminTimeout, "INFO", "replication")
	if err != nil || infoField(info, "role") != "master" {
		t.Fatalf("%s after failover: role %q, %v", got, infoField(info, "role"), err)
	}
	if exp, got := 3, len(s.Addrs()); exp != got {
		t.Fatalf("sentinels: exp %d, got %d", exp, got)
	}

	// The failover client follows: it writes to the new master, without
	// READONLY from the demoted one.
	deadline := time.Now().Add(30 * time.Second) // polled: a loaded machine only makes it later
	for {
		err := c.Set(ctx, key, "after", 0).Err()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("SET after failover: %v", err)
		}
		if !strings.HasPrefix(err.Error(), "READONLY") {
			t.Logf("SET after failover: %v (retrying)", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	direct, err := command(got, adminTimeout, "GET", key)
	if err != nil || direct != "after" {
		t.Fatalf("GET on the new master: got %q, %v", direct, err)
	}
}
