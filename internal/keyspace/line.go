package keyspace

// Line returns the keys of an upstream's line (gate/internal/line): the
// callers waiting for a turn in order (a sorted set), the processes that
// wait by the end of their lease (a sorted set; <owners>:<owner> is a
// set of one process's places), the line's counters and fair-share tags
// (a hash), and the prefix of each process's list of turns given
// (<grants><owner>, also the channel that wakes it). All live in the
// upstream's slot.
func Line(prefix, upstream string) (line, owners, meta, grants string) {
	key := prefix + ":upstream:{" + Encode(upstream) + "}:line"
	return key, key + ":owners", key + ":meta", key + ":grant:"
}
