package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/keyspace"
)

// cli holds the global flags and the streams of one run.
type cli struct {
	stdout, stderr io.Writer
	getenv         func(string) string

	conn     connFlags
	prefix   string
	shadow   bool
	upstream string
	json     bool
	timeout  time.Duration

	rdb  redis.UniversalClient
	info connInfo // how rdb reaches Redis, for messages
	// handshake is the last TLS handshake that got no TLS answer.
	handshake atomic.Pointer[handshakeFailure]
}

// command is one subcommand.
type command struct {
	name    string
	args    string // positional arguments, for usage
	summary string
	flags   func(fs *flagSet)
	// redis is set when the command talks to Redis: it reads the
	// connection flags and --timeout.
	redis bool
	// prefix and upstream are set when the command reads --prefix,
	// --upstream.
	prefix, upstream bool
	run              func(ctx context.Context, c *cli, args []string) error
}

func (c *cli) commands() []*command {
	return []*command{
		statusCommand(), resetCommand(), listCommand(), upstreamCommand(), checkCommand(), calibrateCommand(), explainCommand(),
	}
}

const (
	defaultURL     = "redis://127.0.0.1:6379"
	defaultTimeout = 10 * time.Second
)

// globalFlags registers the global flags on fs, each defaulting to its
// current value, so they may come before or after the command.
func (c *cli) globalFlags(fs *flag.FlagSet) {
	c.conn.register(fs)
	fs.StringVar(&c.prefix, "prefix", c.prefix, "the gate's Options.Prefix `P`")
	fs.BoolVar(&c.shadow, "shadow", c.shadow, "read what a shadow gate (Options.Shadow) decided")
	fs.StringVar(&c.upstream, "upstream", c.upstream, "the gate's Options.Upstream `U`")
	fs.BoolVar(&c.json, "json", c.json, "print JSON")
	durationVar(fs, &c.timeout, "timeout", c.timeout, "bound for the whole command, a duration `D`")
}

func (c *cli) main(ctx context.Context, args []string) error {
	c.prefix = keyspace.DefaultPrefix
	c.timeout = defaultTimeout
	fs := newFlagSet("retrygate")
	c.globalFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			c.usage(c.stdout)
			return nil
		}
		return usageErrorf("%s (see retrygate help)", flagError(err))
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
		return usageErrorf("unknown command %q (commands: %s)", echo(name), c.names())
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
			c.commandUsage(c.stdout, cmd)
			return nil
		}
		return usageErrorf("%s: %s%s (see retrygate help %s)", cmd.name, flagError(err), jobFlagHint(cmd, err), cmd.name)
	}
	if c.timeout <= 0 {
		return usageErrorf("%s: --timeout must be positive", cmd.name)
	}
	if c.prefix, err = parseName("--prefix", c.prefix); err != nil {
		return err
	}
	if c.shadow {
		c.prefix = keyspace.Shadow(c.prefix)
	}
	if c.upstream, err = parseName("--upstream", c.upstream); err != nil {
		return err
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
// the server and the cause without the gate's wrapping, and a hint when
// the cause is a common setup mistake (TLS, ACL, a replica).
func (c *cli) describe(err error) string {
	if h := c.handshake.Load(); h != nil && c.info.tls {
		return h.describe()
	}
	var msg string
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		msg = fmt.Sprintf("redis at %s: no answer within --timeout %v", c.info.addr, c.timeout)
	case errors.Is(err, gate.ErrUnavailable), errors.Is(err, gate.ErrRedisRefused):
		cause := err
		if m, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range m.Unwrap() {
				if e != gate.ErrUnavailable && e != gate.ErrRedisRefused {
					cause = e
				}
			}
		}
		msg = fmt.Sprintf("redis at %s: %v", c.info.addr, cause)
		if errors.Is(err, gate.ErrRedisRefused) {
			msg = fmt.Sprintf("redis at %s refused: %v", c.info.addr, cause)
		}
	default:
		msg = err.Error()
	}
	if h := c.info.hint(err); h != "" {
		msg += " (" + h + ")"
	}
	return msg
}

// jobFlagHint is, for a command that takes a JOB, how to pass the
// argument the flag package took for a flag ("status -1"): after "--".
func jobFlagHint(cmd *command, err error) string {
	if !strings.Contains(cmd.args, "JOB") {
		return ""
	}
	msg := err.Error()
	for _, p := range []string{"flag provided but not defined: ", "flag needs an argument: "} {
		if i := strings.Index(msg, p); i >= 0 {
			arg := msg[i+len(p):]
			return fmt.Sprintf("; a JOB that starts with '-' goes after --: retrygate %s -- %s", cmd.name, argQuote(arg))
		}
	}
	return ""
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

// gate returns a gate over the client with the flags' prefix; withUpstream
// adds --upstream (without it, or with none named, the gate reads no
// upstream: name gate.DefaultUpstream to read a default gate's). gate.New
// never connects.
func (c *cli) gate(withUpstream bool) (*gate.Gate, error) {
	opts := gate.Options{Prefix: c.prefix, UpstreamPolicy: gate.UpstreamPolicy{Off: true}}
	if withUpstream && c.upstream != "" {
		opts.Upstream, opts.UpstreamPolicy.Off = c.upstream, false
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
