package keyspace

import (
	"strconv"
	"strings"
)

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

// LineMark returns the key of a job's mark in an upstream's line, for
// the job whose key is jobKey (Job): the place its caller holds while it
// waits, so any process can read it (gate.Status). It lives in the
// upstream's slot. The job's name is encoded once, in its key.
func LineMark(prefix, upstream, jobKey string) string {
	return prefix + ":upstream:{" + Encode(upstream) + "}:line:job:" + tagOf(prefix, jobKey)
}

// LineMember is a member of an upstream's line, decoded: the one reading
// of the layout line_join.lua writes (gate/internal/store/lua), for the
// gate and for the CLI that shows who waits.
type LineMember struct {
	// Class is the caller's class, 0-255 (gate.Priority).
	Class int
	// Seq is the caller's arrival in the line, counting up.
	Seq int64
	// Quantum is what a turn adds to its tenant's tag: 1000 / the
	// tenant's weight (gate.WithTenant).
	Quantum int64
	// Deadline is when the caller stops waiting, in Unix milliseconds.
	Deadline int64
	// Owner is the process that waits; Tenant the caller's tenant.
	Owner, Tenant string
}

// ParseLineMember decodes a line member: <255-class, 3 digits><start
// tag, 15 digits><sequence, 12 digits>:<quantum>:<deadline ms>:<owner>:
// <tenant>. The tenant is the rest, and may contain ':'.
func ParseLineMember(m string) (LineMember, bool) {
	const head = 3 + 15 + 12
	if len(m) < head+1 || m[head] != ':' {
		return LineMember{}, false
	}
	desc, err1 := strconv.Atoi(m[:3])
	seq, err2 := strconv.ParseInt(m[18:head], 10, 64)
	if err1 != nil || err2 != nil || desc < 0 || desc > 255 || seq < 0 {
		return LineMember{}, false
	}
	parts := strings.SplitN(m[head+1:], ":", 4) // quantum, deadline, owner, tenant
	if len(parts) != 4 {
		return LineMember{}, false
	}
	quantum, err1 := strconv.ParseInt(parts[0], 10, 64)
	deadline, err2 := strconv.ParseInt(parts[1], 10, 64)
	if err1 != nil || err2 != nil {
		return LineMember{}, false
	}
	return LineMember{Class: 255 - desc, Seq: seq, Quantum: quantum, Deadline: deadline, Owner: parts[2], Tenant: parts[3]}, true
}
