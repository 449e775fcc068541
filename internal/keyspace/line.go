package keyspace

// Line returns the keys of an upstream's line (gate/internal/line): the
// callers waiting for a turn in order (a sorted set), when each entry's
// lease ends (a sorted set), the line's counters and fair-share tags (a
// hash), and the prefix of each process's list of turns given
// (<grants><owner>, also the channel that wakes it). All live in the
// upstream's slot.
func Line(prefix, upstream string) (line, expiry, meta, grants string) {
	key := prefix + ":upstream:{" + Encode(upstream) + "}:line"
	return key, key + ":exp", key + ":meta", key + ":grant:"
}
