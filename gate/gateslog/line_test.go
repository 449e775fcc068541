package gateslog_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/retrygate/retrygate/gate"
	"github.com/retrygate/retrygate/gate/gateslog"
)

// An admitted or refused call's line says its place: its class unless
// the default, its tenant, and how long it waited in line; a call of the
// default class and tenant that did not wait says nothing more.
func TestLogsThePlaceInLine(t *testing.T) {
	log, buf := newLogger(slog.LevelDebug)
	o := gateslog.New(log, gateslog.Options{})
	ctx := context.Background()
	o.Observe(ctx, gate.Event{Kind: gate.EventAcquired, Job: "a", Priority: gate.PriorityInteractive, Tenant: "acme", Waited: 1500 * time.Millisecond})
	o.Observe(ctx, gate.Event{Kind: gate.EventRefused, Job: "b", State: gate.UpstreamCooling, Priority: gate.PriorityBatch, Tenant: "globex", Waited: 3 * time.Second})
	o.Observe(ctx, gate.Event{Kind: gate.EventAcquired, Job: "c", Priority: gate.PriorityNormal})
	lines := logLines(t, buf)
	if len(lines) != 3 {
		t.Fatalf("%d lines, exp 3: %v", len(lines), lines)
	}
	for i, exp := range []map[string]any{
		{"priority": "interactive", "tenant": "acme", "waited": 1.5e9},
		{"priority": "batch", "tenant": "globex", "waited": 3e9},
		{"priority": nil, "tenant": nil, "waited": nil},
	} {
		for k, v := range exp {
			if got := lines[i][k]; got != v {
				t.Errorf("line %d: %s = %v, exp %v (%v)", i, k, got, v, lines[i])
			}
		}
	}
}
