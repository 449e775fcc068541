module github.com/retrygate/retrygate/internal/testkit/proof/linearizability

go 1.24

require (
	github.com/anishathalye/porcupine v1.3.1
	github.com/redis/go-redis/v9 v9.22.0
	github.com/retrygate/retrygate v0.0.0-00010101000000-000000000000
)

require (
	github.com/alicebob/miniredis/v2 v2.40.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.34.0 // indirect
)

// Development only: build against the working tree. The go command ignores
// a replace in a dependency's go.mod, so a user gets the version required
// above, which make release sets to the release being tagged.
replace github.com/retrygate/retrygate => ../../../..
