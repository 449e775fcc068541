package gate

import (
	"fmt"

	"github.com/retrygate/retrygate/internal/keyspace"
)

// checkJob validates a job key.
func checkJob(job string) error {
	switch {
	case job == "":
		return invalidJob("empty")
	case len(job) > MaxJobLen:
		return invalidJob(fmt.Sprintf("%d bytes, over the %d-byte limit", len(job), MaxJobLen))
	}
	return nil
}

type jobKeys struct {
	lock, meta string
	both       [2]string // {lock, meta}: the scripts' KEYS without a slice allocation
}

// jobKeys builds both keys of job (layout: internal/keyspace).
func (g *Gate) jobKeys(job string) jobKeys {
	var k jobKeys
	k.lock, k.meta = keyspace.Job(g.opts.Prefix, job)
	k.both = [2]string{k.lock, k.meta}
	return k
}
