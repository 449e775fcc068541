package main

import (
	"bytes"
	"context"
	"log"
	"os"
	"strings"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/internal/testkit/gatetest"
)

// A caller that went away while Redis was slow to answer (its deadline
// passed mid-call, as a closed request's context ends) is not told the
// service is busy, and nothing is logged as a Redis outage: the
// Quickstart's ErrUnavailable branch is for operators.
func TestCanceledCallerIsNotAnOutage(t *testing.T) {
	rdb, cfg, calls, stop := localBackends(answerOK)
	t.Cleanup(stop)
	slow := &gatetest.Flaky{Client: rdb}
	slow.Hang.Store(true) // answers nothing until the caller's context ends
	g, err := gate.New(slow, gate.Options{Cooldown: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	log.SetOutput(&logged)
	t.Cleanup(func() { log.SetOutput(os.Stderr) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	out := summarise(ctx, g, openai.NewClientWithConfig(cfg), "document-42")
	if strings.Contains(out, "busy") || strings.Contains(logged.String(), gate.ErrUnavailable.Error()) || calls.Load() != 0 {
		t.Fatalf("a cancelled caller: %q, logged %q, %d model calls", out, logged.String(), calls.Load())
	}
}
