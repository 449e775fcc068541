// Command quickstart wraps one go-openai call with gate.Call: the smallest
// use of retrygate. With OPENAI_API_KEY (and REDIS_URL) set it calls the
// real API; without, it runs on an embedded Redis and a tiny local model.
//
//	go run ./examples/quickstart
package main
