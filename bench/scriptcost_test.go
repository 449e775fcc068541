package main

import (
	"context"
	"strings"
	"testing"

	"github.com/retrygate/retrygate/internal/testkit/redistest"
)

// TestScriptCost runs the probe of where a success's Redis time goes
// against a real redis-server: each provider's success runs the acquire,
// the budget's record, the calls' record and the job's settle once; a
// provider that reports a budget also gives the line's turns (its call
// was reserved against a reading).
func TestScriptCost(t *testing.T) {
	srv := redistest.Server(t)
	var out strings.Builder
	if err := scriptCost(context.Background(), srv.Addr(), 20, &out); err != nil {
		t.Fatal(err)
	}
	noHeaders, headers, ok := strings.Cut(out.String(), "OpenAI headers")
	if !ok {
		t.Fatalf("no OpenAI provider in:\n%s", out.String())
	}
	for _, part := range []string{noHeaders, headers} {
		for _, s := range []string{"acquire (acquire_budget.lua)", "budget record (budget_record.lua)", "calls record (calls_record.lua)", "job settle (job_settle.lua)"} {
			if !strings.Contains(part, s+" ") || !strings.Contains(part[strings.Index(part, s+" "):], "runs/success 1.00") {
				t.Errorf("exp %q once a success in:\n%s", s, part)
			}
		}
	}
	if give := "the line's give (line_give.lua) "; strings.Contains(noHeaders, give) || !strings.Contains(headers, give) {
		t.Errorf("exp the line's give once a success only where a reading judged the call:\n%s", out.String())
	}
}
