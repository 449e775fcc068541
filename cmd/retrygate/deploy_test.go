package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// coolJob fails job through g so it cools down for the gate's Cooldown.
func coolJob(t *testing.T, g *gate.Gate, job string) {
	t.Helper()
	if err := g.Do(context.Background(), job, func(context.Context, *gate.Lease) error { return errTimeout }); err == nil {
		t.Fatalf("%s: expected a failure", job)
	}
}

func statusOf(t *testing.T, r result) statusJSON {
	t.Helper()
	if r.code != exitOK {
		t.Fatalf("exit %d: stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	var st statusJSON
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("%v: %q", err, r.stdout)
	}
	return st
}

// TestTLS reaches a TLS-only Redis that requires client certificates
// (redistest.TLSServer) through flags and through the environment, and
// checks each missing piece gets a message that names the fix.
func TestTLS(t *testing.T) {
	s := redistest.TLSServer(t)
	prefix := redistest.UniqueKey(t)
	g, err := gate.New(s.Client(t), gate.Options{Prefix: prefix, Cooldown: time.Hour, Classify: testClassify, Backoff: gate.Backoff{Jitter: -1}})
	if err != nil {
		t.Fatal(err)
	}
	coolJob(t, g, "doc-1")
	url := "rediss://" + s.Addr()
	f := s.Files

	st := statusOf(t, runCLI(t, nil, "--redis", url, "--tls-ca", f.CA, "--tls-cert", f.ClientCert, "--tls-key", f.ClientKey,
		"--prefix", prefix, "--json", "status", "doc-1"))
	if st.State != "cooling_down" {
		t.Fatalf("status over TLS: exp cooling_down, got %+v", st)
	}
	env := map[string]string{envRedis: url, envTLSCA: f.CA, envTLSCert: f.ClientCert, envTLSKey: f.ClientKey}
	if st := statusOf(t, runCLI(t, env, "--prefix", prefix, "--json", "status", "doc-1")); st.State != "cooling_down" {
		t.Fatalf("status over TLS from the environment: %+v", st)
	}
	// --tls-insecure skips verifying the server, not the client certificate.
	if st := statusOf(t, runCLI(t, nil, "--redis", url, "--tls-insecure", "--tls-cert", f.ClientCert, "--tls-key", f.ClientKey,
		"--prefix", prefix, "--json", "status", "doc-1")); st.State != "cooling_down" {
		t.Fatalf("status with --tls-insecure: %+v", st)
	}
	r := runCLI(t, nil, "--redis", url, "--tls-ca", f.CA, "--tls-cert", f.ClientCert, "--tls-key", f.ClientKey,
		"--prefix", prefix, "reset", "doc-1")
	mustOK(t, r)

	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no client certificate", []string{"--redis", url, "--tls-ca", f.CA}, exitRuntime, "--tls-cert FILE --tls-key FILE"},
		{"private CA not given", []string{"--redis", url, "--tls-cert", f.ClientCert, "--tls-key", f.ClientKey}, exitRuntime, "--tls-ca FILE"},
		{"plain redis:// at the TLS port", []string{"--redis", "redis://" + s.Addr()}, exitRuntime, "use a rediss:// URL"},
		{"TLS flags with redis://", []string{"--redis", "redis://" + s.Addr(), "--tls-ca", f.CA}, exitUsage, "need a rediss:// URL"},
		{"cert without key", []string{"--redis", url, "--tls-cert", f.ClientCert}, exitUsage, "--tls-cert and --tls-key go together"},
		{"CA file missing", []string{"--redis", url, "--tls-ca", f.CA + ".missing"}, exitUsage, "no such file"},
		{"CA file not PEM", []string{"--redis", url, "--tls-ca", f.ClientKey}, exitUsage, "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, nil, append(tc.args, "--prefix", prefix, "status", "doc-1")...)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.msg) {
				t.Fatalf("exp exit %d and %q, got %d: %q", tc.code, tc.msg, r.code, r.stderr)
			}
		})
	}
}

// TestSentinel reaches Redis through Sentinel (redistest.Sentinel), and
// resets a job after a failover: the CLI follows the sentinels to the new
// master, where a client pinned to the old one would get READONLY.
func TestSentinel(t *testing.T) {
	set := redistest.Sentinel(t)
	ctx := context.Background()
	rdb := set.Client(t)
	prefix := redistest.UniqueKey(t)
	g, err := gate.New(rdb, gate.Options{Prefix: prefix, Cooldown: time.Hour, Classify: testClassify, Backoff: gate.Backoff{Jitter: -1}})
	if err != nil {
		t.Fatal(err)
	}
	coolJob(t, g, "doc-1")
	coolJob(t, g, "doc-2")
	// Both replicas of the data have it before the failover.
	if err := rdb.Wait(ctx, 1, 5*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	addrs := strings.Join(set.Addrs(), ",")
	args := []string{"--sentinel", addrs, "--master", redistest.SentinelMaster, "--prefix", prefix, "--json"}
	if st := statusOf(t, runCLI(t, nil, append(args, "status", "doc-1")...)); st.State != "cooling_down" {
		t.Fatalf("status through Sentinel: %+v", st)
	}
	env := map[string]string{envSentinel: addrs, envMaster: redistest.SentinelMaster}
	if st := statusOf(t, runCLI(t, env, "--prefix", prefix, "--json", "status", "doc-2")); st.State != "cooling_down" {
		t.Fatalf("status through Sentinel from the environment: %+v", st)
	}

	// Pointed at the replica, reset is refused with READONLY and a hint.
	replica := set.DataAddrs()[1]
	r := runCLI(t, nil, "--redis", "redis://"+replica, "--prefix", prefix, "reset", "doc-1")
	if r.code != exitRuntime || !strings.Contains(r.stderr, "READONLY") || !strings.Contains(r.stderr, "--sentinel") {
		t.Fatalf("reset on a replica: exp exit 1 with READONLY and a --sentinel hint, got %d: %q", r.code, r.stderr)
	}

	// The gate's scripts are cached on the master it ran them on, not on
	// the replica (Redis 7 replicates a script's effects, not the script).
	script := redis.NewScript("return 1")
	if err := script.Run(ctx, rdb, nil).Err(); err != nil {
		t.Fatal(err)
	}

	newMaster := set.Failover(t)
	if newMaster != replica {
		t.Fatalf("failover: exp %s promoted, got %s", replica, newMaster)
	}
	direct := redis.NewClient(&redis.Options{Addr: newMaster})
	defer direct.Close()
	if got, err := direct.ScriptExists(ctx, script.Hash()).Result(); err != nil || len(got) != 1 || got[0] {
		t.Fatalf("SCRIPT EXISTS on the new master: exp [false] (an empty script cache), got %v, %v", got, err)
	}
	r = runCLI(t, nil, append(args, "reset", "doc-1")...)
	if r.code != exitOK {
		t.Fatalf("reset through Sentinel after the failover: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	gd, err := gate.New(direct, gate.Options{Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	if st, err := gd.Status(ctx, "doc-1"); err != nil || st.State != gate.Ready || st.Attempts != 0 {
		t.Fatalf("doc-1 on the new master after reset: %+v, %v", st, err)
	}
	if st, err := gd.Status(ctx, "doc-2"); err != nil || st.State != gate.CoolingDown {
		t.Fatalf("doc-2 on the new master: exp still cooling down, got %+v, %v", st, err)
	}
	// check reads the master through the sentinels, and names it. The
	// set persists nothing (a test's servers): the new master gets an RDB
	// schedule, so the only finding can be the policy's.
	if err := direct.ConfigSet(ctx, "save", "3600 1").Err(); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "--sentinel", addrs, "--master", redistest.SentinelMaster, "check")
	if r.code != exitOK {
		t.Fatalf("check through Sentinel: exit %d, %q %q", r.code, r.stdout, r.stderr)
	}
	if err := direct.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	r = runCLI(t, nil, "--sentinel", addrs, "--master", redistest.SentinelMaster, "check")
	if r.code != exitNotMet || !strings.Contains(r.stdout, "allkeys-lru on "+newMaster) || strings.Contains(r.stdout, "FailoverClient") {
		t.Fatalf("check through Sentinel, allkeys-lru on the master: exp exit 3 naming %s, got %d %q %q", newMaster, r.code, r.stdout, r.stderr)
	}

	for _, tc := range []struct {
		name string
		args []string
		msg  string
	}{
		{"no master name", []string{"--sentinel", addrs}, "--master NAME"},
		{"master without sentinel", []string{"--redis", "redis://" + newMaster, "--master", "m"}, "--master needs --sentinel"},
		{"sentinel and redis", []string{"--redis", "redis://" + newMaster, "--sentinel", addrs, "--master", "m"}, "exclusive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runCLI(t, nil, append(tc.args, "status", "doc-1")...)
			if r.code != exitUsage || !strings.Contains(r.stderr, tc.msg) {
				t.Fatalf("exp exit 2 and %q, got %d: %q", tc.msg, r.code, r.stderr)
			}
		})
	}
}
