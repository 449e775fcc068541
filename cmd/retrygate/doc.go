// Command retrygate inspects and clears the state a retrygate gate keeps in
// Redis, and computes a lease TTL from measured call durations.
//
// Usage:
//
//	retrygate [global flags] COMMAND [flags] [args]
//
// Commands:
//
//	status JOB        a job's state, time left, attempts, reason, fence and raw keys
//	reset JOB         clear a job's cooldown, failed or done mark and its attempts
//	list              jobs that hold a key: --state cooling|failed|running|done, --limit N
//	scope status      the upstream scope's cooldown or pause (needs --scope)
//	scope reset       end the upstream scope's cooldown or pause (needs --scope)
//	check             warn when maxmemory-policy can evict cooldown keys
//	calibrate         lease TTL, renew interval and crash takeover bound from --p99
//	help [COMMAND]    this text, or a command's flags
//
// Global flags (before or after the command):
//
//	--redis URL       redis:// or rediss:// URL (default $REDIS_URL, else redis://127.0.0.1:6379)
//	--cluster ADDRS   a Redis Cluster: comma-separated host:port seeds, or a URL for
//	                  redis.ParseClusterURL (redis://host:port?addr=host2:port2)
//	--prefix P        the gate's Options.Prefix (default "retrygate")
//	--scope S         the gate's Options.Scope, for scope commands and status
//	--json            print JSON instead of tables
//	--timeout D       bound for the whole command (default 10s)
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
// Errors are one line on stderr, starting with "retrygate: ".
package main
