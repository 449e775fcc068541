package redistest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	clusterTimeout  = 30 * time.Second // create and settle
	failoverTimeout = 30 * time.Second
	// A manual failover that could not complete is aborted by Redis after
	// 5 s; ask again after that.
	failoverRetry       = 6 * time.Second
	clusterPollInterval = 20 * time.Millisecond
	adminTimeout        = 2 * time.Second
)

// ClusterSrv is a Redis Cluster of real redis-server processes on
// loopback ports.
type ClusterSrv struct {
	nodes []*Srv // in creation order: redis-cli makes the first ones masters
}

// Node is one cluster node as the cluster sees it at the time of the call.
type Node struct {
	Addr     string // host:port
	Port     int    // client port; the cluster bus is Port+10000
	ID       string // cluster node ID
	Role     string // "master" or "replica"
	MasterID string // ID of the master, for a replica; "" for a master
	Failed   bool   // flagged fail or fail? by the node asked
}

// Cluster starts masters*(1+replicasPerMaster) cluster-enabled servers,
// joins them with redis-cli --cluster create, and waits until every node
// reports cluster_state:ok with all 16384 slots served, all nodes agree
// on the roles and every replica is linked to its master. The servers
// stop in t.Cleanup. It skips t where redis-server or redis-cli is missing
// (see Require). masters must be at least 3, as redis-cli requires.
func Cluster(t testing.TB, masters, replicasPerMaster int) *ClusterSrv {
	t.Helper()
	require(t, "cluster", "redis-server", "redis-cli")
	dirs := make([]string, masters*(1+replicasPerMaster))
	for i := range dirs {
		dirs[i] = t.TempDir()
	}
	c, err := startCluster(dirs, masters, replicasPerMaster)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.stop()
		if t.Failed() {
			for _, s := range c.nodes {
				t.Logf("redistest: last lines of the log of cluster node %s:\n%s", s.Addr(), s.logTail())
			}
		}
	})
	return c
}

func startCluster(dirs []string, masters, replicas int) (*ClusterSrv, error) {
	if masters < 3 || replicas < 0 || len(dirs) != masters*(1+replicas) {
		return nil, fmt.Errorf("redistest: cluster of %d masters with %d replicas each: need at least 3 masters", masters, replicas)
	}
	c := &ClusterSrv{nodes: make([]*Srv, len(dirs))}
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for i, dir := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.nodes[i], errs[i] = newSrv(dir, true, nil)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.stop()
		return nil, err
	}

	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	// redis-cli sleeps at least 2 s in here, which is most of the startup.
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		c.stop()
		return nil, fmt.Errorf("redistest: redis-cli --cluster create: %v; output:\n%s", err, out)
	}
	if err := c.waitOK(clusterTimeout); err != nil {
		c.stop()
		return nil, err
	}
	return c, nil
}

// Addrs returns every node's host:port in creation order.
func (c *ClusterSrv) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		addrs[i] = s.Addr()
	}
	return addrs
}

// Client returns a new go-redis cluster client seeded with every node,
// closed in t.Cleanup.
func (c *ClusterSrv) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Server returns the process behind addr, to Kill or Restart one node, or
// nil if addr is not a node of c. After a Restart call WaitOK.
func (c *ClusterSrv) Server(addr string) *Srv {
	for _, s := range c.nodes {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// Nodes returns every node, in creation order, with its current role as
// seen by the first running node.
func (c *ClusterSrv) Nodes(t testing.TB) []Node {
	t.Helper()
	for _, s := range c.nodes {
		if s.Pid() == 0 {
			continue
		}
		txt, err := command(s.Addr(), adminTimeout, "CLUSTER", "NODES")
		if err != nil {
			t.Fatalf("redistest: CLUSTER NODES on %s: %v", s.Addr(), err)
		}
		byAddr := map[string]Node{}
		for _, n := range parseClusterNodes(txt) {
			byAddr[n.Addr] = n.Node
		}
		nodes := make([]Node, len(c.nodes))
		for i, s := range c.nodes {
			nodes[i] = byAddr[s.Addr()]
			nodes[i].Addr, nodes[i].Port = s.Addr(), s.Port()
		}
		return nodes
	}
	t.Fatal("redistest: no cluster node is running")
	return nil
}

// WaitOK waits until every running node reports cluster_state:ok with all
// slots served, the running nodes agree on their roles and no running node
// is flagged failed, and every running replica is linked to its master.
func (c *ClusterSrv) WaitOK(t testing.TB) {
	t.Helper()
	if err := c.waitOK(clusterTimeout); err != nil {
		t.Fatal(err)
	}
}

// Failover runs CLUSTER FAILOVER (or CLUSTER FAILOVER TAKEOVER) on a
// replica of the master at masterAddr, waits until that replica is master
// and the cluster is healthy again (see WaitOK), and returns the replica's
// address. A coordinated failover needs the master running; TAKEOVER does
// not.
func (c *ClusterSrv) Failover(t testing.TB, masterAddr string, takeover bool) string {
	t.Helper()
	var master Node
	nodes := c.Nodes(t)
	for _, n := range nodes {
		if n.Addr == masterAddr {
			master = n
		}
	}
	if master.Role != "master" {
		t.Fatalf("redistest: Failover: %s is not a master (%+v)", masterAddr, master)
	}
	var replica *Srv
	for _, n := range nodes {
		if n.Role == "replica" && n.MasterID == master.ID && !n.Failed && c.Server(n.Addr).Pid() != 0 {
			replica = c.Server(n.Addr)
			break
		}
	}
	if replica == nil {
		t.Fatalf("redistest: Failover: master %s has no running replica", masterAddr)
	}

	args := []string{"CLUSTER", "FAILOVER"}
	if takeover {
		args = append(args, "TAKEOVER")
	}
	a := admin{}
	defer a.close()
	rc := a.get(replica.Addr())
	deadline := time.Now().Add(failoverTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		if _, err := rc.do(args...); err != nil {
			t.Fatalf("redistest: %s on %s: %v", strings.Join(args, " "), replica.Addr(), err)
		}
		retry := time.Now().Add(failoverRetry)
		for time.Now().Before(retry) && time.Now().Before(deadline) {
			info, err := rc.do("INFO", "replication")
			if err == nil && infoField(info, "role") == "master" {
				lastErr = c.checkOK(a)
				if lastErr == nil {
					return replica.Addr()
				}
			} else {
				lastErr = fmt.Errorf("%s is not master yet (err %v)", replica.Addr(), err)
			}
			time.Sleep(clusterPollInterval)
		}
	}
	t.Fatalf("redistest: Failover of %s to %s: not done within %v: %v", masterAddr, replica.Addr(), failoverTimeout, lastErr)
	return ""
}

func (c *ClusterSrv) stop() {
	var wg sync.WaitGroup
	for _, s := range c.nodes {
		if s != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.stop()
			}()
		}
	}
	wg.Wait()
}

func (c *ClusterSrv) waitOK(timeout time.Duration) error {
	a := admin{}
	defer a.close()
	deadline := time.Now().Add(timeout)
	for {
		err := c.checkOK(a)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: cluster %v not healthy within %v: %w", c.Addrs(), timeout, err)
		}
		time.Sleep(clusterPollInterval)
	}
}

// admin keeps one connection per node across polls, so polling does not
// churn through loopback ports.
type admin map[string]*conn

func (a admin) get(addr string) *conn {
	if a[addr] == nil {
		a[addr] = &conn{addr: addr, timeout: adminTimeout}
	}
	return a[addr]
}

func (a admin) close() {
	for _, c := range a {
		c.close()
	}
}

// checkOK returns nil if the cluster is healthy as WaitOK defines it, or
// what is wrong.
func (c *ClusterSrv) checkOK(a admin) error {
	running := map[string]bool{}
	for _, s := range c.nodes {
		running[s.Addr()] = s.Pid() != 0
	}
	var firstView string
	for _, s := range c.nodes {
		if !running[s.Addr()] {
			continue
		}
		if err := checkNode(a.get(s.Addr()), running, len(c.nodes), &firstView); err != nil {
			return fmt.Errorf("node %s: %w", s.Addr(), err)
		}
	}
	return nil
}

// checkNode checks one node's view; view is the canonical roles string
// every node must agree on, set by the first node checked.
func checkNode(rc *conn, running map[string]bool, total int, view *string) error {
	info, err := rc.do("CLUSTER", "INFO")
	if err != nil {
		return err
	}
	if got := infoField(info, "cluster_state"); got != "ok" {
		return fmt.Errorf("cluster_state:%s", got)
	}
	if got := infoField(info, "cluster_slots_ok"); got != "16384" {
		return fmt.Errorf("cluster_slots_ok:%s", got)
	}
	if got := infoField(info, "cluster_known_nodes"); got != strconv.Itoa(total) {
		return fmt.Errorf("cluster_known_nodes:%s, want %d", got, total)
	}
	txt, err := rc.do("CLUSTER", "NODES")
	if err != nil {
		return err
	}
	var roles []string
	for _, n := range parseClusterNodes(txt) {
		if !running[n.Addr] {
			continue
		}
		if n.Failed || n.handshake || !n.connected {
			return fmt.Errorf("sees %s as %q", n.Addr, n.flags)
		}
		roles = append(roles, n.Addr+" "+n.Role+" "+n.MasterID)
		if n.myself && n.Role == "replica" {
			rinfo, err := rc.do("INFO", "replication")
			if err != nil {
				return err
			}
			if got := infoField(rinfo, "master_link_status"); got != "up" {
				return fmt.Errorf("master_link_status:%s", got)
			}
		}
	}
	sort.Strings(roles)
	got := strings.Join(roles, "; ")
	if *view == "" {
		*view = got
	} else if got != *view {
		return fmt.Errorf("roles %q disagree with %q", got, *view)
	}
	return nil
}

type nodeLine struct {
	Node
	flags     string
	myself    bool
	handshake bool // also noaddr: not a settled member yet
	connected bool
}

// parseClusterNodes parses CLUSTER NODES:
// <id> <ip:port@cport[,hostname]> <flags> <master> <ping> <pong> <epoch> <link> <slots>...
func parseClusterNodes(txt string) []nodeLine {
	var out []nodeLine
	for _, line := range strings.Split(strings.TrimSpace(txt), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		n := nodeLine{flags: f[2]}
		n.ID, n.Addr = f[0], addr
		if _, p, ok := strings.Cut(addr, ":"); ok {
			n.Port, _ = strconv.Atoi(p)
		}
		for _, flag := range strings.Split(f[2], ",") {
			switch flag {
			case "myself":
				n.myself = true
			case "master":
				n.Role = "master"
			case "slave":
				n.Role = "replica"
			case "fail", "fail?":
				n.Failed = true
			case "handshake", "noaddr":
				n.handshake = true
			}
		}
		if n.Role == "replica" && f[3] != "-" {
			n.MasterID = f[3]
		}
		n.connected = n.myself || f[7] == "connected"
		out = append(out, n)
	}
	return out
}
