package main

import (
	"fmt"
	"io"
	"strings"
)

const usageHead = `retrygate inspects and clears the state a retrygate gate keeps in Redis.

Usage:
  retrygate [global flags] COMMAND [flags] [args]

Commands:
`

const usageTail = globalFlagsText + `
Names holding control characters, quotes or bytes that are not UTF-8 are printed
as Go string literals ("doc\x00"); every name argument (JOB, --upstream, --prefix,
--match, --reason) takes that form back, so printed commands can be pasted.

Passwords for --sentinel and --cluster ADDRS come from the environment only:
$RETRYGATE_REDIS_USERNAME, $RETRYGATE_REDIS_PASSWORD (the data nodes),
$RETRYGATE_SENTINEL_USERNAME, $RETRYGATE_SENTINEL_PASSWORD (the sentinels).
TLS is on with rediss://, or with any --tls-* flag for --cluster ADDRS and --sentinel.
No message ever shows a password.
` + exitCodesText + `
Run 'retrygate help COMMAND' for a command's flags.
`

// globalFlagsText lists the global flags, for the top-level usage and
// every command's.
const globalFlagsText = `
Global flags (before or after the command):
  --redis URL         redis:// or rediss:// URL (default $RETRYGATE_REDIS, else $REDIS_URL,
                      else redis://127.0.0.1:6379); a password goes in the URL, percent-encoded
  --cluster ADDRS     Redis Cluster: comma-separated host:port seeds, or a cluster URL ($RETRYGATE_CLUSTER)
  --sentinel ADDRS    Sentinel: comma-separated host:port of the sentinels ($RETRYGATE_SENTINEL)
  --master NAME       the master name the sentinels monitor ($RETRYGATE_MASTER)
  --tls-ca FILE       PEM CA for the server's certificate ($RETRYGATE_TLS_CA)
  --tls-cert FILE     PEM client certificate, with --tls-key ($RETRYGATE_TLS_CERT, $RETRYGATE_TLS_KEY)
  --tls-key FILE
  --tls-insecure      do not verify the server's certificate ($RETRYGATE_TLS_INSECURE=1)
  --prefix P          the gate's Options.Prefix (default "retrygate")
  --shadow            read what a shadow gate (Options.Shadow) decided
  --upstream U        the gate's Options.Upstream
  --json              print JSON instead of tables; errors too ({"error", "exit_code"} on stdout)
  --timeout D         bound for the whole command (default 10s)
`

const exitCodesText = `
Exit codes:
  0  success
  1  runtime error: Redis unreachable or failing
  2  usage error: unknown command or flag, bad duration or state, missing or invalid JOB, bad URL
  3  condition not met: calibrate's takeover bound exceeds --takeover-slo; check found a warning
  4  reset refused: the job is running
`

func (c *cli) usage(w io.Writer) {
	fmt.Fprint(w, usageHead)
	tw := table(w)
	for _, cmd := range c.commands() {
		row(tw, "  "+strings.TrimSpace(cmd.name+" "+cmd.args), cmd.summary)
	}
	row(tw, "  help [COMMAND]", "this text, or a command's flags")
	tw.Flush()
	fmt.Fprint(w, usageTail)
}

// commandUsage prints a command's own flags, in the style of the global
// flags listed below them, from a flag set of its own: the flags parsed so
// far would show as defaults, and a --redis URL may hold a password.
func (c *cli) commandUsage(w io.Writer, cmd *command) {
	fmt.Fprintf(w, "Usage: retrygate %s [flags] %s\n\n%s.\n", cmd.name, cmd.args, cmd.summary)
	if strings.Contains(cmd.args, "JOB") {
		fmt.Fprintf(w, "A JOB that starts with '-' goes after --: retrygate %s -- -h\n", cmd.name)
	}
	if cmd.flags != nil {
		fs := newFlagSet("retrygate " + cmd.name)
		cmd.flags(fs)
		fmt.Fprint(w, "\nFlags:\n")
		printFlags(w, fs)
	}
	fmt.Fprint(w, commandGlobals(cmd)+exitCodesText)
}

// commandGlobals is globalFlagsText with only the global flags cmd reads:
// --json always; the connection flags and --timeout when it talks to
// Redis; --prefix and --upstream when it names keys by them.
func commandGlobals(cmd *command) string {
	uses := func(name string) bool {
		switch name {
		case "json":
			return true
		case "prefix":
			return cmd.prefix
		case "upstream":
			return cmd.upstream
		}
		return cmd.redis
	}
	lines := strings.SplitAfter(strings.TrimPrefix(globalFlagsText, "\n"), "\n")
	out := []string{"\n" + lines[0]} // the heading
	keep := false
	for _, l := range lines[1:] {
		if name, ok := strings.CutPrefix(l, "  --"); ok {
			name, _, _ = strings.Cut(name, " ")
			keep = uses(strings.TrimSpace(name))
		}
		if keep {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

func (c *cli) help(args []string) error {
	if len(args) == 0 {
		c.usage(c.stdout)
		return nil
	}
	if args[0] == "help" {
		_, err := fmt.Fprint(c.stdout, "Usage: retrygate help [COMMAND]\n\nThe commands and global flags, or a command's flags.\n")
		return err
	}
	cmd := c.find(args[0])
	if cmd == nil {
		return usageErrorf("help: unknown command %q (commands: %s)", echo(args[0]), c.names())
	}
	c.commandUsage(c.stdout, cmd)
	return nil
}
