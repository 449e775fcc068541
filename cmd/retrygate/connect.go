package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Environment variables: each stands in for its flag when the flag is not
// given. Passwords come only from a URL or from the environment, never
// from a flag, which any user of the machine could read in ps.
const (
	envRedis            = "RETRYGATE_REDIS" // --redis; REDIS_URL is the fallback
	envRedisURL         = "REDIS_URL"
	envCluster          = "RETRYGATE_CLUSTER"
	envSentinel         = "RETRYGATE_SENTINEL"
	envMaster           = "RETRYGATE_MASTER"
	envTLSCA            = "RETRYGATE_TLS_CA"
	envTLSCert          = "RETRYGATE_TLS_CERT"
	envTLSKey           = "RETRYGATE_TLS_KEY"
	envTLSInsecure      = "RETRYGATE_TLS_INSECURE"
	envRedisUser        = "RETRYGATE_REDIS_USERNAME"
	envRedisPassword    = "RETRYGATE_REDIS_PASSWORD"
	envSentinelUser     = "RETRYGATE_SENTINEL_USERNAME"
	envSentinelPassword = "RETRYGATE_SENTINEL_PASSWORD"
)

// connFlags are the global flags that say how to reach Redis.
type connFlags struct {
	redisURL, cluster, sentinel, master string
	tlsCA, tlsCert, tlsKey              string
	tlsInsecure                         bool
}

func (f *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.redisURL, "redis", f.redisURL, "Redis `URL`, redis:// or rediss://; default $"+envRedis+", else $"+envRedisURL+", else "+defaultURL)
	fs.StringVar(&f.cluster, "cluster", f.cluster, "Redis Cluster seed `ADDRS` (host:port,...) or a cluster URL; default $"+envCluster)
	fs.StringVar(&f.sentinel, "sentinel", f.sentinel, "Sentinel `ADDRS` (host:port,...), with --master; default $"+envSentinel)
	fs.StringVar(&f.master, "master", f.master, "the master `NAME` the sentinels monitor; default $"+envMaster)
	fs.StringVar(&f.tlsCA, "tls-ca", f.tlsCA, "PEM `FILE` of the CA that signed the server's certificate; default $"+envTLSCA)
	fs.StringVar(&f.tlsCert, "tls-cert", f.tlsCert, "PEM `FILE` of a client certificate, with --tls-key; default $"+envTLSCert)
	fs.StringVar(&f.tlsKey, "tls-key", f.tlsKey, "PEM `FILE` of the client certificate's key; default $"+envTLSKey)
	fs.BoolVar(&f.tlsInsecure, "tls-insecure", f.tlsInsecure, "do not verify the server's certificate (tests only); default $"+envTLSInsecure+"=1")
}

// connInfo is how the CLI reached Redis, for messages.
type connInfo struct {
	addr    string   // what to name in messages: an address, never a credential
	tls     bool     // TLS was asked for
	secrets []string // to scrub from any message
}

// quietLogger silences go-redis's own log lines: the CLI reports errors in
// one line of its own.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

var silenceRedis sync.Once

const (
	dialTimeout = time.Second
	ioTimeout   = 2 * time.Second
	poolSize    = 8
)

// connect builds the Redis client from the flags and the environment; it
// does not dial yet.
func (c *cli) connect() error {
	silenceRedis.Do(func() { redis.SetLogger(quietLogger{}) })
	f := c.conn
	env := func(name string, v *string) {
		if *v == "" {
			*v = strings.TrimSpace(c.getenv(name))
		}
	}
	// Flags first; the environment only where no flag chose the mode.
	modes := 0
	for _, v := range []string{f.redisURL, f.cluster, f.sentinel} {
		if v != "" {
			modes++
		}
	}
	if modes > 1 {
		return usageErrorf("--redis, --cluster and --sentinel are exclusive")
	}
	if modes == 0 {
		set := 0
		for _, name := range []string{envRedis, envCluster, envSentinel} {
			if c.getenv(name) != "" {
				set++
			}
		}
		if set > 1 {
			return usageErrorf("$%s, $%s and $%s are exclusive", envRedis, envCluster, envSentinel)
		}
		env(envRedis, &f.redisURL)
		env(envCluster, &f.cluster)
		env(envSentinel, &f.sentinel)
		if f.redisURL == "" && f.cluster == "" && f.sentinel == "" {
			env(envRedisURL, &f.redisURL)
		}
	}
	env(envMaster, &f.master)
	env(envTLSCA, &f.tlsCA)
	env(envTLSCert, &f.tlsCert)
	env(envTLSKey, &f.tlsKey)
	if !f.tlsInsecure {
		switch strings.ToLower(strings.TrimSpace(c.getenv(envTLSInsecure))) {
		case "", "0", "false", "no":
		case "1", "true", "yes":
			f.tlsInsecure = true
		default:
			return usageErrorf("$%s must be 1 or 0", envTLSInsecure)
		}
	}
	if f.master != "" && f.sentinel == "" {
		return usageErrorf("--master needs --sentinel")
	}
	user, pass := c.getenv(envRedisUser), c.getenv(envRedisPassword)
	c.info.secrets = append(c.info.secrets, pass, c.getenv(envSentinelPassword))

	switch {
	case f.sentinel != "":
		return c.connectSentinel(f, user, pass)
	case f.cluster != "":
		return c.connectCluster(f, user, pass)
	}
	return c.connectURL(f)
}

func (c *cli) connectURL(f connFlags) error {
	raw := f.redisURL
	if raw == "" {
		raw = defaultURL
	}
	c.info.secrets = append(c.info.secrets, urlSecrets(raw)...)
	scheme, _, _ := strings.Cut(raw, "://")
	if scheme != "redis" && scheme != "rediss" {
		return usageErrorf("bad Redis URL %s: the scheme must be redis:// or rediss://", redactURL(raw))
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return usageErrorf("bad Redis URL %s: %s", redactURL(raw), urlProblem(err))
	}
	if opts.TLSConfig == nil && f.wantTLS() {
		return usageErrorf("--tls-ca, --tls-cert, --tls-key and --tls-insecure need a rediss:// URL, not %s", redactURL(raw))
	}
	if opts.TLSConfig != nil {
		if opts.TLSConfig, err = f.tlsConfig(opts.TLSConfig); err != nil {
			return err
		}
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = dialTimeout, ioTimeout, ioTimeout
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	opts.ContextTimeoutEnabled = true
	opts.PoolSize = poolSize
	if opts.TLSConfig != nil {
		opts.Dialer = c.tlsDialer(opts.TLSConfig)
	}
	c.rdb = redis.NewClient(opts)
	c.info.addr = opts.Addr
	c.info.tls = opts.TLSConfig != nil
	return nil
}

func (c *cli) connectCluster(f connFlags, user, pass string) error {
	var opts *redis.ClusterOptions
	if strings.Contains(f.cluster, "://") {
		c.info.secrets = append(c.info.secrets, urlSecrets(f.cluster)...)
		scheme, _, _ := strings.Cut(f.cluster, "://")
		if scheme != "redis" && scheme != "rediss" {
			return usageErrorf("bad --cluster URL %s: the scheme must be redis:// or rediss://", redactURL(f.cluster))
		}
		o, err := redis.ParseClusterURL(f.cluster)
		if err != nil {
			return usageErrorf("bad --cluster URL %s: %s", redactURL(f.cluster), urlProblem(err))
		}
		if o.TLSConfig == nil && f.wantTLS() {
			return usageErrorf("--tls-ca, --tls-cert, --tls-key and --tls-insecure need a rediss:// URL, not %s", redactURL(f.cluster))
		}
		opts = o
	} else {
		addrs, err := addrList("--cluster", f.cluster)
		if err != nil {
			return err
		}
		opts = &redis.ClusterOptions{Addrs: addrs, Username: user, Password: pass}
		if f.wantTLS() {
			opts.TLSConfig = &tls.Config{}
		}
	}
	if opts.TLSConfig != nil {
		var err error
		if opts.TLSConfig, err = f.tlsConfig(opts.TLSConfig); err != nil {
			return err
		}
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = dialTimeout, ioTimeout, ioTimeout
	opts.MaxRetries = -1
	opts.ContextTimeoutEnabled = true
	opts.PoolSize = poolSize
	if opts.TLSConfig != nil {
		opts.Dialer = c.tlsDialer(opts.TLSConfig)
	}
	c.rdb = redis.NewClusterClient(opts)
	c.info.addr = "cluster " + strings.Join(opts.Addrs, ",")
	c.info.tls = opts.TLSConfig != nil
	return nil
}

func (c *cli) connectSentinel(f connFlags, user, pass string) error {
	addrs, err := addrList("--sentinel", f.sentinel)
	if err != nil {
		return err
	}
	if f.master == "" {
		return usageErrorf("--sentinel needs --master NAME (the name the sentinels monitor)")
	}
	opts := &redis.FailoverOptions{
		MasterName: f.master, SentinelAddrs: addrs,
		Username: user, Password: pass,
		SentinelUsername: c.getenv(envSentinelUser), SentinelPassword: c.getenv(envSentinelPassword),
		DialTimeout: dialTimeout, ReadTimeout: ioTimeout, WriteTimeout: ioTimeout,
		MaxRetries: -1, DialerRetries: 1, ContextTimeoutEnabled: true, PoolSize: poolSize,
	}
	if f.wantTLS() {
		if opts.TLSConfig, err = f.tlsConfig(&tls.Config{}); err != nil {
			return err
		}
		opts.Dialer = c.tlsDialer(opts.TLSConfig)
	}
	c.rdb = redis.NewFailoverClient(opts)
	c.info.addr = fmt.Sprintf("master %s via sentinels %s", f.master, strings.Join(addrs, ","))
	c.info.tls = opts.TLSConfig != nil
	return nil
}

// addrList parses host:port,host:port. Credentials have no place here: an
// entry with '@' is refused without being echoed.
func addrList(flagName, list string) ([]string, error) {
	var addrs []string
	for i, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		if strings.ContainsAny(a, "@/") {
			return nil, usageErrorf("%s: address %d is not host:port (credentials go in $%s and $%s, not in addresses)",
				flagName, i+1, envRedisPassword, envSentinelPassword)
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			return nil, usageErrorf("%s: address %d is not host:port", flagName, i+1)
		}
		if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
			return nil, usageErrorf("%s: address %d has a bad port", flagName, i+1)
		}
		addrs = append(addrs, a)
	}
	if len(addrs) == 0 {
		return nil, usageErrorf("%s: no address", flagName)
	}
	return addrs, nil
}

func (f connFlags) wantTLS() bool {
	return f.tlsCA != "" || f.tlsCert != "" || f.tlsKey != "" || f.tlsInsecure
}

// tlsConfig completes base (from a rediss:// URL, or empty) with the TLS
// flags.
func (f connFlags) tlsConfig(base *tls.Config) (*tls.Config, error) {
	cfg := base.Clone()
	if cfg.MinVersion == 0 {
		cfg.MinVersion = tls.VersionTLS12
	}
	if f.tlsCA != "" {
		pem, err := os.ReadFile(f.tlsCA)
		if err != nil {
			return nil, usageErrorf("--tls-ca: %v", fileError(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageErrorf("--tls-ca: no PEM certificate in %s", f.tlsCA)
		}
		cfg.RootCAs = pool
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return nil, usageErrorf("--tls-cert and --tls-key go together")
	}
	if f.tlsCert != "" {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return nil, usageErrorf("--tls-cert %s / --tls-key %s: %v", f.tlsCert, f.tlsKey, fileError(err))
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	if f.tlsInsecure {
		cfg.InsecureSkipVerify = true
	}
	return cfg, nil
}

// fileError drops the operation from a path error ("open x: no such file").
func fileError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %v", pe.Path, pe.Err)
	}
	return err
}

// urlSecrets returns the password a URL may hold, as it is written and
// decoded, for scrub: the text between the first ':' after "://" and the
// last '@', and the values of secret query parameters.
func urlSecrets(raw string) []string {
	var out []string
	_, rest, ok := strings.Cut(raw, "://")
	if !ok {
		rest = raw
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		userinfo := rest[:at]
		if _, pass, ok := strings.Cut(userinfo, ":"); ok {
			out = append(out, pass)
		} else {
			out = append(out, userinfo)
		}
	}
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		for _, p := range strings.Split(rest[q+1:], "&") {
			if name, v, ok := strings.Cut(p, "="); ok && secretParam(name) {
				out = append(out, v)
			}
		}
	}
	return out
}

// hint says what an error from a dial or a handshake most likely means.
func (i connInfo) hint(err error) string {
	var ua x509.UnknownAuthorityError
	var hi x509.HostnameError
	var ci x509.CertificateInvalidError
	switch {
	case errors.As(err, &ua):
		return "the server's certificate is signed by a CA this machine does not trust: pass it with --tls-ca FILE"
	case errors.As(err, &hi):
		return "the server's certificate is not for this host name: connect by a name it lists, or --tls-insecure (tests only)"
	case errors.As(err, &ci):
		return "the server's certificate is not valid (expired?)"
	}
	msg := err.Error()
	var re redis.Error
	if errors.As(err, &re) {
		msg = re.Error() // the server's reply, without the gate's wrapping
	}
	switch {
	case !i.tls && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)):
		return "the server closed the connection at once: if it expects TLS, use a rediss:// URL (with --tls-ca FILE for a private CA)"
	case i.tls && strings.Contains(msg, "first record does not look like a TLS handshake"):
		return "the server does not speak TLS there: use a redis:// URL, or its tls-port"
	case i.tls && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || strings.Contains(msg, "certificate required") || strings.Contains(msg, "bad certificate")):
		return "the server ended the TLS handshake: it may require a client certificate (--tls-cert FILE --tls-key FILE) signed by a CA it trusts"
	case strings.HasPrefix(msg, "TRYAGAIN"):
		return "a cluster slot is moving and this job's keys are split between two nodes for now: retry in a moment"
	case strings.HasPrefix(msg, "OOM"):
		return "Redis is full (maxmemory reached, noeviction): free memory or raise maxmemory; reads and reset still work"
	case strings.HasPrefix(msg, "READONLY"):
		return "this server is a replica: point the CLI at the master, or use --sentinel ADDRS --master NAME"
	case strings.HasPrefix(msg, "NOPERM"):
		return "the Redis user lacks a permission the command needs (see docs/operating.md, ACL users)"
	case strings.HasPrefix(msg, "WRONGPASS"), strings.HasPrefix(msg, "NOAUTH"):
		return "check the user name and password (in the URL, or $" + envRedisPassword + ")"
	}
	return ""
}
