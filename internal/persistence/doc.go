// Package persistence reads whether a Redis server keeps its keys across
// a restart, for gate.Check and retrygate check: a gate's Redis that
// persists nothing forgets every cooldown, failed and done mark when it
// restarts, and those jobs run again. It only reads (CONFIG GET, INFO) and
// never changes a server's configuration. Safe for concurrent use.
package persistence
