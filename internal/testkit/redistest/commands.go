package redistest

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Commands is a go-redis hook that records the names of the commands a
// client sends, one entry per round trip: a command alone as its name
// ("evalsha"), a pipeline as its names in brackets ("[set evalsha]").
// go-redis's own commands (a new connection's HELLO and CLIENT SETINFO,
// a cluster client's CLUSTER, COMMAND, READONLY and PING) are not
// recorded, and a pipeline of only those is no entry. Add it with
// AddHook (on a cluster, to each node's client that should be seen).
// The zero value records; it is safe for concurrent use.
type Commands struct {
	mu    sync.Mutex
	names []string
	after func()
}

// Take returns the entries recorded since the last Take, oldest first.
func (c *Commands) Take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.names
	c.names = nil
	return n
}

// AfterNextPipeline runs f once, right after the next pipeline is
// answered and before anything the sender does next: another client's
// write between a trip's pipeline and a command it sends again.
func (c *Commands) AfterNextPipeline(f func()) {
	c.mu.Lock()
	c.after = f
	c.mu.Unlock()
}

// ClientCommand reports whether name is one go-redis sends of its own
// (a handshake or a cluster client's topology), not the caller's.
func ClientCommand(name string) bool {
	switch name {
	case "cluster", "command", "hello", "ping", "readonly", "client":
		return true
	}
	return false
}

func (c *Commands) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *Commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); !ClientCommand(n) {
			c.record(n)
		}
		return next(ctx, cmd)
	}
}

func (c *Commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var names []string
		for _, cmd := range cmds {
			if n := cmd.Name(); !ClientCommand(n) {
				names = append(names, n)
			}
		}
		if len(names) > 0 {
			c.record("[" + strings.Join(names, " ") + "]")
		}
		err := next(ctx, cmds)
		if len(names) > 0 {
			c.mu.Lock()
			after := c.after
			c.after = nil
			c.mu.Unlock()
			if after != nil {
				after()
			}
		}
		return err
	}
}

func (c *Commands) record(name string) {
	c.mu.Lock()
	c.names = append(c.names, name)
	c.mu.Unlock()
}
