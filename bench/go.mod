module github.com/retrygate/retrygate/bench

go 1.24.0

require (
	github.com/bsm/redislock v0.9.4
	github.com/go-chi/chi/v5 v5.5.0
	github.com/go-chi/httprate v0.16.1
	github.com/go-redsync/redsync/v4 v4.15.0
	github.com/redis/go-redis/v9 v9.22.0
	github.com/retrygate/retrygate v0.0.0-00010101000000-000000000000
)

require (
	github.com/alicebob/miniredis/v2 v2.40.0 // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/hashicorp/errwrap v1.1.0 // indirect
	github.com/hashicorp/go-multierror v1.1.1 // indirect
	github.com/klauspost/cpuid/v2 v2.2.10 // indirect
	github.com/sashabaranov/go-openai v1.43.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	github.com/zeebo/xxh3 v1.1.0 // indirect
	go.uber.org/atomic v1.11.0 // indirect
	golang.org/x/sys v0.34.0 // indirect
)

// Development only: build against the working tree. The go command ignores
// a replace in a dependency's go.mod, so a user gets the version required
// above, which make release sets to the release being tagged.
replace github.com/retrygate/retrygate => ../
