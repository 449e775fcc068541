// Command storm replays a retry storm against an embedded Redis and prints
// how many upstream (model) calls each locking approach lets through:
//
//   - a lock released in a finally block: the lock only stops concurrent
//     duplicates, so every retry after a failure calls the model again;
//   - retrygate's leaky lock: a failure turns the lock into a cooldown, so
//     retries inside the cooldown are refused without a call.
//
// Time is simulated: the embedded Redis's clock is moved forward between
// retries instead of sleeping, so a minute takes well under a second.
//
//	go run ./examples/storm
package main
