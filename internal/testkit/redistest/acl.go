package redistest

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// GateACL is the minimal ACL command set a gate needs, as documented in
// docs/operating.md ("ACL users"): its scripts (EVALSHA, and EVAL to load
// them again after a restart empties the script cache) and the commands
// those scripts and Status call. ACLServer adds the key pattern
// ~<prefix>:*.
var GateACL = []string{"-@all", "+evalsha", "+eval", "+time", "+get", "+set", "+pttl", "+pexpire", "+del"}

// Extra rule sets for the features that need more than GateACL.
var (
	// ACLUpstream: Options.Upstream's sliding windows (5xx failures, waves)
	// and its budget (the provider's rate limits, the calls admitted).
	ACLUpstream = []string{"+zadd", "+zremrangebyscore", "+zcard", "+hmget", "+hset", "+zrangebyscore", "+zrem"}
	// ACLLineStatus: retrygate upstream status's reading of who waits in
	// the upstream's line (ZRANGE by rank; ZCARD is ACLUpstream's).
	ACLLineStatus = []string{"+zrange"}
	// ACLWait: Options.Redis.WaitReplicas.
	ACLWait = []string{"+wait"}
	// ACLList: retrygate list.
	ACLList = []string{"+scan"}
	// ACLCheck: Gate.Check and retrygate check (CONFIG GET for the
	// policy and persistence, INFO for the server and its memory).
	ACLCheck = []string{"+config|get", "+info"}
	// ACLPubSub: waking waiters through pub/sub. Channels need their own
	// pattern: pass "&<prefix>:*" (or the channels used) along with it.
	ACLPubSub = []string{"+publish", "+spublish", "+subscribe", "+ssubscribe"}
)

// ACLSrv is a redis-server with one restricted ACL user besides the
// unrestricted default user (which this package uses for its own admin
// commands).
type ACLSrv struct {
	*Srv
	User, Password string
	// Rules is the ACL SETUSER rule list the user was created with, after
	// "on", the password and "resetkeys resetchannels".
	Rules []string
}

// ACLServer starts a redis-server (see Server) with a user "gate" whose
// rules are exactly ~<prefix>:*, GateACL and extra, in that order: extra
// may add rule sets above (ACLUpstream, ...) or any ACL rule.
func ACLServer(t testing.TB, prefix string, extra []string, opts ...Option) *ACLSrv {
	t.Helper()
	s := Server(t, opts...)
	a := &ACLSrv{Srv: s, User: "gate", Password: "gate-secret-" + strings.ReplaceAll(UniqueKey(t), "/", "_"),
		Rules: append(append([]string{"~" + prefix + ":*"}, GateACL...), extra...)}
	a.setUser(t)
	return a
}

func (a *ACLSrv) setUser(t testing.TB) {
	t.Helper()
	args := append([]string{"ACL", "SETUSER", a.User, "reset", "on", ">" + a.Password, "resetkeys", "resetchannels"}, a.Rules...)
	if _, err := a.command(adminTimeout, args...); err != nil {
		t.Fatalf("redistest: %s: %v", strings.Join(args[:3], " "), err)
	}
}

// Restart restarts the server (see Srv.Restart) and creates the user
// again, as an ACL file would: what a restart really empties is the data
// and the script cache.
func (a *ACLSrv) Restart(t testing.TB) {
	t.Helper()
	a.Srv.Restart(t)
	a.setUser(t)
}

// Client returns a go-redis client logged in as the restricted user,
// closed in t.Cleanup.
func (a *ACLSrv) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: a.Addr(), Username: a.User, Password: a.Password})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// AdminClient returns a client as the unrestricted default user, closed in
// t.Cleanup.
func (a *ACLSrv) AdminClient(t testing.TB) *redis.Client { return a.Srv.Client(t) }
