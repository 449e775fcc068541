package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
)

// The line (issue 38): 100,000 callers waiting at once in one upstream's
// line, from 4 processes. The line is internal to package gate, so the
// row runs its own benchmark, gate/internal/line's
// BenchmarkHundredThousandWaiting (on a redis-server of its own), once,
// and reads the metrics it reports.

// lineBench is the benchmark the row runs, from the repository's root.
var lineBench = []string{"test", "-run", "^$", "-bench", "^BenchmarkHundredThousandWaiting$", "-benchtime", "1x", "./gate/internal/line/"}

// lineRow is what it measured.
type lineRow struct {
	// usedMemory and memoryUsage are the bytes of Redis memory per
	// waiting caller: INFO memory's used_memory, and MEMORY USAGE of the
	// line's keys.
	usedMemory, memoryUsage float64
	// trips is the Redis round trips per admitted call; renewal one
	// process's renewal of its 25,000 places, in ns.
	trips, renewal float64
}

// runLine runs the line's benchmark in root (the repository) and parses
// its metrics.
func runLine(ctx context.Context, root string, log io.Writer) (*lineRow, error) {
	cmd := exec.CommandContext(ctx, "go", lineBench...)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go %s: %w\n%s", strings.Join(lineBench, " "), err, out.String())
	}
	r, err := parseLine(out.String())
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "line  100,000 waiting: %.0f B each (used_memory), %.0f (MEMORY USAGE); %.2f round trips per admitted call\n",
		r.usedMemory, r.memoryUsage, r.trips)
	return r, nil
}

// parseLine reads the benchmark's result line: pairs of a value and its
// unit after the name and the iterations.
func parseLine(out string) (*lineRow, error) {
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[0], "BenchmarkHundredThousandWaiting") {
			continue
		}
		r := &lineRow{}
		got := map[string]*float64{
			"B/waiting(used_memory)": &r.usedMemory, "B/waiting(MEMORY_USAGE)": &r.memoryUsage,
			"roundtrips/admitted": &r.trips, "ns/renewal": &r.renewal,
		}
		for i := 2; i+1 < len(f); i += 2 {
			if p, ok := got[f[i+1]]; ok {
				v, err := strconv.ParseFloat(f[i], 64)
				if err != nil {
					return nil, fmt.Errorf("line benchmark: %q: %w", f[i], err)
				}
				*p = v
				delete(got, f[i+1])
			}
		}
		if len(got) > 0 {
			return nil, fmt.Errorf("line benchmark: no %d of its metrics in %q", len(got), sc.Text())
		}
		return r, nil
	}
	return nil, fmt.Errorf("line benchmark: no result in:\n%s", out)
}

// lineMarkdown writes the line's row.
func (r *results) lineMarkdown(b *strings.Builder) {
	if r.line == nil {
		return
	}
	x := r.line
	b.WriteString("\n## A place in line (issue 38)\n\n" +
		"100,000 callers wait at once in one upstream's line, from 4 processes (3 classes, 100 tenants), each with its job's mark " +
		"(the place any process reads, `gate.Status`); the budget then gives turns 100 at a time until each has had its own. " +
		"`gate/internal/line`'s `BenchmarkHundredThousandWaiting`, run once on a redis-server of its own.\n\n")
	b.WriteString("| bytes per waiting caller (used_memory) | (MEMORY USAGE of the keys) | round trips per admitted call | one process's renewal of 25,000 places |\n")
	b.WriteString("|---:|---:|---:|---:|\n")
	fmt.Fprintf(b, "| %.0f | %.0f | %.2f | %.1f ms |\n", x.usedMemory, x.memoryUsage, x.trips, x.renewal/1e6)
}
