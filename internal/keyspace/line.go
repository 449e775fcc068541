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

// LineMark returns the key of a job's mark in an upstream's line: the
// place its caller holds while it waits, so any process can read it
// (gate.Status). It lives in the upstream's slot.
func LineMark(prefix, upstream, job string) string {
	return prefix + ":upstream:{" + Encode(upstream) + "}:line:job:" + Encode(job)
}
