package redistest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func isNoPerm(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && strings.HasPrefix(re.Error(), "NOPERM")
}

func TestACLServer(t *testing.T) {
	prefix := "acl" + strings.ReplaceAll(UniqueKey(t), ":", "-")
	s := ACLServer(t, prefix, ACLUpstream)
	ctx := context.Background()
	c := s.Client(t)

	// The user's rules are exactly the documented ones, in order.
	reply, err := s.AdminClient(t).Do(ctx, "ACL", "GETUSER", s.User).Result()
	if err != nil {
		t.Fatal(err)
	}
	user, ok := reply.(map[any]any) // RESP3, go-redis's default
	if !ok {
		t.Fatalf("ACL GETUSER: unexpected reply %T", reply)
	}
	// Redis keeps the rules as a set: compare them sorted.
	exp := slices.Sorted(slices.Values(slices.Concat(GateACL, ACLUpstream)))
	cmds, _ := user["commands"].(string)
	if got := slices.Sorted(slices.Values(strings.Fields(cmds))); !slices.Equal(exp, got) {
		t.Fatalf("commands: exp %q, got %q", exp, got)
	}
	if exp, got := "~"+prefix+":*", user["keys"]; exp != got {
		t.Fatalf("keys: exp %q, got %q", exp, got)
	}

	key := prefix + ":{doc-1}:job"
	if err := c.Set(ctx, key, "v", 0).Err(); err != nil {
		t.Fatalf("SET under the prefix: %v", err)
	}
	if err := c.ZAdd(ctx, prefix+":upstream:{s}:fails", redis.Z{Score: 1, Member: "m"}).Err(); err != nil {
		t.Fatalf("ZADD with ACLUpstream: %v", err)
	}
	// A script may call only the commands the rules allow.
	if err := c.Eval(ctx, "return redis.call('PTTL', KEYS[1])", []string{key}).Err(); err != nil {
		t.Fatalf("EVAL calling PTTL: %v", err)
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"SET outside the prefix", c.Set(ctx, "other:"+key, "v", 0).Err()},
		{"INCR, not in the rules", c.Incr(ctx, prefix+":n").Err()},
		{"SCAN without ACLList", c.Scan(ctx, 0, prefix+":*", 10).Err()},
		{"CONFIG GET without ACLCheck", c.ConfigGet(ctx, "maxmemory-policy").Err()},
		{"WAIT without ACLWait", c.Wait(ctx, 0, 0).Err()},
	} {
		if !isNoPerm(tc.err) {
			t.Errorf("%s: exp NOPERM, got %v", tc.name, tc.err)
		}
	}
	// Inside a script the same refusal is an ERR reply, not NOPERM.
	err = c.Eval(ctx, "return redis.call('INCR', KEYS[1])", []string{prefix + ":n"}).Err()
	if err == nil || !strings.Contains(err.Error(), "can't run this command") {
		t.Errorf("a script calling INCR: exp ERR ... can't run this command, got %v", err)
	}
}

func TestACLServerExtra(t *testing.T) {
	prefix := "acl" + strings.ReplaceAll(UniqueKey(t), ":", "-")
	extra := slices.Concat(ACLList, ACLCheck, ACLWait)
	s := ACLServer(t, prefix, extra)
	ctx := context.Background()
	c := s.Client(t)
	if err := c.Scan(ctx, 0, prefix+":*", 10).Err(); err != nil {
		t.Errorf("SCAN with ACLList: %v", err)
	}
	if err := c.ConfigGet(ctx, "maxmemory-policy").Err(); err != nil {
		t.Errorf("CONFIG GET with ACLCheck: %v", err)
	}
	if err := c.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); !isNoPerm(err) {
		t.Errorf("CONFIG SET with ACLCheck: exp NOPERM, got %v", err)
	}
	if err := c.Wait(ctx, 0, 0).Err(); err != nil {
		t.Errorf("WAIT with ACLWait: %v", err)
	}
}
