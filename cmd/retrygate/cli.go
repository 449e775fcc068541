package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/retrygate/retrygate/internal/keyspace"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
)

// cli holds the global flags and the streams of one run.
type cli struct {
	stdout, stderr io.Writer
	getenv         func(string) string

	redisURL string
	cluster  string
	prefix   string
	scope    string
	json     bool
	timeout  time.Duration

	rdb  redis.UniversalClient
	addr string // for messages
}

// command is one subcommand.
type command struct {
	name    string
	args    string // positional arguments, for usage
	summary string
	flags   func(fs *flagSet)
	// redis is set when the command talks to Redis.
	redis bool
	run   func(ctx context.Context, c *cli, args []string) error
}

func (c *cli) commands() []*command {
	return []*command{
		statusCommand(), resetCommand(), listCommand(), scopeCommand(), checkCommand(), calibrateCommand(),
	}
}

const defaultURL = "redis://127.0.0.1:6379"

// globalFlags registers the global flags on fs, each defaulting to its
// current value, so they may come before or after the command.
func (c *cli) globalFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.redisURL, "redis", c.redisURL, "Redis `URL` (redis:// or rediss://); default $REDIS_URL, else "+defaultURL)
	fs.StringVar(&c.cluster, "cluster", c.cluster, "Redis Cluster seed `ADDRS`, comma-separated, or a cluster URL")
	fs.StringVar(&c.prefix, "prefix", c.prefix, "the gate's key `prefix`")
	fs.StringVar(&c.scope, "scope", c.scope, "the gate's upstream `scope`")
	fs.BoolVar(&c.json, "json", c.json, "print JSON")
	fs.DurationVar(&c.timeout, "timeout", c.timeout, "bound for the whole command")
}

func (c *cli) main(ctx context.Context, args []string) error {
	c.prefix = keyspace.DefaultPrefix
	c.timeout = 10 * time.Second
	fs := newFlagSet("retrygate")
	c.globalFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.usage(c.stdout)
			return nil
		}
		return usageErrorf("%v (see retrygate help)", err)
	}
	rest := fs.Args()
	if len(rest) == 0 {
		return usageErrorf("missing COMMAND (commands: %s)", c.names())
	}
	name, rest := rest[0], rest[1:]
	if name == "help" {
		return c.help(rest)
	}
	cmd := c.find(name)
	if cmd == nil {
		return usageErrorf("unknown command %q (commands: %s)", name, c.names())
	}
	return c.runCommand(ctx, cmd, rest)
}

func (c *cli) find(name string) *command {
	for _, cmd := range c.commands() {
		if cmd.name == name {
			return cmd
		}
	}
	return nil
}

func (c *cli) names() string {
	var n []string
	for _, cmd := range c.commands() {
		n = append(n, cmd.name)
	}
	return strings.Join(append(n, "help"), ", ")
}

func (c *cli) runCommand(ctx context.Context, cmd *command, args []string) error {
	fs := newFlagSet("retrygate " + cmd.name)
	c.globalFlags(fs)
	if cmd.flags != nil {
		cmd.flags(fs)
	}
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.commandUsage(c.stdout, cmd, fs)
			return nil
		}
		return usageErrorf("%s: %v (see retrygate help %s)", cmd.name, err, cmd.name)
	}
	if c.timeout <= 0 {
		return usageErrorf("%s: --timeout must be positive", cmd.name)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if cmd.redis {
		if err := c.connect(); err != nil {
			return err
		}
		defer c.rdb.Close()
	}
	if err := cmd.run(ctx, c, pos); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				ee.msg = cmd.name + ": " + ee.msg
				if ee.code == exitUsage {
					ee.msg += " (see retrygate help " + cmd.name + ")"
				}
			}
			return ee
		}
		return &exitError{code: exitRuntime, msg: cmd.name + ": " + c.describe(err)}
	}
	return nil
}

// describe words a runtime error for an operator: a Redis failure names
// the server and the cause without the gate's wrapping.
func (c *cli) describe(err error) string {
	if errors.Is(err, gate.ErrUnavailable) {
		cause := err
		if m, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range m.Unwrap() {
				if e != gate.ErrUnavailable {
					cause = e
				}
			}
		}
		return fmt.Sprintf("redis at %s: %v", c.addr, cause)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Sprintf("redis at %s: no answer within --timeout %v", c.addr, c.timeout)
	}
	return err.Error()
}

// parseInterspersed parses flags anywhere among the positional arguments
// ("status JOB --json"); "--" ends the flags, for a JOB starting with '-'.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// fs.Parse stops at the first non-flag, or consumes "--" and stops.
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are reported in one line by run
	return fs
}

// quietLogger silences go-redis's own log lines: the CLI reports errors in
// one line of its own.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

var silenceRedis sync.Once

// connect builds the Redis client from the flags; it does not dial yet.
func (c *cli) connect() error {
	silenceRedis.Do(func() { redis.SetLogger(quietLogger{}) })
	url := c.redisURL
	if url == "" && c.cluster == "" {
		url = c.getenv("REDIS_URL")
	}
	if url != "" && c.cluster != "" && c.redisURL != "" {
		return usageErrorf("--redis and --cluster are exclusive")
	}
	const (
		dial = time.Second
		io   = 2 * time.Second
	)
	if c.cluster != "" {
		var opts *redis.ClusterOptions
		if strings.Contains(c.cluster, "://") {
			o, err := redis.ParseClusterURL(c.cluster)
			if err != nil {
				return usageErrorf("bad --cluster URL: %v", err)
			}
			opts = o
		} else {
			opts = &redis.ClusterOptions{}
			for _, a := range strings.Split(c.cluster, ",") {
				if a = strings.TrimSpace(a); a != "" {
					opts.Addrs = append(opts.Addrs, a)
				}
			}
			if len(opts.Addrs) == 0 {
				return usageErrorf("--cluster: no address")
			}
		}
		opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = dial, io, io
		opts.MaxRetries = -1
		opts.ContextTimeoutEnabled = true
		opts.PoolSize = 8
		c.rdb = redis.NewClusterClient(opts)
		c.addr = "cluster " + strings.Join(opts.Addrs, ",")
		return nil
	}
	if url == "" {
		url = defaultURL
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return usageErrorf("bad Redis URL: %v", err)
	}
	opts.DialTimeout, opts.ReadTimeout, opts.WriteTimeout = dial, io, io
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	opts.ContextTimeoutEnabled = true
	opts.PoolSize = 8
	c.rdb = redis.NewClient(opts)
	c.addr = opts.Addr
	return nil
}

// gate returns a gate over the client with the flags' prefix; withScope
// adds --scope. gate.New never connects.
func (c *cli) gate(withScope bool) (*gate.Gate, error) {
	opts := gate.Options{Prefix: c.prefix}
	if withScope {
		opts.Scope = c.scope
	}
	g, err := gate.New(c.rdb, opts)
	if err != nil {
		if errors.Is(err, gate.ErrInvalidOptions) {
			return nil, usageErrorf("%s", strings.TrimPrefix(err.Error(), "gate: invalid options: "))
		}
		return nil, err
	}
	return g, nil
}

type flagSet = flag.FlagSet
