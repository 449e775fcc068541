// Package faultproxy is a TCP proxy for integration tests that sits
// between a client and a real server (typically redis-server) and injects
// network faults at run time: latency, a blackhole that swallows traffic,
// refused connections and connection resets (RST).
//
// It is test-only infrastructure: import it from _test.go files only.
//
// A Proxy listens on a free 127.0.0.1 port and dials its target once per
// accepted connection. Its switches apply at once, to new and live
// connections alike. It is closed in t.Cleanup, which resets every live
// connection and waits for all of its goroutines to end. All methods are
// safe for concurrent use.
package faultproxy
