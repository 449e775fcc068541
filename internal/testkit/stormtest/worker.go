package stormtest

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/retrygate/retrygate/gate"
)

// WorkerGate is a storm worker process's gate: the upstream "llm" on rdb
// under prefix, a 2 s lease, the provider's window as the upstream's
// cooldown, and no jitter.
func WorkerGate(rdb gate.Client, prefix string, window time.Duration) (*gate.Gate, error) {
	return gate.New(rdb, gate.Options{Prefix: prefix, Upstream: "llm", Lease: 2 * time.Second,
		UpstreamPolicy: gate.UpstreamPolicy{Cooldown: window},
		Backoff:        gate.Backoff{Jitter: -1}})
}

// RunWorker is a storm worker process's main (the test binary StartWorker
// runs again): it decodes raw, the JSON StartWorker passed, into cfg (a
// pointer), calls start, and once SIGTERM or SIGINT comes, the stop start
// returned. It returns the process's exit code: 0, or 2 where the config
// or start failed, 1 where stop failed; the error goes to stderr, which
// StartWorker logs.
func RunWorker(raw string, cfg any, start func() (stop func() error, err error)) int {
	if err := json.Unmarshal([]byte(raw), cfg); err != nil {
		fmt.Fprintln(os.Stderr, "worker config:", err)
		return 2
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sig)
	stop, err := start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker start:", err)
		return 2
	}
	<-sig
	if err := stop(); err != nil {
		fmt.Fprintln(os.Stderr, "worker stop:", err)
		return 1
	}
	return 0
}
