package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the master name the sentinels of SentinelSet monitor.
const SentinelMaster = "mymaster"

const (
	sentinelCount   = 3
	sentinelTimeout = 30 * time.Second // settle at start, or fail over
)

// SentinelSet is a Sentinel deployment on loopback: two redis-servers (a
// master and its replica, whose roles swap on Failover) and three
// sentinels monitoring them as SentinelMaster with quorum 2.
type SentinelSet struct {
	data      []*Srv // the master and the replica, in start order
	sentinels []*Srv
}

// Sentinel starts a master, a replica of it and three sentinels
// (redis-server --sentinel, as Debian's redis-sentinel runs), and waits
// until every sentinel knows the master and the replica, so a failover
// can pick it. Everything stops in t.Cleanup. It skips t where
// redis-server is missing (see Require).
func Sentinel(t testing.TB) *SentinelSet {
	t.Helper()
	Require(t)
	set := &SentinelSet{}
	t.Cleanup(func() {
		var wg sync.WaitGroup
		for _, s := range append(append([]*Srv{}, set.sentinels...), set.data...) {
			wg.Add(1)
			go func() { defer wg.Done(); s.cleanup(t) }()
		}
		wg.Wait()
	})
	master, err := newSrv(t.TempDir(), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	set.data = append(set.data, master)
	replica, err := newSrv(t.TempDir(), false, []string{"--replicaof", "127.0.0.1", strconv.Itoa(master.Port())})
	if err != nil {
		t.Fatal(err)
	}
	set.data = append(set.data, replica)

	errs := make([]error, sentinelCount)
	set.sentinels = make([]*Srv, sentinelCount)
	var wg sync.WaitGroup
	for i := range sentinelCount {
		dir := t.TempDir()
		wg.Add(1)
		go func() {
			defer wg.Done()
			set.sentinels[i], errs[i] = startSentinel(dir, master.Port())
		}()
	}
	wg.Wait()
	set.sentinels = compact(set.sentinels)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if err := set.waitReady(replica.Addr()); err != nil {
		t.Fatal(err)
	}
	return set
}

func compact(ss []*Srv) []*Srv {
	var out []*Srv
	for _, s := range ss {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// startSentinel starts one sentinel in dir monitoring the master at
// 127.0.0.1:masterPort. Sentinel rewrites its config file, so each has
// its own.
func startSentinel(dir string, masterPort int) (*Srv, error) {
	conf := filepath.Join(dir, "sentinel.conf")
	return newSrvArgs(dir, false, nil, func(port int) ([]string, error) {
		// Fresh per attempt: a sentinel that failed to bind may have
		// rewritten it.
		txt := fmt.Sprintf(`sentinel monitor %[1]s 127.0.0.1 %[2]d 2
sentinel down-after-milliseconds %[1]s 2000
sentinel failover-timeout %[1]s 10000
sentinel parallel-syncs %[1]s 1
`, SentinelMaster, masterPort)
		if err := os.WriteFile(conf, []byte(txt), 0o644); err != nil {
			return nil, err
		}
		return []string{conf, "--sentinel",
			"--port", strconv.Itoa(port),
			"--bind", "127.0.0.1",
			"--dir", dir,
			"--daemonize", "no",
			"--logfile", filepath.Join(dir, logName),
		}, nil
	})
}

// Addrs returns the sentinels' host:port addresses.
func (s *SentinelSet) Addrs() []string {
	out := make([]string, len(s.sentinels))
	for i, sn := range s.sentinels {
		out[i] = sn.Addr()
	}
	return out
}

// DataAddrs returns the addresses of the two data servers, the master
// first as started (Failover swaps their roles, not this order).
func (s *SentinelSet) DataAddrs() []string {
	return []string{s.data[0].Addr(), s.data[1].Addr()}
}

// Client returns a go-redis failover client (redis.NewFailoverClient)
// that finds the master through the sentinels, closed in t.Cleanup.
func (s *SentinelSet) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: s.Addrs()})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// MasterAddr returns the master's address as the first sentinel reports it.
func (s *SentinelSet) MasterAddr(t testing.TB) string {
	t.Helper()
	addr, err := s.masterOf(context.Background(), s.sentinels[0].Addr())
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// Failover runs SENTINEL FAILOVER on a sentinel and waits, polling under a
// deadline, until the replica has been promoted: it reports role:master
// and every sentinel names it as the master. It returns the new master's
// address. The old master is demoted by the sentinels a few seconds
// later; the replica of the new master it then becomes is not waited for.
func (s *SentinelSet) Failover(t testing.TB) string {
	t.Helper()
	ctx := context.Background()
	old := s.MasterAddr(t)
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.sentinels[0].Addr(), MaxRetries: -1})
	defer sc.Close()
	if err := sc.Failover(ctx, SentinelMaster).Err(); err != nil {
		t.Fatalf("redistest: SENTINEL FAILOVER %s: %v", SentinelMaster, err)
	}
	deadline := time.Now().Add(sentinelTimeout)
	var lastErr error
	for time.Now().Before(deadline) {
		if lastErr = s.promoted(ctx, old); lastErr == nil {
			return s.MasterAddr(t)
		}
		time.Sleep(clusterPollInterval)
	}
	t.Fatalf("redistest: failover from %s not done within %v: %v; first sentinel: %s", old, sentinelTimeout, lastErr, sentinelInfo(s.sentinels[0].Addr()))
	return ""
}

// promoted returns nil once every sentinel names a master other than old
// and that server says it is master.
func (s *SentinelSet) promoted(ctx context.Context, old string) error {
	var master string
	for _, sn := range s.sentinels {
		addr, err := s.masterOf(ctx, sn.Addr())
		if err != nil {
			return err
		}
		if addr == old {
			return fmt.Errorf("sentinel %s still names %s", sn.Addr(), old)
		}
		if master != "" && addr != master {
			return fmt.Errorf("sentinels disagree: %s and %s", master, addr)
		}
		master = addr
	}
	info, err := command(master, adminTimeout, "INFO", "replication")
	if err != nil {
		return err
	}
	if role := infoField(info, "role"); role != "master" {
		return fmt.Errorf("%s has role %s", master, role)
	}
	return nil
}

func (s *SentinelSet) masterOf(ctx context.Context, sentinel string) (string, error) {
	sc := redis.NewSentinelClient(&redis.Options{Addr: sentinel, MaxRetries: -1, DialTimeout: adminTimeout})
	defer sc.Close()
	hp, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil {
		return "", fmt.Errorf("sentinel %s: %w", sentinel, err)
	}
	if len(hp) != 2 {
		return "", fmt.Errorf("sentinel %s: master address %q", sentinel, hp)
	}
	return hp[0] + ":" + hp[1], nil
}

// waitReady waits until every sentinel lists the replica as a healthy
// replica of the master.
func (s *SentinelSet) waitReady(replica string) error {
	ctx := context.Background()
	deadline := time.Now().Add(sentinelTimeout)
	for {
		err := s.checkReplica(ctx, replica)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: sentinels not ready within %v: %w", sentinelTimeout, err)
		}
		time.Sleep(clusterPollInterval)
	}
}

func (s *SentinelSet) checkReplica(ctx context.Context, replica string) error {
	for _, sn := range s.sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: sn.Addr(), MaxRetries: -1, DialTimeout: adminTimeout})
		reps, err := sc.Replicas(ctx, SentinelMaster).Result()
		_ = sc.Close()
		if err != nil {
			return fmt.Errorf("sentinel %s: %w", sn.Addr(), err)
		}
		ok := false
		for _, r := range reps {
			if r["ip"]+":"+r["port"] == replica && r["flags"] == "slave" && r["master-link-status"] == "ok" {
				ok = true
			}
		}
		if !ok {
			return fmt.Errorf("sentinel %s: replica %s not (yet) healthy in %v", sn.Addr(), replica, reps)
		}
	}
	return nil
}

// Server returns the data server or sentinel at addr, to Kill or Restart
// it, or nil.
func (s *SentinelSet) Server(addr string) *Srv {
	for _, sv := range append(append([]*Srv{}, s.data...), s.sentinels...) {
		if sv.Addr() == addr {
			return sv
		}
	}
	return nil
}

// sentinelInfo is for error messages: a sentinel's view, one line.
func sentinelInfo(addr string) string {
	info, err := command(addr, adminTimeout, "INFO", "sentinel")
	if err != nil {
		return err.Error()
	}
	return strings.Join(strings.Fields(info), " ")
}
