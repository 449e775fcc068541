// Package engine reads which server a gate talks to (Redis, Valkey,
// KeyDB, Dragonfly, Garnet), its version and its memory, and the settings
// of its engine that can break the gate's lock, for gate.Check and
// retrygate check. It reads (INFO, CONFIG GET, a script that reads one key)
// and never writes or changes a server's configuration. Safe for
// concurrent use.
package engine
