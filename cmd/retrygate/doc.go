// Command retrygate inspects and clears the state a retrygate gate keeps in
// Redis, and computes a lease TTL from measured call durations.
//
// Usage:
//
//	retrygate [global flags] COMMAND [flags] [args]
//
// Commands:
//
//	status JOB        a job's state, time left, attempts, reason, fence and raw keys;
//	                  --route PATTERN: JOB is the id of a job httpmw keyed by that
//	                  route (URLParam on it, URLParamAs with it)
//	reset JOB         clear a job's cooldown, failed or done mark and its attempts;
//	                  --route PATTERN as for status
//	list              jobs that hold a key: --state cooling|failed|running|done, --limit N,
//	                  --match TEXT
//	upstream status   the upstream's cooldown or pause (needs --upstream)
//	upstream reset    end the upstream's cooldown or pause (needs --upstream)
//	upstream pause    pause the upstream's calls in every process: --for D (it ends
//	                  by itself), --reason R (shown with every refusal)
//	upstream resume   end an operator's pause before its time
//	explain [FILE]    what the gate does with a failed response, or with what Go's
//	                  HTTP client logged for no response (timeout, refused, DNS)
//	check             warn when maxmemory-policy can evict cooldown keys, or Redis
//	                  persists nothing (a restart would forget every mark)
//	calibrate         lease TTL, renew interval and crash takeover bound from --p99
//	                  (a duration with its unit, 18s; at most 1h)
//	help [COMMAND]    this text, or a command's flags
//
// Global flags (before or after the command):
//
//	--redis URL       redis:// or rediss:// URL (default $RETRYGATE_REDIS, else
//	                  $REDIS_URL, else redis://127.0.0.1:6379)
//	--cluster ADDRS   a Redis Cluster: comma-separated host:port seeds, or a URL for
//	                  redis.ParseClusterURL (redis://host:port?addr=host2:port2)
//	--sentinel ADDRS  Sentinel: the sentinels' host:port, comma-separated, with
//	--master NAME     the master name they monitor
//	--tls-ca FILE     PEM CA that signed the server's certificate
//	--tls-cert FILE   PEM client certificate, with --tls-key FILE
//	--tls-insecure    do not verify the server's certificate (tests only)
//	--prefix P        the gate's Options.Prefix (default "retrygate")
//	--upstream U      the gate's Options.Upstream, for upstream commands and status
//	--json            print JSON instead of tables; errors too
//	--timeout D       bound for the whole command (default 10s)
//
// Each connection flag has an environment variable used when the flag is
// not given: RETRYGATE_REDIS (then REDIS_URL), RETRYGATE_CLUSTER,
// RETRYGATE_SENTINEL, RETRYGATE_MASTER, RETRYGATE_TLS_CA,
// RETRYGATE_TLS_CERT, RETRYGATE_TLS_KEY, RETRYGATE_TLS_INSECURE=1.
// Passwords come from the URL (percent-encoded) or, for --sentinel and
// --cluster ADDRS, from RETRYGATE_REDIS_USERNAME, RETRYGATE_REDIS_PASSWORD,
// RETRYGATE_SENTINEL_USERNAME and RETRYGATE_SENTINEL_PASSWORD; never from
// a flag (ps shows flags). No message, log line or JSON output shows a
// password: a URL that does not parse is shown with its credentials
// replaced by xxxxx, and the reason in fixed words.
//
// status JOB finds a job by its key; status --route PATTERN ID builds the
// key httpmw.URLParam builds on that chi route, and URLParamAs with that
// pattern ("/documents/{id}/evaluate 42"); reset takes the same arguments. When JOB holds no key, status lists
// jobs whose key contains it; list --match TEXT does the same search.
//
// Without --upstream, status cannot know which upstream the job's gate
// uses (it is not in Redis), so it looks for every upstream under the prefix
// (SCAN on every master, at most a million keys per node and 1.5 s) and
// reports each one cooling down or paused: it refuses every job of a gate
// with that Options.Upstream. A prefix with no key at all is reported as such
// (a wrong --prefix), by status and by a list that found nothing, and a
// search that could not finish (no SCAN permission, the bound) says that
// it does not know. It prints no command to reset those upstreams (the
// job's gate may not use them); with --upstream it prints the reset, or the
// resume after an operator's pause.
//
// A JOB that starts with '-' goes after "--" (status -- -1), as every
// command the CLI prints writes it, so that a printed command pastes; one
// typed without it is refused with the command to type instead.
//
// Names are printed escaped: a job, upstream or reason holding control
// characters, a double quote, a backslash or bytes that are not UTF-8 is
// shown as a Go string literal ("doc\x00\r\n"), never raw. Every name
// argument (JOB, --upstream, --prefix, --match, --reason) reads that form
// back: an argument in double quotes is a Go string literal, anything else
// is taken as is, so a printed name or command can be pasted. With --json,
// names are JSON strings, and a job whose name differs from its printed
// form also has "job_quoted", the form to pass back (JSON cannot carry
// bytes that are not UTF-8).
//
// A rediss:// URL (or --tls-* flags) pointed at a server that answers
// plain-text Redis fails within about a second, saying so: the CLI asks a
// plain PING after a TLS handshake that got no TLS answer.
//
// Connections use a 1 s dial timeout, 2 s read and write timeouts and no
// retries, so an unreachable Redis fails within about two seconds. list uses
// SCAN (on every master of a cluster), never KEYS.
//
// Exit codes:
//
//	0  success
//	1  runtime error: Redis unreachable or failing
//	2  usage error: unknown command or flag, bad duration, bad state, missing or invalid JOB, bad URL
//	3  condition not met: calibrate's takeover bound exceeds --takeover-slo;
//	   check found a warning
//	4  reset refused: the job is running (wait for it to settle or its lease to expire)
//
// Errors are one line on stderr, starting with "retrygate: ", or with
// --json a JSON object {"error": ..., "exit_code": ...} on stdout.
package main
