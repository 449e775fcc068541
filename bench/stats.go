package main

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// serverUsec sums the server's time in the named commands since the last
// CONFIG RESETSTAT (INFO commandstats usec).
func serverUsec(ctx context.Context, admin *redis.Client, cmds []string) (float64, error) {
	info, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	stats := parseCommandStats(info)
	var usec float64
	for _, c := range cmds {
		usec += stats[c].usec
	}
	return usec, nil
}

type cmdStat struct {
	calls int64
	usec  float64
}

// parseCommandStats reads lines such as
// "cmdstat_evalsha:calls=3,usec=42,usec_per_call=14.00,...".
func parseCommandStats(info string) map[string]cmdStat {
	stats := map[string]cmdStat{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var s cmdStat
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				s.calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				s.usec, _ = strconv.ParseFloat(v, 64)
			}
		}
		stats[strings.TrimPrefix(name, "cmdstat_")] = s
	}
	return stats
}
